"""Start gate: wait until other jobs of the namespace have completed, fail fast if one failed.

This file is a program as well as a module: its source runs as ``python3 -c`` in an init container of a dependent
job, with the job's own image (every training image has Python; the script needs only the standard library). It
asks the Kubernetes API for the status of each job it waits for, with the pod's service-account token.

    python3 start_gate.py <namespace> [<kind>/<name> ...]   kind: job (batch/v1), vcjob (Volcano), trainjob, pytorchjob

An argument may hold several references separated by spaces (what ``$(VAR)`` expansion of one environment variable
gives). Exit 0 when every job has completed (at once when there is none), 1 as soon as one has failed, 2 on a usage
error; it polls every POLL_SECONDS.
"""

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request

USAGE = "usage: start_gate.py <namespace> [<job|vcjob|trainjob|pytorchjob>/<name> ...]"
POLL_SECONDS = int(os.environ.get("START_GATE_POLL_SECONDS", "20"))
ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
PATHS = {
    "job": "/apis/batch/v1/namespaces/{ns}/jobs/{name}",
    "vcjob": "/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs/{name}",
    "trainjob": "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}",
    "pytorchjob": "/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs/{name}",
}
DONE_CONDITIONS = {"job": "Complete", "trainjob": "Complete", "pytorchjob": "Succeeded"}
"""The condition that says a job of each kind has finished well (batch/v1 and Kubeflow Trainer: Complete; the
training operator v1: Succeeded); every kind says Failed when it has failed."""
VOLCANO_DONE = {"Completed"}
VOLCANO_FAILED = {"Failed", "Aborted", "Terminated"}


def api_base():
    """The API server URL: START_GATE_API_URL, else the in-cluster service address."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    return os.environ.get("START_GATE_API_URL", f"https://{host}:{port}")


def fetch(url):
    """GET ``url`` as JSON with the service-account token; None when the object does not exist (yet).

    Server errors and unreachable servers raise ``ConnectionError`` (the caller retries); anything else (401, 403:
    the pod's service account may not read jobs) raises ``PermissionError``."""
    request = urllib.request.Request(url)
    context = None
    if url.startswith("https:"):
        context = ssl.create_default_context(cafile=os.path.join(ACCOUNT, "ca.crt"))
        with open(os.path.join(ACCOUNT, "token")) as token:
            request.add_header("Authorization", "Bearer " + token.read().strip())
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        if error.code >= 500:
            raise ConnectionError(f"{url}: HTTP {error.code}") from error
        raise PermissionError(f"{url}: HTTP {error.code} {error.reason}") from error
    except (urllib.error.URLError, OSError) as error:
        raise ConnectionError(f"{url}: {error}") from error


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


def main(argv):
    refs = [ref for arg in argv[1:] for ref in arg.split()]
    if not argv or any(ref.count("/") != 1 or ref.split("/")[0] not in PATHS for ref in refs):
        print(USAGE, file=sys.stderr)
        return 2
    if not refs:
        print("start gate: nothing to wait for", flush=True)
        return 0
    namespace, waits = argv[0], [ref.split("/") for ref in refs]
    while True:
        pending = []
        for kind, name in waits:
            try:
                found = state(kind, fetch(api_base() + PATHS[kind].format(ns=namespace, name=name)))
            except ConnectionError as error:
                print(f"start gate: API not reachable, retrying: {error}", flush=True)
                found = "waiting"
            except PermissionError as error:
                print(f"start gate: cannot read {kind}/{name}: {error}", flush=True)
                return 1
            if found == "failed":
                print(f"start gate: {kind}/{name} failed; not starting", flush=True)
                return 1
            if found == "waiting":
                pending.append(f"{kind}/{name}")
        if not pending:
            print("start gate: every job this one waits for has completed", flush=True)
            return 0
        print(f"start gate: waiting for {', '.join(pending)} in namespace {namespace}", flush=True)
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
