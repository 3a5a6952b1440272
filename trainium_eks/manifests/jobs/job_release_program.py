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

A held gang (a Volcano Job, PyTorchJob or TrainJob of two pods or more: :func:`gang_pods`) gets every node it needs
before it exists (:class:`Capacity`): Volcano gang-schedules a job only when all its pods fit, and when part of the
gang fits on nodes already up it marks those pods schedulable, and Karpenter, which launches nodes only for pods marked
unschedulable, then launches too few and the gang waits forever (volcano-sh/volcano v1.15.1
``pkg/scheduler/api/job_info.go``; kubernetes-sigs/karpenter v1.14.1 ``pkg/utils/pod/scheduling.go``). So the release
first creates capacity Jobs of the gang's exact pods (requests, placement) on the default scheduler, which binds each
to a node with room or marks it unschedulable for Karpenter; once every pod is bound it deletes them, waits until
they are gone and creates the gang, which then finds every node it needs empty. An attempt that does not hold every
node within ``trainium-eks/capacity-timeout-seconds`` (an annotation of the held job; default 1800) gives every node
back and records a ``CapacityNotHeld`` event on the release Job; after ``trainium-eks/capacity-pause-seconds`` (600)
it tries again, up to ``trainium-eks/capacity-attempts`` (3), then fails the release (exit status 3). When Karpenter
says that the gang's own NodePool (``trainium-eks/capacity-node-pool``) is at its limit for a capacity pod (its nodes
are held by other jobs), the attempt gives every node back at once, records ``CapacityQueued`` and does not count:
the gang waits for the pool's nodes, holding none, for ``trainium-eks/capacity-queue-seconds`` (24 hours) in all.
Once created,
a gang is watched until it ends (:class:`GangWatch`): a restart that leaves a pod placed but not started for
``trainium-eks/capacity-stall-seconds`` (300) has the release delete the gang, hold all its nodes again and create it
anew, up to ``trainium-eks/capacity-restarts`` (3) times.

A held job's pods admit connections from each other only: the release labels its pod templates
(``trainium-eks/ingress-policy: <job>-peers``, :func:`peer_labelled`; a staging Job's, which admit nothing, keep
theirs) and, first of all, creates that NetworkPolicy, owned by the release Job like the job (:func:`peers_policy`);
no other pod of the namespace, another job's included, reaches them.

A gang that is a fabric check (its manifest carries ``trainium-eks/fabric-check-for``) and fails because a few of its
nodes are slow is given new nodes (:class:`FabricSuspects`): when node 0's ``fabric`` container ended with exit status
6 and a termination message that names the suspect nodes (measured pair by pair), and the check's nodes come from a
Karpenter NodePool (``trainium-eks/capacity-node-pool``), the release taints each suspect node
``trainium-eks/fabric-suspect=<check>:NoSchedule``, records ``FabricSuspect``, deletes the check, holds all its nodes
again and creates it anew: the tainted nodes no longer fit the gang, so Karpenter launches new ones, and the tainted
ones, emptied, go with its consolidation. It does so up to ``trainium-eks/fabric-suspect-rounds`` (2) times. Without
a NodePool (a managed node group would not replace a tainted node, which would stay billed), or once the rounds are
used up, it taints nothing, records ``FabricSuspectsRemain`` (the nodes, and how to replace them by hand) and ends as
for any failed check, which fails the release of the job it guards.

A job it waits for that does not exist yet may be held itself: when the release Job of that name
(``<name>-release``) has failed, that job will never exist, and neither will this one; so a failure travels down a
chain of held jobs at once instead of each later release waiting out its deadline.

