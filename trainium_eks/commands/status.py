"""``python -m trainium_eks status``: what happened to a stack's training jobs and to the nodes they ran on.

From the cluster, through kubectl pointed at the stack's cluster (as for ``fabric``: the command names the context it
read and, with AWS, says when that context is not the stack's cluster):

- **jobs**: every Volcano job, TrainJob, JobSet of a user's own, PyTorchJob and batch Job in the namespace, with its
  state, its restarts (:func:`job_of` says where each kind keeps them), its pods running of all, and the last
  training step with its age: the progress file (:mod:`~trainium_eks.manifests.jobs.progress_watch`) of the job's
  first running pod, read with ``kubectl exec``; for a held job, its release's last event (capacity held, queued,
  not held, a gang stalled, fabric suspects);
- **nodes replaced and why**: the events Karpenter records on Nodes and NodeClaims when it removes one or cannot
  (:data:`REPLACEMENT_REASONS`); the lines of Karpenter's log that say it removed one (:data:`KARPENTER_LOG_MESSAGES`:
  the only event of a node repair says when, not why), over ``--since`` (default 24 hours) or from a saved log
  (``--karpenter-log``); the NodeClaims being deleted now; the nodes with a condition Karpenter's node repair acts
  on; and under each job, its pods' liveness kills for no progress, evictions and preemptions;
- **fabric suspects**: nodes with the ``trainium-eks/fabric-suspect`` taint, with the check that named them.

From AWS (boto3, the default credentials or ``--profile``; ``--no-aws`` leaves it out): the stack's status, its
``ClusterName`` output, whose endpoint (EKS ``DescribeCluster``) must be the server of kubectl's context, and in
node-group mode each managed node group's status, size and health issues (EKS ``DescribeNodegroup``,
``health.issues``: launches that failed, instances that did not join). AWS that cannot be reached is one line, and
the cluster is still read.

The API server keeps events for an hour (kube-apiserver's ``--event-ttl``, default ``1h``): a node replaced earlier
shows in Karpenter's log, as long as its pods keep it, and as a restart of its job. Exit status: 0 when no job has
failed, 1 when one has, 2 when the cluster cannot be read.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from trainium_eks.commands.kubectl import KubectlError, cluster_hint, kubectl, reason, run_kubectl
from trainium_eks.core.conventions import DEFAULT_NAMESPACE, FABRIC_SUSPECT_TAINT, HELD_JOB_LABEL
from trainium_eks.manifests.jobs.job_release_program import recreated_count
from trainium_eks.manifests.jobs.progress_watch import PROGRESS_FILE, PROGRESS_FILE_ENV

Object = Mapping[str, Any]

EVENT_TTL = "1 hour"
"""How long the API server keeps an event: kube-apiserver's ``--event-ttl`` default (kubernetes v1.36.3
``pkg/controlplane/apiserver/options/options.go``), which EKS does not change."""

REPLACEMENT_REASONS: Dict[str, str] = {
    "DisruptionTerminating": "Karpenter removes it: drifted, empty or underutilized (the message says which)",
    "TerminationGracePeriodExpiring": "its pods are deleted by the time the message gives, drained or not",
    "FailedDraining": "Karpenter cannot drain it yet (a PodDisruptionBudget, a pod that does not leave)",
    "NodeRepairBlocked": "unhealthy, but not repaired: more than 20 % of its NodePool's or the cluster's nodes are",
    "SpotInterrupted": "EC2's two-minute Spot interruption warning",
    "CapacityReservationInstanceInterrupted": "EC2's interruption warning for an instance of a capacity reservation",
    "InstanceStopping": "EC2 says the instance is stopping",
    "InstanceTerminating": "EC2 says the instance is terminating",
    "InstanceUnhealthy": "EC2 scheduled a change or reports the instance or its host unhealthy",
    "TerminatingOnInterruption": "Karpenter deleted it on EC2's message (one of the five before)",
}
"""Reasons of the events on Nodes and NodeClaims that say one is being removed, or cannot be, and what each means.
Karpenter core (kubernetes-sigs/karpenter v1.14.1 ``pkg/controllers/disruption/events/events.go``,
``pkg/controllers/node/termination/terminator/events/events.go``, ``pkg/controllers/node/health/events.go``) and the
AWS provider's interruption controller (aws/karpenter-provider-aws v1.14.1 ``pkg/controllers/interruption/events/
events.go``). Node repair records no event of its own (``node/health/controller.go``: a metric and a log line): it
sets the NodeClaim's termination deadline, on which the termination controller records
``TerminationGracePeriodExpiring`` (``node/termination/controller.go``), which says when, not why;
:data:`KARPENTER_LOG_MESSAGES` finds the repair in the controller's log."""

