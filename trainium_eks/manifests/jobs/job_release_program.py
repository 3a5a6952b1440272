"""Job release: create a held job once every job it waits for has completed, holding nothing the jobs need meanwhile.

This file is a program as well as a module: its source runs as ``python3 -c`` in the release Job of a held job
(:class:`~trainium_eks.manifests.jobs.job_release.JobReleaseChart`), a small pod on the system nodes with Python's
standard library only. It reads the status of each job it waits for with its service account's token, and when all have
completed it creates the held job, owned by the release Job (so that deleting the release Job deletes the held job
too, by Kubernetes' garbage collector). Until then the held job does not exist: no pod, no PodGroup, nothing reserved
in a Volcano queue, whatever order the jobs arrive in and however often a job it waits for restarts.

    python3 job_release_program.py <namespace> <release job> [<kind>/<name> ...]
    HELD_JOB   the held job's manifest (JSON)     kind: job (batch/v1), vcjob (Volcano), trainjob, pytorchjob

It gives up after its release Job's ``activeDeadlineSeconds`` less :data:`DEADLINE_MARGIN_SECONDS` (read from the Job,
so that the deadline can change without changing the pod template, which is immutable).

A job it waits for that does not exist yet may be held itself: when the release Job of that name
(``<name>-release``) has failed, that job will never exist, and neither will this one; so a failure travels down a
chain of held jobs at once instead of each later release waiting out its deadline.

Exit status: 0 when the held job exists (created now, or by an earlier attempt of the same release Job); 3 when it
never will: a job it waits for failed (or its release did), the wait timed out, the API server refused the held job
(an admission webhook, a missing permission) or an object of that name exists that this release did not create; 2 on
a usage error; 1 on anything else. The release Job's pod failure policy fails the Job at once on 2 and 3 and retries
the rest.
"""

import datetime
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request

USAGE = "usage: job_release_program.py <namespace> <release job> [<kind>/<name> ...]"
POLL_SECONDS = int(os.environ.get("JOB_RELEASE_POLL_SECONDS", "20"))
ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
NEVER = 3
"""Exit status when the held job will never be created; the release Job fails at once (podFailurePolicy FailJob)."""
DEADLINE_MARGIN_SECONDS = 600
"""The program gives up this long before its Job's ``activeDeadlineSeconds``, so that it says which job it gave up on
before Kubernetes stops it."""

API = {
    "job": ("batch/v1", "Job", "/apis/batch/v1/namespaces/{ns}/jobs"),
    "vcjob": ("batch.volcano.sh/v1alpha1", "Job", "/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs"),
    "trainjob": (
        "trainer.kubeflow.org/v1alpha1",
        "TrainJob",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs",
    ),
    "pytorchjob": ("kubeflow.org/v1", "PyTorchJob", "/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs"),
}
"""Reference kind -> (apiVersion, kind, collection path) of the job kinds a release waits for or creates."""

DONE_CONDITIONS = {"job": "Complete", "trainjob": "Complete", "pytorchjob": "Succeeded"}
"""The condition that says a job of each kind has finished well (batch/v1 and Kubeflow Trainer: Complete; the
training operator v1: Succeeded); each of them says Failed when it has failed for good."""
VOLCANO_DONE = {"Completed"}
VOLCANO_FAILED = {"Failed", "Terminated"}
"""Terminal phases of a Volcano Job (``status.state.phase``): Completed, and those it never leaves otherwise
(volcano v1.15.1 ``pkg/controllers/job/state/factory.go`` ``NewState`` gives them the finished state). An
``Aborted`` job can be resumed (``aborted.go``), so it is waited for."""


class Refused(Exception):
    """The API server refused a request for good (403, a webhook's denial, an invalid object)."""


def api_base():
    """The API server URL: JOB_RELEASE_API_URL, else the in-cluster service address."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    return os.environ.get("JOB_RELEASE_API_URL", f"https://{host}:{port}")


def request(url, body=None):
    """GET ``url`` (or POST ``body`` to it) as JSON with the service-account token; None when the object does not
    exist. Raises ``ConnectionError`` when the server is unreachable or answers 5xx, 409 (a conflict), 429 (API
    priority and fairness throttling) or 408 (the caller retries), ``Refused`` on any other error, with the server's
    message."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    req.add_header("Accept", "application/json")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    context = None
    if url.startswith("https:"):
        context = ssl.create_default_context(cafile=os.path.join(ACCOUNT, "ca.crt"))
        with open(os.path.join(ACCOUNT, "token")) as token:
            req.add_header("Authorization", "Bearer " + token.read().strip())
    try:
        with urllib.request.urlopen(req, context=context, timeout=30) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        if error.code == 404 and body is None:
            return None
        if error.code >= 500 or error.code in (408, 409, 429):
            raise ConnectionError(f"{url}: HTTP {error.code}") from error
        raise Refused(f"HTTP {error.code}: {server_message(error)}") from error
    except (urllib.error.URLError, OSError) as error:
        raise ConnectionError(f"{url}: {error}") from error


def server_message(error):
    """The ``message`` of a Kubernetes Status in an HTTP error, else its reason."""
    try:
        return json.loads(error.read().decode()).get("message") or error.reason
    except (ValueError, OSError, AttributeError):
        return error.reason


def ref_of(manifest):
    """``<kind>/<name>`` of a job manifest (``vcjob/x``), or None when it is not a job kind of :data:`API`."""
    for kind, (api_version, object_kind, _) in API.items():
        if manifest.get("apiVersion") == api_version and manifest.get("kind") == object_kind:
            return f"{kind}/{(manifest.get('metadata') or {}).get('name', '')}"
    return None