Exit status: 0 when the held job exists (created now, or by an earlier attempt of the same release Job), and for a
gang once it has ended (or the release Job's deadline ended the watch); 3 when it never will: a job it waits for
failed (or its release did), the wait timed out, its nodes could not be held in any attempt, a gang stalled more
often than allowed, it was deleted by someone else while watched, the API server refused the held job
(an admission webhook, a missing permission) or an object of that name (or its peers policy's) exists that this
release did not create; 2 on
a usage error; 1 on anything else. The release Job's pod failure policy fails the Job at once on 2 and 3 and retries
the rest.
"""

import datetime
import json
import os
import random
import re
import ssl
import sys
import time
import urllib.error
import urllib.parse
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


class Conflict(ConnectionError):
    """409: the object changed since it was read (an update with its ``resourceVersion``), or a create found it."""


def api_base():
    """The API server URL: JOB_RELEASE_API_URL, else the in-cluster service address."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    return os.environ.get("JOB_RELEASE_API_URL", f"https://{host}:{port}")


def request(url, body=None, method=None, content_type="application/json"):
    """GET ``url`` (or POST ``body`` to it; or ``method`` with ``body``, of ``content_type``) as JSON with the
    service-account token; None when the object does not exist (a GET, PATCH or DELETE). Raises ``ConnectionError``
    when the server is unreachable or answers 5xx, 409 (a conflict: :class:`Conflict`), 429 (API priority and fairness
    throttling) or 408 (the caller retries), ``Refused`` on any other error, with the server's message."""
    data = None if body is None else json.dumps(body).encode()
    method = method or ("GET" if body is None else "POST")
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Accept", "application/json")
    if data is not None:
        req.add_header("Content-Type", content_type)
    context = None
    if url.startswith("https:"):
        context = ssl.create_default_context(cafile=os.path.join(ACCOUNT, "ca.crt"))
        with open(os.path.join(ACCOUNT, "token")) as token:
            req.add_header("Authorization", "Bearer " + token.read().strip())
    try:
        with urllib.request.urlopen(req, context=context, timeout=30) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        if error.code == 404 and method in ("GET", "PATCH", "DELETE"):
            return None
        if error.code == 409:
            raise Conflict(f"{url}: HTTP 409: {server_message(error)}") from error
        if error.code >= 500 or error.code in (408, 429):
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
    not exist); a missing job whose release Job has failed is 'failed': it will never exist; a failed fabric check
    whose release Job still runs is 'waiting': its release may run it again on new nodes (:class:`FabricSuspects`)."""
    states = {}
    for ref in waits:
        found = read(ref)
        states[ref] = state(ref.split("/")[0], found)
        if found is None and state("job", read(release_of(ref))) == "failed":
            states[ref] = "failed"
        if states[ref] == "failed" and FABRIC_CHECK_LABEL in ((found or {}).get("metadata") or {}).get("labels", {}):
            release = read(release_of(ref))
            if release is not None and state("job", release) == "waiting":
                states[ref] = "waiting"
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


RECREATED_ANNOTATION = "trainium-eks/recreated-by-release"
"""Annotation of a held job its release deleted and created again, the count so far: a gang that stalled on part of
its nodes (:class:`GangWatch`) or a fabric check whose suspects got new nodes (:class:`FabricSuspects`). Its
controller's own restart count (a Volcano job's ``status.retryCount``) starts from zero in each new object; this
keeps the count for ``python -m trainium_eks status``."""


def owned_manifest(manifest, owner_name, owner_uid, recreated=0):
    """``manifest`` owned by the release Job ``owner_name`` (the garbage collector deletes it with that Job); with
    ``recreated`` (the times the release created it before), :data:`RECREATED_ANNOTATION` says so, and without, the
    manifest carries none."""
    owned = json.loads(json.dumps(manifest))
    metadata = owned.setdefault("metadata", {})
    metadata["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner_name, "uid": owner_uid}]
    (metadata.get("annotations") or {}).pop(RECREATED_ANNOTATION, None)
    if recreated:
        metadata.setdefault("annotations", {})[RECREATED_ANNOTATION] = str(recreated)
    return owned


def recreated_count(job):
    """:data:`RECREATED_ANNOTATION` of ``job`` as a number (0 without it or when it is not one)."""
    text = str(((job.get("metadata") or {}).get("annotations") or {}).get(RECREATED_ANNOTATION, "0"))
    return int(text) if text.isdigit() else 0


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


# --- capacity: every node of a gang, held before the gang exists -----------------------------------------------

CAPACITY_COMPONENT = "job-capacity"
"""The ``app.kubernetes.io/name`` of the capacity Jobs, whose pods hold a gang's nodes until the gang is created."""
CAPACITY_LABEL = "trainium-eks/capacity-for"
"""Label of a capacity Job and its pods: the name of the held job whose nodes they hold."""
CAPACITY_SETTINGS = {
    "timeout": ("trainium-eks/capacity-timeout-seconds", 1800),
    "attempts": ("trainium-eks/capacity-attempts", 3),
    "pause": ("trainium-eks/capacity-pause-seconds", 600),
    "stall": ("trainium-eks/capacity-stall-seconds", 300),
    "restarts": ("trainium-eks/capacity-restarts", 3),
    "queue": ("trainium-eks/capacity-queue-seconds", 86400),
}
"""Setting -> (the held job's annotation that sets it, its default): how long one attempt may take to hold every
node (30 minutes), how many attempts (3), and how long to wait between two (10 minutes, so that nodes launched in a
failed attempt and given back can be reused or consolidated); how long a created gang may wait with a pod placed but
not started before its release takes it back to hold its nodes again (5 minutes: :class:`GangWatch`), and how often
it may do so (3); how long, in all, the gang may wait for its NodePool's nodes held by other jobs without its
attempts counting (24 hours; :data:`POOL_LIMIT`)."""
NODE_POOL_ANNOTATION = "trainium-eks/capacity-node-pool"
"""Annotation of a held gang: the Karpenter NodePool that launches its nodes (the job charts write it from
``TrainingNodePool.topology``); without it a pool's limit is never taken for a wait."""
POOL_LIMIT = re.compile(
    r"(?:node limits have been exhausted|all available instance types exceed limits) for nodepool "
    r"\(NodePool=([^,)]+)[,)]"
)
"""What Karpenter says, per NodePool, in a pod's ``FailedScheduling`` event when that pool's limits leave no room for a
node (kubernetes-sigs/karpenter v1.14.1 ``pkg/controllers/provisioning/scheduling/scheduler.go``
``addToNewNodeClaim``, wrapped with the pool's name by operatorpkg's ``serrors.Wrap``; ``events.go``
``PodFailedToScheduleEvent``: ``Failed to schedule pod, <errors of every pool>``). Karpenter checks a pool's limits
before whether the pod fits it at all, so a pool the pod cannot use may say so too: only the gang's own pool
(:data:`NODE_POOL_ANNOTATION`) counts."""
QUEUE_JITTER = 0.5
"""A pause after a full pool lasts up to this much longer, at random, so that two gangs that found the pool full in
the same round of Karpenter's do not come back together and split its nodes again."""
HOLD_POLL_SECONDS = 5
"""How often a release looks at its capacity pods once they hold every node, until they are gone."""
_PLACEMENT = ("nodeSelector", "affinity", "tolerations", "topologySpreadConstraints", "priorityClassName")


def gang_pods(held):
    """``[(count, pod spec)]`` of the pods the gang ``held`` will run, read from its manifest: a Volcano Job's tasks,
    a PyTorchJob's replica specs, a TrainJob's ``numNodes`` trainer pods (the pod spec of its ``runtimePatches`` for
    the ``node`` replicated job, with ``resourcesPerNode``). Empty when it is not a gang of two pods or more (a
    batch/v1 Job, a TrainJob that leaves ``numNodes`` to its runtime): such a job needs no capacity held first."""
    kind = (ref_of(held) or "/").split("/")[0]
    spec = held.get("spec") or {}
    if kind == "vcjob":
        shapes = [(t.get("replicas", 1), (t.get("template") or {}).get("spec") or {}) for t in spec.get("tasks") or ()]
    elif kind == "pytorchjob":
        replicas = (spec.get("pytorchReplicaSpecs") or {}).values()
        shapes = [(r.get("replicas", 1), (r.get("template") or {}).get("spec") or {}) for r in replicas]
    elif kind == "trainjob":
        trainer = spec.get("trainer") or {}
        pod = {}
        for template in job_pod_templates(held):
            pod.update(template.get("spec") or {})
        pod["containers"] = [{"name": "node", "resources": trainer.get("resourcesPerNode") or {}}]
        shapes = [(trainer.get("numNodes", 1), pod)]
    else:
        return []
    shapes = [(int(count), pod) for count, pod in shapes if int(count) > 0]
    return shapes if sum(count for count, _ in shapes) > 1 else []


INGRESS_POLICY_LABEL = "trainium-eks/ingress-policy"
"""Label of pods whose ingress a NetworkPolicy of their own governs, its value that policy's name
(``trainium_eks.core.conventions.INGRESS_POLICY_LABEL``)."""
NO_INGRESS_POLICY = "namespace-baseline"
"""The value of :data:`INGRESS_POLICY_LABEL` on pods that admit no connection at all, such as a dataset staging Job's
(``trainium_eks.core.conventions.NO_INGRESS_POLICY``): a release leaves them so."""
PEERS_SUFFIX = "-peers"
NETWORK_POLICIES = "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"