KARPENTER_LOG_MESSAGES: Dict[str, str] = {
    "deleting unhealthy node": "node repair: a condition unhealthy past the provider's toleration",
    "disrupting node(s)": "disruption",
    "deleted node": "node removed",
}
"""Karpenter's log lines (JSON, field ``message``) that say a node goes, and what each means (kubernetes-sigs/karpenter
v1.14.1 ``pkg/controllers/node/health/controller.go``, ``pkg/controllers/disruption/queue.go``,
``pkg/controllers/node/termination/controller.go``); a ``disrupting node(s)`` line's ``command`` field says why. An
expired NodeClaim logs its reason at debug level only (``nodeclaim/expiration/controller.go``; the chart's
``logLevel`` is ``info``), so its node shows as ``deleted node``, without a reason."""

KARPENTER_PODS = ("kube-system", "app.kubernetes.io/name=karpenter")
"""Where the stacks' Karpenter runs (:data:`~trainium_eks.constructs.karpenter_controller.KARPENTER_NAMESPACE`; the
chart's ``app.kubernetes.io/name`` label), whose logs the command reads."""

REPAIRED_CONDITIONS: Dict[str, Tuple[str, ...]] = {
    "Ready": ("False", "Unknown"),
    "AcceleratedHardwareReady": ("False",),
    "StorageReady": ("False",),
    "NetworkingReady": ("False",),
    "KernelReady": ("False",),
    "ContainerRuntimeReady": ("False",),
}
"""Node conditions Karpenter's node repair acts on, with the statuses it acts on (aws/karpenter-provider-aws v1.14.1
``pkg/cloudprovider/cloudprovider.go`` ``RepairPolicies``; :class:`~trainium_eks.constructs.karpenter_controller.
KarpenterController` says after how long)."""

POD_EVENT_REASONS = ("Unhealthy", "Evicted", "Evict", "Preempted")
"""Events on a job's pods that say why a gang restarted: a liveness kill for no progress (the kubelet's
``Unhealthy`` whose message starts with :data:`LIVENESS_FAILED`; its readiness and startup failures are left out),
an eviction (the kubelet's or Karpenter's ``Evicted``), a preemption or reclaim by Volcano's scheduler (``Evict``,
volcano-sh/volcano v1.15.1 ``pkg/scheduler/cache/cache.go``) or by kube-scheduler (``Preempted``)."""
LIVENESS_FAILED = "Liveness probe failed"
"""How the kubelet's ``Unhealthy`` event of a failed liveness probe begins (kubernetes v1.36.3
``pkg/kubelet/prober/prober.go``)."""


class StatusError(KubectlError):
    """The cluster cannot be read: kubectl, the context, or an answer that is not what kubectl gives."""


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


def _event_time(event: Object) -> str:
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def _event_line(event: Object) -> str:
    involved = event.get("involvedObject") or {}
    count = int(event.get("count") or 1)
    times = f" (x{count})" if count > 1 else ""
    message = " ".join(str(event.get("message") or "").split())
    return (
        f"{_event_time(event)}  {involved.get('kind', '?')}/{involved.get('name', '?')}  "
        f"{event.get('reason', '?')}{times}: {message}"
    )


def replacement_events(events: Sequence[Object]) -> List[Object]:
    """The events of ``events`` that say a node is being removed (:data:`REPLACEMENT_REASONS` on a Node or a
    NodeClaim), oldest first."""
    found = [
        e
        for e in events
        if (e.get("involvedObject") or {}).get("kind") in ("Node", "NodeClaim")
        and e.get("reason") in REPLACEMENT_REASONS
    ]
    return sorted(found, key=_event_time)


