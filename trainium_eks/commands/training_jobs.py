"""The training jobs of a namespace as ``python -m trainium_eks status`` shows them: each kind of job, where its
controller keeps its state and its restarts, its pods, and the pod whose progress file says its last step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple

from trainium_eks.core.conventions import HELD_JOB_LABEL
from trainium_eks.manifests.jobs.job_release_program import recreated_count
from trainium_eks.manifests.jobs.progress_watch import PROGRESS_FILE, PROGRESS_FILE_ENV

Object = Mapping[str, Any]


@dataclass(frozen=True)
class JobKind:
    """A kind of job the command lists.

    :param title: How the table names it.
    :param resource: kubectl's name of the resource (``<plural>.<group>``).
    :param pod_label: The label that names the job on its pods.
    """

    title: str
    resource: str
    pod_label: str


VOLCANO = JobKind("volcano", "jobs.batch.volcano.sh", "volcano.sh/job-name")
TRAINJOB = JobKind("trainjob", "trainjobs.trainer.kubeflow.org", "jobset.sigs.k8s.io/jobset-name")
JOBSET = JobKind("jobset", "jobsets.jobset.x-k8s.io", "jobset.sigs.k8s.io/jobset-name")
PYTORCHJOB = JobKind("pytorchjob", "pytorchjobs.kubeflow.org", "training.kubeflow.org/job-name")
BATCH = JobKind("job", "jobs.batch", "batch.kubernetes.io/job-name")
KINDS = (VOLCANO, TRAINJOB, JOBSET, PYTORCHJOB, BATCH)
"""The kinds listed, in this order. A kind whose CRD the cluster does not have is left out."""

FAILED_STATES = ("Failed", "Terminated")
"""States of :func:`job_of` that count as a failed job: Volcano's ``Terminated`` included (a job its policy ended,
``TerminateJob``), not its ``Aborted``, which ``vcctl job suspend`` also leads to and a resume leaves
(volcano-sh/volcano v1.15.1 ``pkg/cli/job/suspend.go``, ``pkg/controllers/job/state/aborted.go``)."""


@dataclass
class Job:
    """One job as the table shows it.

    :param kind: Its :class:`JobKind`.
    :param name: Its name.
    :param state: Its state, in its controller's words.
    :param restarts: How often it restarted (None: its controller does not count them).
    :param recreated: How often its release deleted it and created it again (annotation
        ``trainium-eks/recreated-by-release``): a gang that stalled on part of its nodes, a fabric check given new
        nodes; each new object's own count starts from zero.
    :param held: Whether a release holds its capacity before it exists (label ``trainium-eks/held-job``).
    :param pods: Its pods (``kubectl get pods`` items).
    :param last_step: The last step its first running pod wrote, with its age (empty when none).
    :param notes: Lines under its row: its release's last event, its pods' events.
    """

    kind: JobKind
    name: str
    state: str
    restarts: Optional[int]
    recreated: int = 0
    held: bool = False
    pods: List[Object] = field(default_factory=list)
    last_step: str = ""
    notes: List[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.state in FAILED_STATES


def _true_conditions(resource: Object) -> List[str]:
    """The types of ``resource``'s conditions whose status is ``True``, in their order."""
    conditions = (resource.get("status") or {}).get("conditions") or ()
    return [str(c.get("type")) for c in conditions if str(c.get("status")) == "True"]


def _first_of(conditions: Sequence[str], terminal: Sequence[str], otherwise: str) -> str:
    """The first of ``terminal`` in ``conditions``, else ``otherwise``."""
    return next((state for state in terminal if state in conditions), otherwise)


def _pods_state(pods: Sequence[Object]) -> str:
    """``Running`` when a pod of ``pods`` runs, ``Pending`` when there are pods, else ``Created``."""
    if any((pod.get("status") or {}).get("phase") == "Running" for pod in pods):
        return "Running"
    return "Pending" if pods else "Created"


def _most_container_restarts(pods: Iterable[Object]) -> int:
    """The most restarts of one container of ``pods``: a PyTorchJob restarts its containers in place, each stalled
    peer in turn, so one restart of the gang is one restart of each container."""
    counts = [
        int(status.get("restartCount") or 0)
        for pod in pods
        for status in (pod.get("status") or {}).get("containerStatuses") or ()
    ]
    return max(counts, default=0)