def peers_policy_name(job_name):
    """The name of the NetworkPolicy that lets the pods of the job ``job_name`` reach each other: ``<job>-peers``."""
    return job_name + PEERS_SUFFIX


def job_pod_templates(held):
    """The pod templates of the job ``held`` (``{"metadata": ..., "spec": ...}``, in place): a batch/v1 Job's, a
    Volcano Job's tasks', a PyTorchJob's replica specs', a TrainJob's ``node`` pod template in its
    ``runtimePatches`` (a TrainJob without one leaves its pods to its runtime's template)."""
    spec = held.get("spec") or {}
    kind = (ref_of(held) or "/").split("/")[0]
    if kind == "job":
        return [spec["template"]] if isinstance(spec.get("template"), dict) else []
    if kind == "vcjob":
        return [task["template"] for task in spec.get("tasks") or () if isinstance(task.get("template"), dict)]
    if kind == "pytorchjob":
        replicas = (spec.get("pytorchReplicaSpecs") or {}).values()
        return [replica["template"] for replica in replicas if isinstance(replica.get("template"), dict)]
    found = []
    for patch in spec.get("runtimePatches") or ():
        template = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        for replicated in (template.get("spec") or {}).get("replicatedJobs") or ():
            job_spec = ((replicated.get("template") or {}).get("spec")) or {}
            if replicated.get("name") == "node" and isinstance(job_spec.get("template"), dict):
                found.append(job_spec["template"])
    return found


def peer_templates(held):
    """The pod templates of ``held`` whose pods admit their own job's pods: all but those labelled
    :data:`NO_INGRESS_POLICY`."""
    return [
        template
        for template in job_pod_templates(held)
        if ((template.get("metadata") or {}).get("labels") or {}).get(INGRESS_POLICY_LABEL) != NO_INGRESS_POLICY
    ]


def unlabelled_pods(held):
    """Whether ``held`` is a TrainJob of more than one node, or of the runtime's count, whose ``node`` pod template
    is not in its ``runtimePatches``: its release could not label its pods, which would then admit no connection,
    each other's neither."""
    trainer = (held.get("spec") or {}).get("trainer") or {}
    trainjob = (ref_of(held) or "").startswith("trainjob/")
    return trainjob and trainer.get("numNodes") != 1 and not job_pod_templates(held)


def peer_labelled(held):
    """The job ``held`` with :data:`INGRESS_POLICY_LABEL` set to its :func:`peers_policy_name` on every pod template of
    :func:`peer_templates` (a copy; any other value is replaced, so that no job's pods pass for another's): their
    pods' ingress is then their peers policy's alone."""
    labelled = json.loads(json.dumps(held))
    value = peers_policy_name(labelled["metadata"]["name"])
    for template in peer_templates(labelled):
        metadata = template.setdefault("metadata", {})
        metadata["labels"] = {**(metadata.get("labels") or {}), INGRESS_POLICY_LABEL: value}
    return labelled


def peers_policy(held, namespace, owner_name, owner_uid):
    """The NetworkPolicy of the job ``held`` (:func:`peers_policy_name`) in ``namespace``, owned by the release Job
    ``owner_name``: it selects the job's pods by :data:`INGRESS_POLICY_LABEL` and admits ingress from those pods only,
    on every port (the rendezvous, the collectives' bootstrap, a fabric check's ssh), so that no other pod of the
    namespace, another job's included, reaches them."""
    name = peers_policy_name(held["metadata"]["name"])
    pods = {"matchLabels": {INGRESS_POLICY_LABEL: name}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "trainium-eks", "app.kubernetes.io/name": "job-peers"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": owner_name, "uid": owner_uid}],
        },
        "spec": {"podSelector": pods, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": pods}]}]},
    }


def ensure_peers_policy(base, namespace, policy, owner_uid):
    """Create ``policy`` unless it exists; whether the one there is this release's (owned by ``owner_uid``)."""
    collection = base + NETWORK_POLICIES.format(ns=namespace)
    try:
        request(collection, policy)
        return True
    except Conflict:
        existing = request(collection + "/" + policy["metadata"]["name"])
        if existing is None:
            raise ConnectionError(f"networkpolicy/{policy['metadata']['name']} was deleted as it was read") from None
        return owned_by(existing, owner_uid)


def ensure_peers(base, namespace, held, release, owner_uid):
    """:func:`ensure_peers_policy` of ``held``'s peers policy, saying so when one the release did not create is
    there (the held job is then not created)."""
    if ensure_peers_policy(base, namespace, peers_policy(held, namespace, release, owner_uid), owner_uid):
        return True
    name = peers_policy_name(held["metadata"]["name"])
    print(
        f"job release: networkpolicy/{name} exists and was not created by job/{release}; not creating {ref_of(held)}",
        flush=True,
    )
    return False


def pod_requests(pod):
    """What a pod of ``pod`` (a pod spec) requests: its containers' requests summed, or its largest init
    container's where that is more (Kubernetes' effective request); a limit stands for a missing request."""

    def of(container):
        resources = container.get("resources") or {}
        return {**(resources.get("limits") or {}), **(resources.get("requests") or {})}

    total = {}
    for container in pod.get("containers") or ():
        for name, value in of(container).items():
            total[name] = total.get(name, 0) + quantity(value)
    for container in pod.get("initContainers") or ():
        for name, value in of(container).items():
            total[name] = max(total.get(name, 0), quantity(value))
    return total


def quantity(value):
    """A Kubernetes quantity as a number (CPU in cores, memory in bytes, devices in units)."""
    text = str(value)
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    if text.endswith("m"):
        return float(text[:-1]) / 1000
    for unit, factor in units.items():
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float(text)