def add_event_notes(jobs: Sequence[Job], events: Sequence[Object]) -> None:
    """Under each job: its release's last event (a held job's release Job is ``<job>-release``), and its pods'
    :data:`POD_EVENT_REASONS` events, oldest first."""
    by_object: Dict[Tuple[str, str], List[Object]] = {}
    for event in sorted(events, key=_event_time):
        involved = event.get("involvedObject") or {}
        by_object.setdefault((str(involved.get("kind")), str(involved.get("name"))), []).append(event)
    for job in jobs:
        if job.held:
            release = by_object.get(("Job", f"{job.name}-release"), [])
            if release:
                job.notes.append(f"release: {_event_line(release[-1])}")
        for pod in job.pods:
            for event in by_object.get(("Pod", str(pod["metadata"]["name"])), []):
                liveness = event.get("reason") != "Unhealthy" or str(event.get("message")).startswith(LIVENESS_FAILED)
                if event.get("reason") in POD_EVENT_REASONS and liveness:
                    job.notes.append(_event_line(event))


def unhealthy_nodes(nodes: Sequence[Object]) -> List[str]:
    """A line for each node with a condition :data:`REPAIRED_CONDITIONS` names at a status the repair acts on."""
    lines = []
    for node in nodes:
        for condition in (node.get("status") or {}).get("conditions") or ():
            statuses = REPAIRED_CONDITIONS.get(str(condition.get("type")))
            if statuses and str(condition.get("status")) in statuses:
                lines.append(
                    f"{node['metadata']['name']}  {condition['type']}={condition['status']} since "
                    f"{condition.get('lastTransitionTime', '?')}: {condition.get('reason', '')} "
                    f"{condition.get('message', '')}".rstrip()
                )
    return lines


TERMINATION_DEADLINE_ANNOTATION = "karpenter.sh/nodeclaim-termination-timestamp"
"""The deadline by which Karpenter deletes the pods of a NodeClaim it removes, drained or not: the moment its node
repair acts, or the AWS provider's interruption controller for an instance EC2 reports unhealthy (instance or system
status), or the deletion plus the NodePool's ``terminationGracePeriod`` (the library's pools set none)
(kubernetes-sigs/karpenter v1.14.1 ``pkg/controllers/node/health/controller.go``,
``pkg/controllers/nodeclaim/lifecycle/controller.go``; aws/karpenter-provider-aws v1.14.1
``pkg/controllers/interruption/utils.go``)."""


def deleting_nodeclaims(nodeclaims: Sequence[Object]) -> List[str]:
    """A line for each NodeClaim being deleted, with its node and why: the disruption's reason (its
    ``DisruptionReason`` condition, set by Karpenter's disruption queue, ``pkg/controllers/disruption/queue.go``) or
    its termination deadline (:data:`TERMINATION_DEADLINE_ANNOTATION`)."""
    lines = []
    for claim in nodeclaims:
        metadata = claim.get("metadata") or {}
        if not metadata.get("deletionTimestamp"):
            continue
        node = (claim.get("status") or {}).get("nodeName") or "(no node yet)"
        why = []
        for condition in (claim.get("status") or {}).get("conditions") or ():
            if condition.get("type") == "DisruptionReason" and condition.get("status") == "True":
                reason_, message = condition.get("reason", "?"), condition.get("message", "")
                why.append(f"disrupted: {reason_}" + (f" ({message})" if message and message != reason_ else ""))
        deadline = (metadata.get("annotations") or {}).get(TERMINATION_DEADLINE_ANNOTATION)
        if deadline:
            why.append(
                f"its pods' termination deadline {deadline} (node repair, an instance EC2 reports unhealthy, or the "
                "pool's terminationGracePeriod)"
            )
        lines.append(
            f"nodeclaim/{metadata.get('name')} (node {node}) deleted at {metadata['deletionTimestamp']}"
            + (f": {'; '.join(why)}" if why else "")
        )
    return lines