def job_of(kind: JobKind, resource: Object, jobsets: Mapping[str, Object], pods: Sequence[Object]) -> Job:
    """The :class:`Job` of ``resource`` (a ``kind`` object), with ``jobsets`` (name -> JobSet: a TrainJob's restarts
    are its JobSet's, which has its name) and its ``pods``.

    Where each kind keeps its state and restarts: a Volcano job, ``status.state.phase`` and ``status.retryCount``;
    a JobSet, its conditions and ``status.restarts``; a TrainJob, its conditions and its JobSet's restarts; a
    PyTorchJob, its conditions and the most restarts of one of its containers (it restarts containers in place);
    a batch Job, its
    conditions and ``status.failed`` (pods retried under ``backoffLimit``)."""
    metadata = resource.get("metadata") or {}
    status = resource.get("status") or {}
    name = str(metadata.get("name"))
    held = HELD_JOB_LABEL in (metadata.get("labels") or {})
    conditions = _true_conditions(resource)
    if kind is VOLCANO:
        state = str((status.get("state") or {}).get("phase") or "Pending")
        restarts: Optional[int] = int(status.get("retryCount") or 0)
    elif kind is JOBSET:
        state = _first_of(conditions, ("Failed", "Completed", "Suspended"), _pods_state(pods))
        restarts = int(status.get("restarts") or 0)
    elif kind is TRAINJOB:
        state = _first_of(conditions, ("Failed", "Complete", "Suspended"), _pods_state(pods))
        jobset = jobsets.get(name)
        restarts = int((jobset.get("status") or {}).get("restarts") or 0) if jobset else None
    elif kind is PYTORCHJOB:
        state = _first_of(conditions, ("Failed", "Succeeded"), conditions[-1] if conditions else "Created")
        restarts = _most_container_restarts(pods)
    else:
        state = _first_of(
            conditions, ("Failed", "Complete", "Suspended"), "Running" if status.get("active") else "Pending"
        )
        restarts = int(status.get("failed") or 0)
    return Job(kind, name, state, restarts, recreated=recreated_count(resource), held=held, pods=list(pods))


def _owned_by(resource: Object, kinds: Sequence[str]) -> bool:
    owners = (resource.get("metadata") or {}).get("ownerReferences") or ()
    return any(owner.get("kind") in kinds for owner in owners)


def jobs_of(listed: Mapping[JobKind, Sequence[Object]], pods: Sequence[Object]) -> List[Job]:
    """The :class:`Job` of every listed object (kind -> ``kubectl get`` items), without the objects another job owns:
    a TrainJob's JobSet, a JobSet's batch Jobs."""
    jobsets = {str(j["metadata"]["name"]): j for j in listed.get(JOBSET, ())}
    jobs = []
    for kind in KINDS:
        for resource in listed.get(kind, ()):
            if kind is JOBSET and _owned_by(resource, ("TrainJob",)):
                continue
            if kind is BATCH and _owned_by(resource, ("JobSet",)):
                continue
            name = resource["metadata"]["name"]
            mine = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(kind.pod_label) == name]
            jobs.append(job_of(kind, resource, jobsets, mine))
    return jobs


INDEX_LABELS = (
    "jobset.sigs.k8s.io/job-global-index",
    "batch.kubernetes.io/job-completion-index",
    "volcano.sh/task-index",
    "training.kubeflow.org/replica-index",
)
"""Labels that number a job's pods, in the order that ranks them (a JobSet's job across its replicated jobs, then
its pod)."""


def progress_pod(pods: Sequence[Object]) -> Optional[Tuple[Object, str, str]]:
    """``(pod, container, path)`` of the running pod of ``pods`` with a progress file (:func:`progress_target`) and
    the lowest index labels (node 0 when it runs), or None."""

    def rank(pod: Object) -> Tuple[Any, ...]:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        numbers = []
        for label in INDEX_LABELS:
            text = str(labels.get(label, ""))
            numbers.append(int(text) if text.isdigit() else 0)
        return (*numbers, str(pod["metadata"]["name"]))

    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running" and progress_target(p)]
    if not running:
        return None
    pod = min(running, key=rank)
    return (pod, *progress_target(pod))  # type: ignore[misc]


def progress_target(pod: Object) -> Optional[Tuple[str, str]]:
    """``(container, path)`` of the progress file of ``pod``: its first container with :data:`PROGRESS_FILE_ENV`,
    or None when none has it (a job without a progress watch)."""
    for container in (pod.get("spec") or {}).get("containers") or ():
        for variable in container.get("env") or ():
            if variable.get("name") == PROGRESS_FILE_ENV:
                return str(container["name"]), str(variable.get("value") or PROGRESS_FILE)
    return None


def step_text(line: str, now: float) -> str:
    """What the progress file's line (``<step> <unix time>``, or ``start <unix time>`` before the first step) says,
    with its age at ``now``."""
    parts = line.split()
    if len(parts) != 2 or not parts[1].isdigit():
        return f"unreadable progress file: {line.strip()[:60]!r}"
    age = max(0, int(now) - int(parts[1]))
    what = "no step yet, started" if parts[0] == "start" else f"step {parts[0]},"
    return f"{what} {_age(age)} ago"


def _age(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