def capacity_job(held, index, count, pod, image, owner_name, owner_uid, timeout):
    """The capacity Job that holds the nodes of ``count`` pods of shape ``pod`` of the gang ``held``: as many pods,
    each requesting what a gang pod requests (devices and huge pages as limits too, as Kubernetes requires of them)
    with the gang pod's placement (node selector, affinity, tolerations, spread, priority), on the default scheduler,
    so that kube-scheduler binds each to a node that has room or marks it unschedulable, for which Karpenter launches
    one (kubernetes-sigs/karpenter v1.14.1 ``pkg/utils/pod/scheduling.go``: it provisions for pods marked
    unschedulable). Its pods run ``sleep`` in the release image as ``nobody``, and go at once when deleted."""
    name = held["metadata"]["name"]
    requests = {key: format_quantity(value) for key, value in pod_requests(pod).items()}
    limits = {key: value for key, value in requests.items() if "/" in key or key.startswith("hugepages-")}
    labels = {
        "app.kubernetes.io/part-of": "trainium-eks",
        "app.kubernetes.io/name": CAPACITY_COMPONENT,
        CAPACITY_LABEL: name,
    }
    spec = {key: pod[key] for key in _PLACEMENT if pod.get(key)}
    claims = claim_volumes(pod)
    if claims:
        spec["volumes"] = claims
    spec.update(
        {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65534,
                "runAsGroup": 65534,
                "fsGroup": 65534,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "hold",
                    "image": image,
                    "command": ["sleep", str(int(timeout))],
                    "resources": {"requests": requests, "limits": limits},
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        }
    )
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{name[:48]}-capacity-{index}",
            "namespace": held["metadata"].get("namespace"),
            "labels": labels,
        },
        "spec": {
            "parallelism": count,
            "completions": count,
            "backoffLimit": 6,
            "activeDeadlineSeconds": int(timeout) + 60,
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }
    return owned_manifest(job, owner_name, owner_uid)


def claim_volumes(pod):
    """The volumes of ``pod`` (a pod spec) that name a PersistentVolumeClaim, for a capacity pod to declare without
    mounting: kube-scheduler's volume plugins (VolumeBinding, VolumeZone, NodeVolumeLimits: kubernetes v1.36.3
    ``pkg/scheduler/framework/plugins/``) and Karpenter's volume topology (kubernetes-sigs/karpenter v1.14.1
    ``pkg/controllers/provisioning/scheduling/volumetopology.go``) place a pod by the claims in its ``volumes`` (a
    bound volume's node affinity, a storage class's allowed topologies), so the nodes held are nodes where the gang's
    claims can be used; the kubelet sets up only volumes that a container mounts (kubernetes v1.36.3
    ``pkg/kubelet/volumemanager/populator/desired_state_of_world_populator.go`` ``processPodVolumes``), so the
    capacity pod uses none of them (an attachable volume is still attached to the node held, read-only if the claim
    is, by the attach-detach controller: ``pkg/controller/volume/attachdetach/util/util.go`` ``ProcessPodVolumes``;
    the node the gang then uses)."""
    return [
        {"name": volume["name"], "persistentVolumeClaim": volume["persistentVolumeClaim"]}
        for volume in pod.get("volumes") or ()
        if (volume.get("persistentVolumeClaim") or {}).get("claimName")
    ]


def format_quantity(number):
    """A number of :func:`quantity` as a Kubernetes quantity (CPU and devices below one in millis)."""
    if number == int(number):
        return str(int(number))
    return f"{int(round(number * 1000))}m"


def capacity_settings(held):
    """Setting -> value (:data:`CAPACITY_SETTINGS`), from the held job's annotations where they are integers."""
    annotations = (held.get("metadata") or {}).get("annotations") or {}
    settings = {}
    for setting, (annotation, default) in CAPACITY_SETTINGS.items():
        try:
            settings[setting] = max(1, int(annotations.get(annotation, default)))
        except (TypeError, ValueError):
            settings[setting] = default
    return settings


class Capacity:
    """The capacity of one held gang, acquired in attempts: create its capacity Jobs, wait until each of their pods
    is bound to a node, then delete them and wait until they are gone, so that the gang finds every node it needs
    empty; an attempt that does not hold every node within its timeout gives every node back (deletes its Jobs), says
    so in an event, and is retried after a pause, up to the attempts allowed. An attempt that finds the gang's
    NodePool at its limit (:meth:`pool_limit`) gives every node back at once and does not count, until the gang has
    waited so for the ``queue`` setting in all."""

    def __init__(self, base, namespace, release, owner_uid, image, held, shapes):
        self.base, self.namespace, self.release, self.owner_uid = base, namespace, release, owner_uid
        self.image, self.held, self.shapes = image, held, shapes
        self.settings = capacity_settings(held)
        self.name = held["metadata"]["name"]
        self.total = sum(count for count, _ in shapes)
        self.attempt = 0
        self.since = None
        self.pause_until = None
        self.releasing = False
        self.queued = 0.0
        """Seconds this gang has waited for its pool's nodes held by other jobs (rounds and pauses)."""
        self.node_pool = ((held.get("metadata") or {}).get("annotations") or {}).get(NODE_POOL_ANNOTATION)

    def _list(self, path):
        selector = urllib.parse.quote(f"{CAPACITY_LABEL}={self.name}")
        return (request(f"{self.base}{path.format(ns=self.namespace)}?labelSelector={selector}") or {}).get(
            "items"
        ) or []

    def step(self, now):
        """One look: ('ready', message) once every node is held and given to the gang, ('wait', message), or
        ('fail', message) when the last attempt ran out."""
        jobs_path = "/apis/batch/v1/namespaces/{ns}/jobs"
        listed = self._list("/api/v1/namespaces/{ns}/pods")
        pods = [p for p in listed if not p["metadata"].get("deletionTimestamp")]
        if self.releasing:
            if listed:
                return "wait", f"{len(listed)} capacity pods of {self.name} still going"
            self.event("CapacityHeld", f"held {self.total} pods' nodes for {self.name}; creating it", "Normal")
            return "ready", f"every node of {self.name} held"
        if self.pause_until is not None and now < self.pause_until:
            return "wait", f"pausing before attempt {self.attempt + 1} to hold {self.name}'s nodes"
        jobs = [j for j in self._list(jobs_path) if not j["metadata"].get("deletionTimestamp")]
        if self.since is None:  # a new attempt, or a restarted release that finds one under way
            started = [parse_time(j["metadata"].get("creationTimestamp")) or now for j in jobs]
            self.attempt = self.attempt + 1 if not jobs else max(self.attempt, 1)
            self.since, self.pause_until = min(started, default=now), None
        names = {j["metadata"]["name"] for j in jobs}
        for index, (count, pod) in enumerate(self.shapes):
            manifest = capacity_job(
                self.held, index, count, pod, self.image, self.release, self.owner_uid, self.settings["timeout"]
            )
            if manifest["metadata"]["name"] not in names:  # a failed create (a conflict, a 5xx) is tried again
                request(self.base + jobs_path.format(ns=self.namespace), manifest)
                jobs.append(manifest)
        if len(names) < len(self.shapes):
            return "wait", f"attempt {self.attempt}: holding {self.total} pods' nodes for {self.name}"
        bound = [
            p
            for p in pods
            if (p.get("spec") or {}).get("nodeName") and (p.get("status") or {}).get("phase") in ("Pending", "Running")
        ]
        if len(bound) >= self.total:
            self.give_back(jobs)
            self.since, self.releasing = None, True
            return "wait", f"every node of {self.name} held; giving them to it"
        limit = self.pool_limit(pods) if self.queued < self.settings["queue"] else None
        if limit:
            self.give_back(jobs)
            pause = round(self.settings["pause"] * (1 + QUEUE_JITTER * random.random()))
            self.queued += now - self.since + pause
            self.since, self.attempt = None, self.attempt - 1
            self.pause_until = now + pause
            message = (
                f"held {len(bound)} of {self.total} nodes of {self.name}, and its node pool {self.node_pool} is at its "
                f"limit ({limit}: other jobs hold its nodes); gave them back, trying again in {pause} s (not counted "
                f"as an attempt; waited so {int(self.queued)} of {self.settings['queue']} s)"
            )
            self.event("CapacityQueued", message, "Normal")
            return "wait", message
        if now - self.since < self.settings["timeout"]:
            return "wait", f"{len(bound)} of {self.total} nodes of {self.name} held (attempt {self.attempt})"
        self.give_back(jobs)
        self.since = None
        message = (
            f"held {len(bound)} of {self.total} nodes of {self.name} after {self.settings['timeout']} s "
            f"(attempt {self.attempt} of {self.settings['attempts']}); gave them back"
        )
        self.event("CapacityNotHeld", message, "Warning")
        if self.attempt >= self.settings["attempts"]:
            return "fail", message
        self.pause_until = now + self.settings["pause"]
        return "wait", message

    def pool_limit(self, pods):
        """Karpenter's words when the gang's own NodePool (:data:`NODE_POOL_ANNOTATION`) is at its limit for a
        capacity pod not yet bound (the pool's nodes are held by other jobs: the gang waits for them without holding
        any, and without using up its attempts), else None; always None for a gang without the annotation."""
        waiting = {p["metadata"].get("name") for p in pods if not (p.get("spec") or {}).get("nodeName")}
        if not waiting or not self.node_pool:
            return None
        selector = urllib.parse.quote("reason=FailedScheduling,involvedObject.kind=Pod")
        events = (request(f"{self.base}/api/v1/namespaces/{self.namespace}/events?fieldSelector={selector}") or {}).get(
            "items"
        ) or []
        for event in events:
            if (event.get("involvedObject") or {}).get("name") not in waiting:
                continue
            for found in POOL_LIMIT.finditer(event.get("message") or ""):
                if found.group(1) == self.node_pool:
                    return found.group(0)
        return None

    def give_back_all(self):
        """Before the release fails: delete every capacity Job of the gang there is, so that an attempt under way
        holds no node past the release (its Jobs would otherwise run to their own deadline). Best effort: the
        release fails anyway."""
        try:
            self.give_back(self._list("/apis/batch/v1/namespaces/{ns}/jobs"))
        except (ConnectionError, Refused) as error:
            print(f"job release: could not give back the capacity Jobs of {self.name}: {error}", flush=True)

    def give_back(self, jobs):
        """Delete the capacity Jobs and their pods."""
        for job in jobs:
            path = f"/apis/batch/v1/namespaces/{self.namespace}/jobs/{job['metadata']['name']}"
            request(self.base + path, {"propagationPolicy": "Background"}, method="DELETE")

    def event(self, reason, message, kind):
        """An event on the release Job."""
        record_event(self.base, self.namespace, self.release, self.owner_uid, reason, message, kind)