def suspect_nodes(nodes: Sequence[Object]) -> List[str]:
    """A line for each node with the :data:`FABRIC_SUSPECT_TAINT` taint: the node, the check that named it (the
    taint's value) and when."""
    lines = []
    for node in nodes:
        for taint in (node.get("spec") or {}).get("taints") or ():
            if taint.get("key") == FABRIC_SUSPECT_TAINT:
                lines.append(f"{node['metadata']['name']}  named by fabric check {taint.get('value', '?')}")
    return lines


def karpenter_removals(log: str) -> List[str]:
    """A line for each line of Karpenter's log (JSON lines; ``kubectl logs --prefix`` ahead of them is skipped) that
    :data:`KARPENTER_LOG_MESSAGES` names: its time, node, NodeClaim, what it means and why (a disruption's
    ``command``)."""
    found = []
    for line in log.splitlines():
        start = line.find("{")
        try:
            entry = json.loads(line[start:]) if start >= 0 else None
        except ValueError:
            continue
        meaning = KARPENTER_LOG_MESSAGES.get(entry.get("message")) if isinstance(entry, dict) else None
        if meaning is None:
            continue
        node = (entry.get("Node") or {}).get("name")
        claim = (entry.get("NodeClaim") or {}).get("name")
        what = ", ".join(f"{kind} {name}" for kind, name in (("node", node), ("nodeclaim", claim)) if name)
        why = f": {entry['command']}" if entry.get("command") else ""
        found.append(f"{entry.get('time', '?')}  {what or 'nodes'}  {meaning}{why}")
    return found


def _items(text: str, what: str) -> List[Object]:
    try:
        return list(json.loads(text).get("items") or [])
    except (json.JSONDecodeError, AttributeError) as error:
        raise StatusError(f"kubectl {what} did not answer JSON: {error}") from error


NOT_SERVED = ("the server doesn't have a resource type", "could not find the requested resource")
"""kubectl's words for a resource the cluster does not serve (its CRD is not installed)."""


def _list(args: Sequence[str], stack: str, what: str) -> Optional[List[Object]]:
    """``kubectl get ... -o json`` items; None when the cluster does not serve the resource."""
    done = run_kubectl([*args, "-o", "json"], stack, what)
    if done.returncode != 0:
        if any(words in done.stderr for words in NOT_SERVED):
            return None
        raise StatusError(f"kubectl {what} failed ({reason(done.stderr, done.returncode)}): {cluster_hint(stack)}")
    return _items(done.stdout, what)


@dataclass
class ClusterState:
    """What the cluster says: jobs, events, nodes, NodeClaims (None: no Karpenter), kinds it does not serve, and
    Karpenter's log lines of removed nodes (:func:`karpenter_removals`) or why its log was not read."""

    jobs: List[Job]
    events: List[Object]
    nodes: List[Object]
    nodeclaims: Optional[List[Object]]
    missing_kinds: List[str]
    karpenter: List[str] = field(default_factory=list)


def karpenter_log(stack: str, since: str) -> Tuple[str, str]:
    """``(log, "")`` of every Karpenter pod (:data:`KARPENTER_PODS`) over ``since``, or ``("", why not)``."""
    namespace, selector = KARPENTER_PODS
    args = ["-n", namespace, "logs", "-l", selector, "--tail=-1", f"--since={since}", "--prefix"]
    done = run_kubectl([*args, "--max-log-requests=10"], stack, "logs")
    if done.returncode != 0:
        return "", reason(done.stderr, done.returncode)
    return done.stdout, ""


