"""The admission webhooks the stacks install, as rules on the objects the library creates.

No offline validator knows what a controller's webhook denies, and a denial at deploy time rolls the stack back (a
TrainJob's ``runtimePatches[].manager`` that is not a domain-prefixed path did, on every deploy of the Kubeflow
stack). Each :class:`Rule` here is one check of a validating webhook at the version the library pins, with the file
and function it comes from; :func:`denials` runs the rules of an object's kind. The deploy rehearsal's API server
(:mod:`.cluster_model`) and the scheduling rehearsal's (:mod:`.simulated_cluster`, for the jobs release Jobs create)
run them, and ``tests/rehearsal/test_admission.py`` checks every rule against what every stack renders and shows that
each rule denies what it should.

Webhooks covered (all ``failurePolicy: Fail``): Volcano 1.15.1's job, queue and PodGroup validation (the chart's
default ``enabled_admissions``; its pod webhooks are off; of the job plugins the webhook only checks that each is
registered, ``pkg/controllers/job/plugins/factory.go``: ``ssh``, ``env``, ``svc``, ``tensorflow``, ``mpi``,
``pytorch``, ``hcclrank``, ``ray``; its check of the ``mpi`` plugin's master task is not modelled, the library does
not use that plugin), Kubeflow Trainer 2.3.0's TrainJob and ClusterTrainingRuntime validation, and JobSet 0.12.0's
validation of the JobSet the Trainer builds from a TrainJob (a denial there leaves the TrainJob without pods, reported
only as an event). CRD schemas and CEL rules are
``../shared/k8s-schemas/validate.py``'s; these rules are what the schemas cannot say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

VOLCANO = "volcano-sh/volcano v1.15.1"
TRAINER = "kubeflow/trainer v2.3.0"
JOBSET = "kubernetes-sigs/jobset v0.12.0"

_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_PATH = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")

VOLCANO_EVENTS = {"*", "PodFailed", "PodEvicted", "PodPending", "Unknown", "TaskCompleted", "TaskFailed", "JobUpdated"}
VOLCANO_ACTIONS = {
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "RestartPartition",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
}
VOLCANO_PLUGINS = {"ssh", "env", "svc", "tensorflow", "mpi", "pytorch", "hcclrank", "ray"}
TORCH_RESERVED_ENV = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
NODE_CONTAINERS = {"node", "dataset-initializer", "model-initializer"}
ANCESTOR_CONTAINERS = {
    "trainer": "node",
    "model-initializer": "model-initializer",
    "dataset-initializer": "dataset-initializer",
}


@dataclass
class ApiView:
    """What the webhooks look up in the cluster: queues (name -> state), runtimes, priority classes."""

    queues: Dict[str, str] = field(default_factory=dict)
    runtimes: Dict[str, Mapping[str, Any]] = field(default_factory=dict)
    priority_classes: Set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Rule:
    """One check of a webhook: ``check(object, view)`` returns the denial's message, or None."""

    kind: Tuple[str, str]
    name: str
    source: str
    check: Callable[[Mapping[str, Any], ApiView], Optional[str]]


RULES: List[Rule] = []


def rule(api_version: str, kind: str, name: str, source: str) -> Callable:
    """Register a rule for objects of (``api_version``, ``kind``)."""

    def register(check: Callable[[Mapping[str, Any], ApiView], Optional[str]]) -> Callable:
        RULES.append(Rule((api_version, kind), name, source, check))
        return check

    return register


def denials(obj: Mapping[str, Any], view: ApiView) -> List[str]:
    """The messages of every rule that denies ``obj``, each with its webhook rule's name."""
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    found = []
    for item in RULES:
        if item.kind == key:
            message = item.check(obj, view)
            if message:
                found.append(f"{item.name}: {message}")
    return found


# --- Volcano Job (pkg/webhooks/admission/jobs/validate/admit_job.go validateJobCreate) ----------------------------

VOLCANO_JOB = ("batch.volcano.sh/v1alpha1", "Job")


