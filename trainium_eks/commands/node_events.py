"""What the cluster records of nodes removed and of pods stopped, as ``python -m trainium_eks status`` shows it:
events on Nodes, NodeClaims, pods and release Jobs, Karpenter's log, NodeClaims being deleted, nodes' conditions and
fabric-suspect taints."""

from __future__ import annotations

import json
from typing import Dict, List, Sequence, Tuple

from trainium_eks.commands.training_jobs import Job, Object
from trainium_eks.core.conventions import FABRIC_SUSPECT_TAINT

EVENT_TTL = "1 hour"
"""How long the API server keeps an event: kube-apiserver's ``--event-ttl`` default (kubernetes v1.36.3
``pkg/controlplane/apiserver/options/options.go``)."""

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


def event_time(event: Object) -> str:
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def event_line(event: Object) -> str:
    involved = event.get("involvedObject") or {}
    count = int(event.get("count") or 1)
    times = f" (x{count})" if count > 1 else ""
    message = " ".join(str(event.get("message") or "").split())
    return (
        f"{event_time(event)}  {involved.get('kind', '?')}/{involved.get('name', '?')}  "
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
    return sorted(found, key=event_time)


def add_event_notes(jobs: Sequence[Job], events: Sequence[Object]) -> None:
    """Under each job: its release's last event (a held job's release Job is ``<job>-release``), and its pods'
    :data:`POD_EVENT_REASONS` events, oldest first."""
    by_object: Dict[Tuple[str, str], List[Object]] = {}
    for event in sorted(events, key=event_time):
        involved = event.get("involvedObject") or {}
        by_object.setdefault((str(involved.get("kind")), str(involved.get("name"))), []).append(event)
    for job in jobs:
        if job.held:
            release = by_object.get(("Job", f"{job.name}-release"), [])
            if release:
                job.notes.append(f"release: {event_line(release[-1])}")
        for pod in job.pods:
            for event in by_object.get(("Pod", str(pod["metadata"]["name"])), []):
                liveness = event.get("reason") != "Unhealthy" or str(event.get("message")).startswith(LIVENESS_FAILED)
                if event.get("reason") in POD_EVENT_REASONS and liveness:
                    job.notes.append(event_line(event))


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