def read_cluster(
    namespace: str, stack: str, *, since: str = "24h", log: Optional[str] = None, now: Optional[float] = None
) -> ClusterState:
    """Every job of ``namespace``, its pods and their last step, the events of the cluster, its nodes and NodeClaims,
    and with Karpenter the nodes its log (``log``, else its pods' over ``since``) says it removed."""
    listed: Dict[JobKind, List[Object]] = {}
    missing = []
    for kind in KINDS:
        items = _list(["-n", namespace, "get", kind.resource], stack, f"get {kind.resource}")
        if items is None:
            missing.append(kind.resource)
        else:
            listed[kind] = items
    pods = _list(["-n", namespace, "get", "pods"], stack, "get pods") or []
    jobs = jobs_of(listed, pods)
    for job in jobs:
        found = progress_pod(job.pods)
        if found is None:
            continue
        pod, container, path = found
        name = str(pod["metadata"]["name"])
        done = run_kubectl(["-n", namespace, "exec", name, "-c", container, "--", "cat", path], stack, "exec")
        if done.returncode == 0:
            job.last_step = f"{step_text(done.stdout, time.time() if now is None else now)} (pod/{name})"
        else:
            job.last_step = f"progress of pod/{name} not read: {reason(done.stderr, done.returncode)}"
    events = _list(["get", "events", "--all-namespaces"], stack, "get events") or []
    add_event_notes(jobs, [e for e in events if (e.get("metadata") or {}).get("namespace") == namespace])
    nodes = _list(["get", "nodes"], stack, "get nodes") or []
    nodeclaims = _list(["get", "nodeclaims.karpenter.sh"], stack, "get nodeclaims")
    state = ClusterState(jobs, events, nodes, nodeclaims, missing)
    if nodeclaims is not None:
        why = ""
        if log is None:
            log, why = karpenter_log(stack, since)
        state.karpenter = karpenter_removals(log) or [f"(Karpenter's log not read: {why})" if why else "none"]
    return state


@dataclass
class AwsState:
    """What AWS says of the stack: its status, its cluster's name and endpoint, its managed node groups' lines."""

    stack_status: str
    cluster_name: Optional[str]
    endpoint: Optional[str]
    node_groups: List[str]


def nodegroup_line(group: Object) -> str:
    """A managed node group: name, status, nodes wanted, and each health issue (code, message, instances)."""
    scaling = group.get("scalingConfig") or {}
    issues = (group.get("health") or {}).get("issues") or ()
    health = "; ".join(
        f"{i.get('code')}: {i.get('message', '')} ({', '.join(i.get('resourceIds') or ()) or 'no instance named'})"
        for i in issues
    )
    return (
        f"{group.get('nodegroupName')}  {group.get('status')}  {scaling.get('desiredSize', '?')} nodes wanted  "
        f"{health or 'no health issue'}"
    )


def read_aws(session: Any, stack: str) -> AwsState:
    """The stack (CloudFormation ``DescribeStacks``), its cluster (``ClusterName`` output, EKS ``DescribeCluster``)
    and its managed node groups (``ListNodegroups``, ``DescribeNodegroup``); botocore's errors pass through."""
    cloudformation = session.client("cloudformation")
    found = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in found.get("Outputs") or ()}
    name = outputs.get("ClusterName")
    if name is None:
        return AwsState(str(found.get("StackStatus")), None, None, [])
    eks = session.client("eks")
    endpoint = eks.describe_cluster(name=name)["cluster"].get("endpoint")
    groups = []
    for page in eks.get_paginator("list_nodegroups").paginate(clusterName=name):
        for group in page.get("nodegroups") or ():
            groups.append(nodegroup_line(eks.describe_nodegroup(clusterName=name, nodegroupName=group)["nodegroup"]))
    return AwsState(str(found.get("StackStatus")), name, endpoint, groups)