GANG_POD_LABELS = {
    "vcjob": "volcano.sh/job-name",
    "trainjob": "jobset.sigs.k8s.io/jobset-name",
    "pytorchjob": "training.kubeflow.org/job-name",
}
"""The label that names a gang's pods after their job: Volcano's job controller; JobSet's (Kubeflow Trainer names a
TrainJob's JobSet after it); the training operator's (kubeflow/common ``JobNameLabel``)."""
PLACED_NOT_STARTED = "Schedulable"
"""The reason Volcano gives in a pod's ``PodScheduled=False`` condition when the pod fits a node but its gang does not
fit whole (volcano-sh/volcano v1.15.1 ``pkg/scheduler/api/unschedule_info.go`` ``PodReasonSchedulable``, set by
``job_info.go`` ``TaskSchedulingReason``); Karpenter does not provision for such a pod."""


def placed_not_started(pods):
    """The pods of ``pods`` that Volcano placed on a node but did not bind, because their gang does not fit whole."""
    return [
        pod
        for pod in pods
        if not (pod.get("spec") or {}).get("nodeName")
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
        and any(
            condition.get("type") == "PodScheduled" and condition.get("reason") == PLACED_NOT_STARTED
            for condition in (pod.get("status") or {}).get("conditions") or ()
        )
    ]