def object_path(namespace, ref):
    """The API path of the job ``<kind>/<name>``."""
    kind, name = ref.split("/")
    return API[kind][2].format(ns=namespace) + "/" + name


def state(kind, job):
    """'done', 'failed' or 'waiting' for a job object of ``kind`` (None: not created yet)."""
    if job is None:
        return "waiting"
    status = job.get("status") or {}
    if kind == "vcjob":
        phase = (status.get("state") or {}).get("phase", "")
        return "done" if phase in VOLCANO_DONE else "failed" if phase in VOLCANO_FAILED else "waiting"
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    if conditions.get(DONE_CONDITIONS[kind]) == "True":
        return "done"
    if conditions.get("Failed") == "True":
        return "failed"
    return "waiting"


def release_of(ref):
    """The reference of the release Job that would create the job ``ref`` (``job/<name>-release``)."""
    return "job/" + ref.split("/", 1)[1] + "-release"


def wait_states(waits, read):
    """``ref -> state`` of every job in ``waits``, reading each with ``read(ref)`` (the object, or None when it does
    not exist); a missing job whose release Job has failed is 'failed': it will never exist."""
    states = {}
    for ref in waits:
        found = read(ref)
        states[ref] = state(ref.split("/")[0], found)
        if found is None and state("job", read(release_of(ref))) == "failed":
            states[ref] = "failed"
    return states


def decide(states):
    """What to do given ``ref -> state`` of every job waited for: ('create', ''), ('fail', the failed job) or
    ('wait', the jobs still running or not yet created)."""
    failed = sorted(ref for ref, found in states.items() if found == "failed")
    if failed:
        return "fail", ", ".join(failed)
    pending = sorted(ref for ref, found in states.items() if found != "done")
    return ("wait", ", ".join(pending)) if pending else ("create", "")


def owned_by(obj, uid):
    """Whether ``obj`` names the object of ``uid`` among its owners."""
    return any(owner.get("uid") == uid for owner in (obj.get("metadata") or {}).get("ownerReferences") or ())


def owned_manifest(manifest, owner_name, owner_uid):
    """``manifest`` owned by the release Job ``owner_name``: the garbage collector deletes it with that Job."""
    owned = json.loads(json.dumps(manifest))
    owned.setdefault("metadata", {})["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": owner_name, "uid": owner_uid}
    ]
    return owned


def give_up_time(release_job):
    """When to give up (seconds since the epoch): the release Job's start plus its ``activeDeadlineSeconds`` less
    :data:`DEADLINE_MARGIN_SECONDS`; None without a deadline. A Job not yet started counts from now."""
    deadline = (release_job.get("spec") or {}).get("activeDeadlineSeconds")
    if not deadline:
        return None
    started = (release_job.get("status") or {}).get("startTime")
    try:
        start = datetime.datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp() if started else time.time()
    except (AttributeError, ValueError):
        start = time.time()
    return start + max(0, int(deadline) - DEADLINE_MARGIN_SECONDS)


def parse(argv, environ):
    """(namespace, release job, waits, held manifest, held ref), or None on a usage error."""
    if len(argv) < 2:
        return None
    refs = [ref for arg in argv[2:] for ref in arg.split()]
    if any(ref.count("/") != 1 or ref.split("/")[0] not in API for ref in refs):
        return None
    try:
        held = json.loads(environ.get("HELD_JOB", ""))
    except ValueError:
        return None
    held_ref = ref_of(held) if isinstance(held, dict) else None
    if not held_ref or held_ref.endswith("/"):
        return None
    return argv[0], argv[1], refs, held, held_ref


def main(argv, environ=os.environ):
    parsed = parse(argv, environ)
    if parsed is None:
        print(USAGE + "\n(HELD_JOB: the held job's manifest as JSON, of a kind listed above)", file=sys.stderr)
        return 2
    namespace, release, waits, held, held_ref = parsed
    gives_up_at = None
    base = api_base()
    owner_uid = None
    while True:
        try:
            if owner_uid is None:
                own = request(base + object_path(namespace, f"job/{release}")) or {}
                owner_uid = own["metadata"]["uid"]
                gives_up_at = give_up_time(own)
            existing = request(base + object_path(namespace, held_ref))
            if existing is not None:
                if owned_by(existing, owner_uid):
                    print(f"job release: {held_ref} exists (created by this release)", flush=True)
                    return 0
                print(
                    f"job release: {held_ref} exists and was not created by job/{release}; not touching it", flush=True
                )
                return NEVER
            action, detail = decide(wait_states(waits, lambda ref: request(base + object_path(namespace, ref))))
            if action == "fail":
                print(f"job release: {detail} failed (or its release did); {held_ref} is not created", flush=True)
                return NEVER
            if action == "create":
                collection = API[held_ref.split("/")[0]][2].format(ns=namespace)
                request(base + collection, owned_manifest(held, release, owner_uid))
                after = f" after {', '.join(waits)} completed" if waits else ""
                print(f"job release: created {held_ref}{after}", flush=True)
                return 0
            message = f"waiting for {detail} in namespace {namespace} before creating {held_ref}"
        except ConnectionError as error:
            message = f"API not reachable, retrying: {error}"
        except Refused as error:
            print(f"job release: the API server refused a request for {held_ref}: {error}", flush=True)
            return NEVER
        except (KeyError, TypeError) as error:
            print(f"job release: cannot read job/{release}'s uid ({error!r}); retrying", flush=True)
            return 1
        if gives_up_at is not None and time.time() >= gives_up_at:
            print(f"job release: gave up at the release Job's deadline, {message}", flush=True)
            return NEVER
        print(f"job release: {message}", flush=True)
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