def _tasks(obj: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    return list((obj.get("spec") or {}).get("tasks") or ())


@rule(*VOLCANO_JOB, "volcano job: tasks", f"{VOLCANO} admit_job.go validateJobCreate")
def _volcano_has_tasks(obj, view):
    return None if _tasks(obj) else "No task specified in job spec"


@rule(*VOLCANO_JOB, "volcano job: task minAvailable", f"{VOLCANO} admit_job.go validateJobCreate")
def _volcano_task_min(obj, view):
    for task in _tasks(obj):
        if task.get("minAvailable") is not None and int(task["minAvailable"]) > int(task.get("replicas", 0)):
            return f"'minAvailable' is greater than 'replicas' in task: {task.get('name')}"
    return None


@rule(*VOLCANO_JOB, "volcano job: job minAvailable", f"{VOLCANO} admit_job.go validateJobCreate")
def _volcano_job_min(obj, view):
    total = sum(int(t.get("replicas", 0)) for t in _tasks(obj))
    if int((obj.get("spec") or {}).get("minAvailable") or 0) > total:
        return "job 'minAvailable' should not be greater than total replicas in tasks"
    return None


@rule(*VOLCANO_JOB, "volcano job: task names", f"{VOLCANO} admit_job.go validateJobCreate")
def _volcano_task_names(obj, view):
    names = [t.get("name") for t in _tasks(obj)]
    repeated = sorted({n for n in names if names.count(n) > 1})
    return f"duplicated task name {repeated[0]}" if repeated else None


@rule(*VOLCANO_JOB, "volcano job: policies", f"{VOLCANO} pkg/webhooks/admission/jobs/validate/util.go validatePolicies")
def _volcano_policies(obj, view):
    groups = [(obj.get("spec") or {}).get("policies") or []] + [t.get("policies") or [] for t in _tasks(obj)]
    for policies in groups:
        seen: Set[str] = set()
        codes: Set[int] = set()
        for policy in policies:
            events = ([policy["event"]] if policy.get("event") else []) + list(policy.get("events") or [])
            if events and policy.get("exitCode") is not None:
                return "must not specify event and exitCode simultaneously"
            if not events and policy.get("exitCode") is None:
                return "either event and exitCode should be specified"
            if policy.get("exitCode") == 0:
                return "0 is not a valid error code"
            if not events and policy.get("exitCode") in codes:
                return f"duplicate exitCode {policy['exitCode']}"
            if not events:
                codes.add(policy["exitCode"])
            for event in events:
                if event not in VOLCANO_EVENTS:
                    return f"invalid policy event {event}"
                if event in seen:
                    return f"duplicate event {event} across different policy"
                seen.add(event)
            if "*" in seen and len(seen) > 1:
                return "if there's * here, no other policy should be here"
            if policy.get("action") not in VOLCANO_ACTIONS:
                return f"invalid policy action {policy.get('action')}"
    return None


@rule(
    *VOLCANO_JOB,
    "volcano job: names",
    f"{VOLCANO} admit_job.go validateJobName, validateK8sPodNameLength; the svc and ssh plugins' pod volumes "
    "<job>-svc (svc/svc.go mountConfigmap) and <job>-ssh (ssh/ssh.go mountRsaKey) are DNS labels",
)
def _volcano_names(obj, view):
    name = str((obj.get("metadata") or {}).get("name", ""))
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return f"create job with name {name} validate failed"
    for task in _tasks(obj):
        pod = f"{name}-{task.get('name')}-{max(0, int(task.get('replicas', 1)) - 1)}"
        if len(pod) > 63 or not _QUALIFIED_NAME.match(pod):
            return f"create pod with name {pod} validate failed"
    plugins = (obj.get("spec") or {}).get("plugins") or {}
    for plugin in ("svc", "ssh"):
        if plugin in plugins and len(f"{name}-{plugin}") > 63:
            return f"the {plugin} plugin's volume {name}-{plugin} is longer than 63 characters (pod creation fails)"
    return None


@rule(*VOLCANO_JOB, "volcano job: plugins", f"{VOLCANO} admit_job.go validateJobCreate; pkg/controllers/job/plugins")
def _volcano_plugins(obj, view):
    unknown = sorted(set((obj.get("spec") or {}).get("plugins") or {}) - VOLCANO_PLUGINS)
    return f"unable to find job plugin: {unknown[0]}" if unknown else None


@rule(*VOLCANO_JOB, "volcano job: queue open", f"{VOLCANO} admit_job.go validateJobCreate (queue lister)")
def _volcano_queue(obj, view):
    queue = (obj.get("spec") or {}).get("queue") or "default"
    if queue not in view.queues:
        return f'unable to find job queue: queues.scheduling.volcano.sh "{queue}" not found'
    if view.queues[queue] != "Open":
        return f"can only submit job to queue with state `Open`, queue `{queue}` status is `{view.queues[queue]}`"
    if queue == "root":
        return "can not submit job to root queue"
    return None


@rule(
    *VOLCANO_JOB, "volcano job: pod template", f"{VOLCANO} admit_job.go validateTaskTemplate (core ValidatePodTemplate)"
)
def _volcano_pod_template(obj, view):
    for task in _tasks(obj):
        pod = (task.get("template") or {}).get("spec") or {}
        problem = _extended_resource_problem(pod)
        if problem:
            return f"spec.task[{task.get('name')}]: {problem}"
        if pod.get("priorityClassName") and pod["priorityClassName"] not in view.priority_classes | {
            "system-node-critical",
            "system-cluster-critical",
        }:
            return f"no PriorityClass with name {pod['priorityClassName']} was found (pod creation fails)"
    return None


def _extended_resource_problem(pod: Mapping[str, Any]) -> Optional[str]:
    """Kubernetes core validation of container resources: an extended resource needs a limit, equal to its
    request, in whole numbers (pkg/apis/core/validation ValidateResourceRequirements)."""
    for container in list(pod.get("containers") or ()) + list(pod.get("initContainers") or ()):
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for name in set(requests) | set(limits):
            if name in ("cpu", "memory", "ephemeral-storage") or name.startswith("hugepages-"):
                continue
            if name not in limits:
                return f"{name}: Limit must be set for non overcommitable resources"
            if name in requests and str(requests[name]) != str(limits[name]):
                return f"{name}: must be equal to {name} limit of {limits[name]}"
    return None


# --- Volcano Queue and PodGroup ------------------------------------------------------------------------------------

QUEUE = ("scheduling.volcano.sh/v1beta1", "Queue")
PODGROUP = ("scheduling.volcano.sh/v1beta1", "PodGroup")


@rule(*QUEUE, "volcano queue: weight and state", f"{VOLCANO} pkg/webhooks/admission/queues/validate/validate_queue.go")
def _queue(obj, view):
    spec = obj.get("spec") or {}
    if not 1 <= int(spec.get("weight", 1)) <= 65535:
        return "weight must be from 1 to 65535"
    state = ((obj.get("status") or {}).get("state")) or ""
    if state not in ("", "Open", "Closed"):
        return "queue state must be in [Open Closed]"
    deserved, capability = spec.get("deserved") or {}, spec.get("capability") or {}
    for name, value in deserved.items():
        if name in capability and float(str(value).rstrip("Gim")) > float(str(capability[name]).rstrip("Gim")):
            return f"deserved[{name}] must be <= capability[{name}]"
    return None


@rule(*PODGROUP, "volcano podgroup: queue open", f"{VOLCANO} validate_podgroup.go checkQueueState")
def _podgroup_queue(obj, view):
    queue = (obj.get("spec") or {}).get("queue") or "default"
    if queue not in view.queues:
        return f"unable to find queue: {queue}"
    if view.queues[queue] != "Open":
        return f"can only submit PodGroup to queue with state `Open`, queue `{queue}` status is `{view.queues[queue]}`"
    return None


# --- Kubeflow Trainer TrainJob (pkg/runtime/framework/plugins/*, pkg/runtime/core) ---------------------------------

TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
RUNTIME = ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime")


def _patches(obj: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    return list((obj.get("spec") or {}).get("runtimePatches") or ())


def _runtime_of(obj: Mapping[str, Any], view: ApiView) -> Optional[Mapping[str, Any]]:
    return view.runtimes.get(((obj.get("spec") or {}).get("runtimeRef") or {}).get("name", ""))


def _patched_jobs(patch: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    spec = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
    return list(spec.get("replicatedJobs") or ())


@rule(*TRAINJOB, "trainjob: runtime exists", f"{TRAINER} pkg/runtime/core/clustertrainingruntime.go ValidateObjects")
def _trainjob_runtime(obj, view):
    if _runtime_of(obj, view) is None:
        name = ((obj.get("spec") or {}).get("runtimeRef") or {}).get("name")
        return f"specified clusterTrainingRuntime {name} must be created before the TrainJob is created"
    return None


@rule(*TRAINJOB, "trainjob: patch manager", f"{TRAINER} pkg/runtime/framework/plugins/jobset/jobset.go JobSet.Validate")
def _trainjob_manager(obj, view):
    for patch in _patches(obj):
        problem = domain_prefixed_path_problem(str(patch.get("manager", "")))
        if problem:
            return f"spec.runtimePatches.manager: {problem}"
    return None


def domain_prefixed_path_problem(value: str) -> Optional[str]:
    """Why ``value`` fails ``validation.IsDomainPrefixedPath`` (kubernetes/apimachinery ``pkg/util/validation``): a
    DNS-1123 subdomain, a ``/``, a non-empty path of RFC 3986 characters."""
    if not value:
        return "Required value"
    host, _, path = value.partition("/")
    if not host or not path:
        return 'must be a domain-prefixed path (such as "acme.io/foo")'
    if len(host) > 253 or not _DNS1123_SUBDOMAIN.match(host):
        return f"{host}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'"
    if not _PATH.match(path):
        return f"{path}: Invalid path"
    return None


@rule(*TRAINJOB, "trainjob: patched jobs and containers exist", f"{TRAINER} jobset.go JobSet.Validate")
def _trainjob_patch_names(obj, view):
    runtime = _runtime_of(obj, view)
    if runtime is None:
        return None
    jobs = {j["name"]: j for j in runtime["spec"]["template"]["spec"].get("replicatedJobs") or ()}
    for patch in _patches(obj):
        for job in _patched_jobs(patch):
            if job.get("name") not in jobs:
                return f"must not have replicated job that doesn't exist in the runtime job template: {job.get('name')}"
            pod = jobs[job["name"]]["template"]["spec"]["template"]["spec"]
            known = {c["name"] for c in (pod.get("containers") or []) + (pod.get("initContainers") or [])}
            patched = ((job.get("template") or {}).get("spec") or {}).get("template", {}).get("spec") or {}
            for field_name, label in (("initContainers", "initContainer"), ("containers", "container")):
                for container in patched.get(field_name) or ():
                    if container.get("name") not in known:
                        return (
                            f"must not have {label} that doesn't exist in the runtime job {job['name']}: "
                            f"{container.get('name')}"
                        )
                    if container.get("name") in NODE_CONTAINERS and container.get("env"):
                        return "must not have envs for the dataset-initializer, model-initializer, node containers"
    return None


@rule(*TRAINJOB, "trainjob: reserved env", f"{TRAINER} pkg/runtime/framework/plugins/torch/torch.go Torch.Validate")
def _trainjob_env(obj, view):
    names = {e.get("name") for e in ((obj.get("spec") or {}).get("trainer") or {}).get("env") or ()}
    reserved = sorted(names & TORCH_RESERVED_ENV)
    return f"must not have reserved envs, invalid envs configured: {reserved}" if reserved else None


@rule(*TRAINJOB, "trainjob: volcano queue and priority", f"{TRAINER} pkg/runtime/framework/plugins/volcano Validate")
def _trainjob_volcano(obj, view):
    runtime = _runtime_of(obj, view)
    if runtime is None or "volcano" not in (runtime["spec"].get("podGroupPolicy") or {}):
        return None
    annotations = dict(((runtime["spec"]["template"].get("metadata") or {}).get("annotations")) or {})
    for patch in _patches(obj):
        meta = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("metadata") or {}
        annotations.update(meta.get("annotations") or {})
    if annotations.get("scheduling.volcano.sh/queue-name", None) == "":
        return "Volcano queue name must not be empty"
    for job in runtime["spec"]["template"]["spec"].get("replicatedJobs") or ():
        name = job["template"]["spec"]["template"]["spec"].get("priorityClassName")
        if name and name not in view.priority_classes | {"system-node-critical", "system-cluster-critical"}:
            return f'PriorityClass "{name}" doesn\'t exist'
    return None


@rule(*TRAINJOB, "trainjob: JobSet names", f"{JOBSET} pkg/webhooks/jobset_webhook.go ValidateCreate")
def _trainjob_jobset_names(obj, view):
    """The JobSet the Trainer builds is named after the TrainJob, with the replicated job ``node`` and one pod per
    node: its job name ``<name>-node-0`` and pod names ``<name>-node-0-<nodes - 1>-abcde`` must be DNS-1035 labels of
    at most 63 characters, or the JobSet is denied and the TrainJob never gets pods."""
    name = str((obj.get("metadata") or {}).get("name", ""))
    nodes = int(((obj.get("spec") or {}).get("trainer") or {}).get("numNodes") or 1)
    job, pod = f"{name}-node-0", f"{name}-node-0-{nodes - 1}-abcde"
    if len(job) > 63 or not _DNS1035_LABEL.match(job):
        return "JobSet name is too long, job names generated for this JobSet will exceed 63 characters"
    if len(pod) > 63:
        return "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters"
    return None


# --- ClusterTrainingRuntime (pkg/webhooks/trainingruntime_webhook.go validateReplicatedJobs) -----------------------


@rule(*RUNTIME, "runtime: ancestor jobs", f"{TRAINER} pkg/webhooks/trainingruntime_webhook.go validateReplicatedJobs")
def _runtime_jobs(obj, view):
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get("trainer.kubeflow.org/webhook-validation") == "disabled":
        return None
    for job in ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("replicatedJobs") or ():
        ancestor = (
            ((job.get("template") or {}).get("metadata") or {})
            .get("labels", {})
            .get("trainer.kubeflow.org/trainjob-ancestor-step")
        )
        if ancestor not in ANCESTOR_CONTAINERS:
            continue
        if int(job.get("replicas", 1)) != 1:
            return f"replicatedJobs[{job.get('name')}].replicas: always must be 1"
        pod = job["template"]["spec"]["template"]["spec"]
        if ANCESTOR_CONTAINERS[ancestor] not in {c.get("name") for c in pod.get("containers") or ()}:
            return f"must contain the required container for the ancestor: {ancestor}"
    return None


@rule(*RUNTIME, "runtime: JobSet failure policy", f"{JOBSET} pkg/webhooks/jobset_webhook.go validateFailurePolicy")
def _runtime_failure_policy(obj, view):
    policy = ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("failurePolicy") or {}
    if policy.get("restartStrategy") == "InPlaceRestart":
        return "InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is disabled"
    for item in policy.get("rules") or ():
        if str(item.get("action", "")).startswith("RestartJob"):
            return "RestartJob actions need the RestartJob feature gate, off by default"
    return None


def view_of(objects: Sequence[Mapping[str, Any]], *, queues_open: bool = True) -> ApiView:
    """What the webhooks would find once ``objects`` exist (queues open, as Volcano's queue controller opens them)."""
    view = ApiView(queues={"default": "Open"} if queues_open else {})
    for obj in objects:
        name = (obj.get("metadata") or {}).get("name")
        if (obj.get("apiVersion"), obj.get("kind")) == QUEUE:
            view.queues[name] = "Open" if queues_open else ""
        elif (obj.get("apiVersion"), obj.get("kind")) == RUNTIME:
            view.runtimes[name] = obj
        elif obj.get("kind") == "PriorityClass":
            view.priority_classes.add(name)
    return view