class GangWatch:
    """A created gang, watched by its release until it ends, so that a restart finds all its nodes too.

    A gang that restarts (a lost node, a failed pod) is scheduled again as a whole, and when part of it fits on the
    nodes it keeps, the same mismatch as before its first start holds it for ever: Volcano places the pods that fit and
    marks them ``Schedulable``, and Karpenter, seeing those nodes empty, launches too few (shown on the real control
    plane: tests/e2e/test_node_loss.py). When a pod of the gang has been placed but not started for ``stall`` seconds,
    the release deletes the gang (foreground: it is gone once its pods are), records ``GangStalled`` on the release
    Job, holds all its nodes again (:class:`Capacity`) and creates it again from the same manifest: its pods start from
    the newest checkpoint, as after any restart. It does this up to ``restarts`` times; the next stall deletes the gang
    for good (``GangNotRestarted``), which fails the release and so every job waiting for the gang. While it is
    deleted, a job waiting for it keeps waiting (its release Job still runs).

    A fabric check that fails naming suspect nodes is taken back the same way, to run again on new nodes, by its
    ``suspects`` (:class:`FabricSuspects`; None for any other gang)."""

    def __init__(self, base, namespace, release, owner_uid, held_ref, settings, suspects=None):
        self.base, self.namespace, self.release, self.owner_uid = base, namespace, release, owner_uid
        self.held_ref, self.settings, self.suspects = held_ref, settings, suspects
        self.stalled_since = None
        self.restarts = 0
        self.recreated = 0
        """How often the gang was taken back to be created again (its stalls, its fabric check's rounds), counted from
        the annotation of the gang taken back, so that a release pod that restarted goes on counting."""
        self.taken_back = False
        """This watch deleted the gang to create it again: until a gang not being deleted is seen (the new one), the
        gang being deleted, ended or not, is only waited for."""

    def take_back(self, job):
        """Count ``job``, taken back to be created again, in :attr:`recreated`."""
        self.taken_back = True
        self.recreated = recreated_count(job) + 1

    def step(self, job, now):
        """One look at the gang ``job``: ('end', message) once it has completed or failed; ('watch', message);
        ('deleting', message) while it is being deleted; ('hold', message) when this look deleted it to hold its nodes
        again (a stall, or a fabric check's suspect nodes); ('fail', message) when it stalled once too often."""
        kind, name = self.held_ref.split("/")
        ended = state(kind, job)
        deleting = bool((job.get("metadata") or {}).get("deletionTimestamp"))
        if not deleting:
            self.taken_back = False
        if ended != "waiting" and not (deleting and self.taken_back):
            if ended == "failed" and deleting and self.suspects is not None:
                self.take_back(job)  # an earlier run of this release (its pod restarted) deleted it for a round
                return "hold", f"{self.held_ref} failed and is being deleted to run again; holding its nodes again"
            if ended == "failed" and self.suspects is not None:
                found = self.suspects.step()
                if found is not None:
                    if found[0] == "hold":
                        self.take_back(job)
                    return found
            return "end", f"{self.held_ref} {'completed' if ended == 'done' else 'failed'}"
        if deleting:
            return "deleting", f"{self.held_ref} is being deleted"
        selector = urllib.parse.quote(f"{GANG_POD_LABELS[kind]}={name}")
        pods = (request(f"{self.base}/api/v1/namespaces/{self.namespace}/pods?labelSelector={selector}") or {}).get(
            "items"
        ) or []
        placed = placed_not_started(pods)
        if not placed:
            self.stalled_since = None
            return "watch", f"watching {self.held_ref}"
        self.stalled_since = self.stalled_since if self.stalled_since is not None else now
        waited = int(now - self.stalled_since)
        stalled = f"{len(placed)} of {len(pods)} pods of {self.held_ref} placed but not started for {waited} s"
        if waited < self.settings["stall"]:
            return "watch", stalled
        self.stalled_since = None
        self.restarts += 1
        request(self.base + object_path(self.namespace, self.held_ref), {"propagationPolicy": "Foreground"}, "DELETE")
        self.take_back(job)
        allowed = self.settings["restarts"]
        if self.restarts > allowed:
            message = f"{stalled}, after {allowed} restarts; deleted it"
            self.event("GangNotRestarted", message)
            return "fail", message
        message = f"{stalled}; deleted it to hold all its nodes again (restart {self.restarts} of {allowed})"
        self.event("GangStalled", message)
        return "hold", message

    def event(self, reason, message):
        """A warning event on the release Job."""
        record_event(self.base, self.namespace, self.release, self.owner_uid, reason, message, "Warning")


FABRIC_CHECK_LABEL = "trainium-eks/fabric-check-for"
"""Label of a fabric check (a Volcano Job that runs a collective benchmark across the nodes of the job it guards, held
like that job): the name of the job it guards (``trainium_eks.core.conventions.FABRIC_CHECK_LABEL``)."""
FABRIC_TASK = "node"
FABRIC_CONTAINER = "fabric"
"""A fabric check's task (its pods are ``<check>-node-<index>``) and container; node 0's container ends with the
check's verdict as its termination message."""
SUSPECT_EXIT = 6
"""Exit status of node 0's ``fabric`` container when the gang's bus bandwidth is below the floor and pairs of nodes
name suspects (its termination message: ``{"verdict": "suspect-nodes", "suspects": [index, ...], "pairs": [...],
...}``)."""
SUSPECT_TAINT = "trainium-eks/fabric-suspect"
"""Taint (``NoSchedule``, value: the check's name) the release puts on a suspect node of a Karpenter NodePool, so that
no gang pod fits it again and Karpenter launches another (``trainium_eks.core.conventions.FABRIC_SUSPECT_TAINT``)."""
SUSPECT_ROUNDS_ANNOTATION = "trainium-eks/fabric-suspect-rounds"
DEFAULT_SUSPECT_ROUNDS = 2
MAX_SUSPECT_ROUNDS = 5
"""Annotation of a held fabric check: how many times its release may taint suspect nodes and run it again on new ones
(0 to :data:`MAX_SUSPECT_ROUNDS`; :data:`DEFAULT_SUSPECT_ROUNDS` when absent or not an integer)."""
CONFLICT_TRIES = 5
"""How many times a node is read and patched when the patch conflicts (someone else changed the node meanwhile)."""
EVENT_MESSAGE_LIMIT = 1024
"""The longest event message written, so that ``kubectl describe`` stays readable (a table of many pairs is cut, and it
goes last; the release's log has it whole)."""
MERGE_PATCH = "application/merge-patch+json"


def suspect_rounds(held):
    """How many rounds of suspect nodes the fabric check ``held`` allows (:data:`SUSPECT_ROUNDS_ANNOTATION`), read as
    :func:`capacity_settings` reads its settings: an integer, kept to 0..:data:`MAX_SUSPECT_ROUNDS`, else the
    default."""
    annotations = (held.get("metadata") or {}).get("annotations") or {}
    try:
        return min(MAX_SUSPECT_ROUNDS, max(0, int(annotations.get(SUSPECT_ROUNDS_ANNOTATION, DEFAULT_SUSPECT_ROUNDS))))
    except (TypeError, ValueError):
        return DEFAULT_SUSPECT_ROUNDS


def suspect_verdict(pods, check):
    """The verdict (a dict, with a ``suspects`` list of task indexes) that node 0 of the fabric check ``check`` wrote as
    its ``fabric`` container's termination message when it ended with :data:`SUSPECT_EXIT`; None when it did not (no
    such pod, another exit status, no message, a message that is no such verdict)."""
    for pod in pods:
        if (pod.get("metadata") or {}).get("name") != f"{check}-{FABRIC_TASK}-0":
            continue
        for status in (pod.get("status") or {}).get("containerStatuses") or ():
            terminated = (status.get("state") or {}).get("terminated") or {}
            if status.get("name") != FABRIC_CONTAINER or terminated.get("exitCode") != SUSPECT_EXIT:
                continue
            try:
                verdict = json.loads(terminated.get("message") or "")
            except ValueError:
                return None
            suspects = verdict.get("suspects") if isinstance(verdict, dict) else None
            if (
                isinstance(suspects, list)
                and suspects
                and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in suspects)
            ):
                return verdict
            return None
    return None