def _table(rows: Sequence[Sequence[str]]) -> List[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def render(state: ClusterState, namespace: str) -> List[str]:
    """The report of ``state``: jobs, nodes replaced and why, nodes being replaced or unhealthy, fabric suspects."""
    lines = [f"Jobs in namespace {namespace}:"]
    if state.jobs:
        rows = [("KIND", "NAME", "STATE", "RESTARTS", "PODS RUNNING", "LAST STEP")]
        for job in state.jobs:
            running = sum(1 for p in job.pods if (p.get("status") or {}).get("phase") == "Running")
            restarts = "-" if job.restarts is None else str(job.restarts)
            restarts += f" (+{job.recreated} recreated)" if job.recreated else ""
            rows.append((job.kind.title, job.name, job.state, restarts, f"{running}/{len(job.pods)}", job.last_step))
        table = _table(rows)
        lines.append(table[0])
        for job, row in zip(state.jobs, table[1:], strict=True):
            lines.append(row)
            lines.extend(f"      {note}" for note in job.notes)
    else:
        lines.append("  none")
    if state.missing_kinds:
        lines.append(f"  (not served by this cluster: {', '.join(state.missing_kinds)})")
    replaced = [_event_line(e) for e in replacement_events(state.events)]
    lines += ["", f"Nodes removed or being removed, and why (events of the last {EVENT_TTL}):"]
    lines += [f"  {line}" for line in replaced] or ["  none"]
    if state.nodeclaims is not None:
        lines += ["", "Nodes Karpenter's log says it removed (a repair's reason is only there):"]
        lines += [f"  {line}" for line in state.karpenter]
        lines += ["", "NodeClaims being deleted now:"]
        lines += [f"  {line}" for line in deleting_nodeclaims(state.nodeclaims)] or ["  none"]
    lines += ["", "Nodes with a condition Karpenter's node repair acts on:"]
    lines += [f"  {line}" for line in unhealthy_nodes(state.nodes)] or ["  none"]
    lines += ["", f"Fabric suspects (nodes tainted {FABRIC_SUSPECT_TAINT}):"]
    lines += [f"  {line}" for line in suspect_nodes(state.nodes)] or ["  none"]
    return lines


def _duration(text: str) -> str:
    """``text`` if it is a duration kubectl's ``--since`` takes (a whole number and ``s``, ``m`` or ``h``)."""
    if not re.fullmatch(r"[1-9][0-9]*[smh]", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 90m or 24h")
    return text


def _context(stack: str) -> Tuple[str, str]:
    """kubectl's current context and its cluster's server."""
    context = kubectl(["config", "current-context"], stack, "config current-context").strip()
    server = kubectl(
        ["config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"], stack, "config view"
    ).strip()
    return context, server


def main(argv: Optional[Sequence[str]] = None, *, session: Any = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainium_eks status", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True, help="the stack whose cluster to read (kubectl's context)")
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE, help=f"default {DEFAULT_NAMESPACE}")
    parser.add_argument("--profile", help="the AWS CLI profile to use (default: the default credentials)")
    parser.add_argument("--region", help="the stack's region (default: the profile's or AWS_REGION)")
    parser.add_argument("--no-aws", action="store_true", help="read only the cluster, not the stack and node groups")
    parser.add_argument(
        "--since", default="24h", type=_duration, help="how far back to read Karpenter's log (kubectl's form: 90m, 2h)"
    )
    parser.add_argument("--karpenter-log", type=Path, help="read a saved Karpenter log instead of its pods'")
    options = parser.parse_args(argv)
    try:
        context, server = _context(options.stack)
    except KubectlError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    aws: Optional[AwsState] = None
    if not options.no_aws:
        from trainium_eks.commands.aws_errors import advice

        try:
            if session is None:
                import boto3

                session = boto3.Session(profile_name=options.profile, region_name=options.region)
            aws = read_aws(session, options.stack)
        except Exception as error:
            message = advice(error)
            if message is None:
                raise
            print(f"AWS not read ({message}); the cluster only:")
    if aws is not None:
        print(f"Stack {options.stack}: {aws.stack_status}, cluster {aws.cluster_name or '(no ClusterName output)'}")
        if aws.endpoint and aws.endpoint.rstrip("/") != server.rstrip("/"):
            print(
                f"error: kubectl's context {context} is not the cluster of stack {options.stack} ({server}, not "
                f"{aws.endpoint}): {cluster_hint(options.stack)}",
                file=sys.stderr,
            )
            return 2
        if aws.node_groups:
            print("Managed node groups (status, size, health issues):")
            print("\n".join(f"  {line}" for line in aws.node_groups))
    print(f"kubectl context {context}")
    try:
        log = options.karpenter_log.read_text(errors="replace") if options.karpenter_log else None
        state = read_cluster(options.namespace, options.stack, since=options.since, log=log)
    except OSError as error:
        print(f"error: {options.karpenter_log}: {error.strerror or error}", file=sys.stderr)
        return 2
    except KubectlError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(render(state, options.namespace)))
    return 1 if any(job.failed for job in state.jobs) else 0