def gbps(value):
    """A bandwidth of a verdict (Gbps) as text."""
    return f"{value:.1f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def pairs_table(verdict):
    """The pairs a verdict measured, one line of text: ``nodes a-b: x Gbps pass`` (or ``FAIL``), and the floor."""
    rows = []
    for pair in verdict.get("pairs") or ():
        if isinstance(pair, dict):
            nodes = "-".join(str(node) for node in pair.get("nodes") or ())
            rows.append(f"{nodes} {gbps(pair.get('busbw_gbps'))} Gbps {'pass' if pair.get('passed') else 'FAIL'}")
    return f"pairs (node indexes; floor {gbps(verdict.get('floor_gbps'))} Gbps): " + ("; ".join(rows) or "none")


def shortened(message, limit=EVENT_MESSAGE_LIMIT):
    """``message``, cut to ``limit`` characters (ending with ``...``) when longer."""
    return message if len(message) <= limit else message[: limit - 3] + "..."


class FabricSuspects:
    """What a release does when the fabric check it holds fails naming suspect nodes: give the check new nodes, a few
    times, where new nodes come by themselves; else say which nodes are suspect and let the check fail.

    The fabric program on node 0 measures the whole gang's bus bandwidth, and when it is below the floor measures
    pairs of nodes to name the nodes that do not clear it with a node that does (``suspects``, task indexes: index i
    is the pod ``<check>-node-<i>``, and ``suspect_nodes``, their nodes), exits with :data:`SUSPECT_EXIT` and writes
    its verdict as its container's termination message; Volcano then terminates the check (``TerminateJob``), keeps
    node 0's failed pod and deletes the peers still running. :meth:`step` reads that message from node 0's pod
    (``status.containerStatuses[name=fabric].state.terminated``), and each suspect's node from it, else from the
    suspect's pod (``spec.nodeName``) while it is there.

    - With a Karpenter NodePool (:data:`NODE_POOL_ANNOTATION`) and rounds left (:data:`SUSPECT_ROUNDS_ANNOTATION`): it
      adds the taint :data:`SUSPECT_TAINT` (``NoSchedule``, value: the check's name) to each suspect node (a merge
      patch of the node's whole taint list with its ``resourceVersion``, read again and tried again on a conflict;
      a node that has a taint of that key already is left as it is, one that is gone is fine), records
      ``FabricSuspect`` on the release Job (each node, its pod, the pairs' figures), and deletes the check (foreground)
      for :class:`GangWatch` to hold all its nodes again and create it anew: the tainted nodes no longer fit the gang,
      so Karpenter launches new ones, and the tainted ones, empty, go with its consolidation.
    - Without a NodePool (a managed node group would not replace a tainted node, which would stay billed), once the
      rounds are used up, or when a node cannot be tainted (a refusal: a missing permission, the admission policy of
      :mod:`trainium_eks.manifests.access.fabric_suspect_admission`), it taints nothing more, records
      ``FabricSuspectsRemain`` (the nodes and how to replace them by hand) and the check ends failed, as any other.

    Any other failure of a check (no verdict, another exit status, a message that is no verdict) is not looked at.
    Rounds are counted by this run of the release; a release pod that starts again counts from zero."""

    def __init__(self, base, namespace, release, owner_uid, held):
        self.base, self.namespace, self.release, self.owner_uid = base, namespace, release, owner_uid
        metadata = held.get("metadata") or {}
        self.name = metadata.get("name", "")
        self.node_pool = (metadata.get("annotations") or {}).get(NODE_POOL_ANNOTATION)
        self.allowed = suspect_rounds(held)
        self.rounds = 0
        self.taint_value = {"key": SUSPECT_TAINT, "value": self.name[:63].rstrip("-._"), "effect": "NoSchedule"}

    def step(self):
        """After the check failed: ('hold', message) when this look tainted its suspect nodes and deleted it, to
        hold new nodes and create it again; ('end', message) when suspects remain that it does not replace; None
        when the check did not fail naming suspects."""
        selector = urllib.parse.quote(f"{GANG_POD_LABELS['vcjob']}={self.name}")
        pods = (request(f"{self.base}/api/v1/namespaces/{self.namespace}/pods?labelSelector={selector}") or {}).get(
            "items"
        ) or []
        verdict = suspect_verdict(pods, self.name)
        if verdict is None:
            return None
        nodes = {(pod.get("metadata") or {}).get("name"): (pod.get("spec") or {}).get("nodeName") for pod in pods}
        suspects = [(index, f"{self.name}-{FABRIC_TASK}-{index}") for index in dict.fromkeys(verdict["suspects"])]
        named = verdict.get("suspect_nodes")
        if isinstance(named, list) and len(named) == len(verdict["suspects"]):
            # node 0 names them: Volcano deletes the peers still running when it terminates the check
            nodes.update(
                (f"{self.name}-{FABRIC_TASK}-{index}", node)
                for index, node in zip(verdict["suspects"], named, strict=True)
                if isinstance(node, str) and node
            )
        said = (
            f"fabric check {self.name}: bus bandwidth {gbps(verdict.get('busbw_gbps'))} Gbps below the floor "
            f"{gbps(verdict.get('floor_gbps'))} Gbps; suspect nodes"
        )
        if not self.node_pool:
            why = (
                "a node group would not replace a tainted node: replace each by hand (kubectl cordon and drain it, "
                "terminate its EC2 instance; the group launches another)"
            )
        elif self.rounds >= self.allowed:
            why = (
                f"{self.rounds} of {self.allowed} rounds of new nodes done ({SUSPECT_ROUNDS_ANNOTATION}): replace each "
                "by hand (kubectl delete node: Karpenter terminates its instance)"
            )
        elif any(not nodes.get(pod) for _, pod in suspects):
            why = "the node of a suspect is not known (its pod is gone, node 0 could not read it): a round would run "
            why += "the check on the same nodes; replace it by hand (kubectl delete node: Karpenter terminates it)"
        else:
            done = []
            for index, pod in suspects:
                node = nodes.get(pod)
                try:
                    done.append(f"{node} (node {index}, pod {pod}): {self.taint(node)}")
                except Refused as error:
                    why = f"could not taint {node}: {error}"
                    break
            else:
                request(
                    self.base + object_path(self.namespace, f"vcjob/{self.name}"),
                    {"propagationPolicy": "Foreground"},
                    "DELETE",
                )
                self.rounds += 1  # once deleted: a failed delete is tried again at the next look, in the same round
                message = (
                    f"{said}: {', '.join(done)}; round {self.rounds} of {self.allowed}: deleted the check to run it "
                    f"again on new nodes; {pairs_table(verdict)}"
                )
                self.event("FabricSuspect", message)
                return "hold", message
        named = ", ".join(
            f"{nodes.get(pod) or '(node not known)'} (node {index}, pod {pod})" for index, pod in suspects
        )
        message = f"{said} remain: {named}; {why}; {pairs_table(verdict)}"
        self.event("FabricSuspectsRemain", message)
        return "end", f"vcjob/{self.name} failed: {message}"

    def taint(self, node):
        """Add :attr:`taint_value` to ``node``: 'tainted', 'tainted already' (a taint of its key is there), or 'gone'
        (the node no longer exists). Raises ``ConnectionError`` when the node keeps changing, ``Refused`` when the
        patch is refused."""
        path = f"{self.base}/api/v1/nodes/{urllib.parse.quote(node)}"
        for _ in range(CONFLICT_TRIES):
            found = request(path)
            if found is None:
                return "gone"
            taints = list((found.get("spec") or {}).get("taints") or ())
            if any(taint.get("key") == SUSPECT_TAINT for taint in taints):
                return "tainted already"
            patch = {
                "metadata": {"resourceVersion": (found.get("metadata") or {}).get("resourceVersion")},
                "spec": {"taints": taints + [self.taint_value]},
            }
            try:
                patched = request(path, patch, "PATCH", MERGE_PATCH)
            except Conflict:
                continue
            return "gone" if patched is None else "tainted"
        raise ConnectionError(f"node {node} changed {CONFLICT_TRIES} times while tainting it")

    def event(self, reason, message):
        """A warning event on the release Job."""
        record_event(self.base, self.namespace, self.release, self.owner_uid, reason, shortened(message), "Warning")


def record_event(base, namespace, release, owner_uid, reason, message, kind):
    """An event on the release Job (best effort: a refused event does not stop the release)."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{release}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": release,
            "namespace": namespace,
            "uid": owner_uid,
        },
        "reason": reason,
        "message": message,
        "type": kind,
        "source": {"component": "job-release"},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        request(f"{base}/api/v1/namespaces/{namespace}/events", event)
    except (Refused, ConnectionError) as error:
        print(f"job release: event {reason} not recorded: {error}", flush=True)


def parse_time(text):
    """Seconds since the epoch of a Kubernetes timestamp, or None."""
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (AttributeError, ValueError):
        return None


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
    capacity = watch = None
    said = None
    seen = taken_back = False  # the held job existed (owned) in this run; the release deleted it to hold its nodes
    shapes = gang_pods(held)
    peers = bool(peer_templates(held))
    if peers:  # its pods admit only each other (its peers policy, created before it)
        held = peer_labelled(held)
    while True:
        poll = POLL_SECONDS
        watching = False
        try:
            if owner_uid is None:
                own = request(base + object_path(namespace, f"job/{release}")) or {}
                owner_uid = own["metadata"]["uid"]
                gives_up_at = give_up_time(own)
                if peers and not ensure_peers(base, namespace, held, release, owner_uid):
                    return NEVER
                if shapes:  # its capacity pods run the release's own image
                    image = own["spec"]["template"]["spec"]["containers"][0]["image"]
                    capacity = Capacity(base, namespace, release, owner_uid, image, held, shapes)
                    suspects = None
                    if held_ref.startswith("vcjob/") and FABRIC_CHECK_LABEL in (held["metadata"].get("labels") or {}):
                        suspects = FabricSuspects(base, namespace, release, owner_uid, held)
                    watch = GangWatch(base, namespace, release, owner_uid, held_ref, capacity.settings, suspects)
            existing = request(base + object_path(namespace, held_ref))
            if existing is not None:
                if not owned_by(existing, owner_uid):
                    print(
                        f"job release: {held_ref} exists and was not created by job/{release}; not touching it",
                        flush=True,
                    )
                    return NEVER
                if watch is None:
                    print(f"job release: {held_ref} exists (created by this release)", flush=True)
                    return 0
                seen = True
                action, message = watch.step(existing, time.time())
                watching = action == "watch"
                if action in ("end", "fail", "hold"):
                    print(f"job release: {message}", flush=True)
                    said = message
                if action == "end":
                    return 0
                if action == "fail":
                    return NEVER
                if action == "hold":  # a new capacity step, with all its attempts, once the gang is gone
                    capacity = Capacity(base, namespace, release, owner_uid, image, held, shapes)
                    taken_back = True
            elif seen and not taken_back:
                print(f"job release: {held_ref} was deleted, not by this release; not creating it again", flush=True)
                return NEVER
            else:
                action, detail = decide(wait_states(waits, lambda ref: request(base + object_path(namespace, ref))))
                if action == "fail":
                    print(f"job release: {detail} failed (or its release did); {held_ref} is not created", flush=True)
                    return NEVER
                if action == "create" and capacity is not None:
                    action, detail = capacity.step(time.time())
                    if action == "fail":
                        print(f"job release: {detail}; {held_ref} is not created", flush=True)
                        return NEVER
                    if capacity.releasing:
                        poll = HOLD_POLL_SECONDS
                    action = "create" if action == "ready" else "hold"
                if action == "create":
                    if peers and not ensure_peers(base, namespace, held, release, owner_uid):
                        return NEVER
                    collection = API[held_ref.split("/")[0]][2].format(ns=namespace)
                    request(
                        base + collection, owned_manifest(held, release, owner_uid, watch.recreated if watch else 0)
                    )
                    after = f" after {', '.join(waits)} completed" if waits else ""
                    print(f"job release: created {held_ref}{after}", flush=True)
                    if watch is None:
                        return 0
                    seen, taken_back, watching = True, False, True
                    message = f"watching {held_ref} until it ends"
                else:
                    message = (
                        detail
                        if action == "hold"
                        else f"waiting for {detail} in namespace {namespace} before creating {held_ref}"
                    )
        except ConnectionError as error:
            message = f"API not reachable, retrying: {error}"
        except Refused as error:
            print(f"job release: the API server refused a request for {held_ref}: {error}", flush=True)
            if capacity is not None:
                capacity.give_back_all()
            return NEVER
        except (KeyError, TypeError) as error:
            print(f"job release: cannot read job/{release}'s uid ({error!r}); retrying", flush=True)
            return 1
        if gives_up_at is not None and time.time() >= gives_up_at:
            if watching:
                print(f"job release: stopped watching {held_ref} at the release Job's deadline; it runs on", flush=True)
                return 0
            print(f"job release: gave up at the release Job's deadline, {message}", flush=True)
            if capacity is not None:
                capacity.give_back_all()
            return NEVER
        if message != said:  # a watch lasts as long as its gang: each message once while it holds
            print(f"job release: {message}", flush=True)
            said = message
        time.sleep(poll)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
