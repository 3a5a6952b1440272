"""What a cluster's nodes bill for while no training runs on them: nodes held for gangs, gangs stalled, idle nodes.

``python -m trainium_eks cost --held cluster.json`` reads ``kubectl get nodes,pods -A -o json`` (one list of both
kinds) and prints, at the time given (default: now):

- each gang whose release holds its nodes (:class:`~trainium_eks.manifests.jobs.job_release_program.Capacity`): the
  capacity pods bound (one node each), those still waiting for a node, since when, and what the nodes held cost per
  hour and so far (each from its capacity pod's ``PodScheduled`` time);
- each gang with pods placed but not started (Volcano's ``Schedulable``: the gang does not fit whole; its release
  takes it back after the stall time, :class:`~trainium_eks.manifests.jobs.job_release_program.GangWatch`);
- every node of an accelerated or training type (a node with the NeuronCore, GPU or EFA resources) that runs no pod but
  DaemonSet pods, and since when (its last pod's end is not in the API: the node's age, or the end of the newest pod
  that ran there when it is still listed), with its price: warm nodes waiting for Karpenter's ``consolidateAfter``, or
  nodes nobody uses;
- the sum per hour.

Prices are on-demand list prices of the node's region (its ``topology.kubernetes.io/region`` label) from
:mod:`trainium_eks.facts.pricing`; a node without a verified price shows ``n/a``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Dict, List, Mapping, Optional, Sequence

from trainium_eks.core.conventions import EFA_RESOURCE, GPU_RESOURCE, NEURON_DEVICE_RESOURCE
from trainium_eks.facts.pricing import hourly_price
from trainium_eks.manifests.jobs.job_release_program import (
    CAPACITY_LABEL,
    GANG_POD_LABELS,
    PLACED_NOT_STARTED,
    placed_not_started,
)

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
REGION_LABEL = "topology.kubernetes.io/region"
ACCELERATED_RESOURCES = (NEURON_DEVICE_RESOURCE, GPU_RESOURCE, EFA_RESOURCE)
"""A node that has any of these is a training node: idle, it bills the most."""


class HeldCapacityError(ValueError):
    """The file is not a list of nodes and pods."""


@dataclass(frozen=True)
class HeldNode:
    """A node billed without training on it: its name, type, hourly price (None: unknown) and since when."""

    name: str
    instance_type: str
    usd_per_hour: Optional[float]
    since: Optional[datetime]

    def usd_until(self, now: datetime) -> Optional[float]:
        """What it cost from :attr:`since` to ``now`` (None when the price or the time is unknown)."""
        if self.usd_per_hour is None or self.since is None:
            return None
        return self.usd_per_hour * max(0.0, (now - self.since).total_seconds()) / 3600


def _time(text: Any) -> Optional[datetime]:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def _scheduled_at(pod: Mapping[str, Any]) -> Optional[datetime]:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            return _time(condition.get("lastTransitionTime"))
    return _time((pod.get("metadata") or {}).get("creationTimestamp"))


def _daemon(pod: Mapping[str, Any]) -> bool:
    return any(owner.get("kind") == "DaemonSet" for owner in (pod.get("metadata") or {}).get("ownerReferences") or ())


def _ended(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def objects_of(document: Any) -> List[Mapping[str, Any]]:
    """The items of ``kubectl get nodes,pods -A -o json`` (a ``List``)."""
    items = document.get("items") if isinstance(document, Mapping) else None
    if not isinstance(items, list) or not all(isinstance(item, Mapping) for item in items):
        raise HeldCapacityError("not a list of objects: give the output of `kubectl get nodes,pods -A -o json`")
    kinds = {item.get("kind") for item in items}
    if not kinds <= {"Node", "Pod"} or "Node" not in kinds:
        raise HeldCapacityError(
            f"kinds {sorted(map(str, kinds))}: give the output of `kubectl get nodes,pods -A -o json` (nodes and pods)"
        )
    return list(items)


def held_report(document: Any, now: datetime) -> str:
    """The report of what bills without training, for the nodes and pods of ``document`` at ``now``."""
    items = objects_of(document)
    nodes = {item["metadata"]["name"]: item for item in items if item.get("kind") == "Node"}
    pods = [item for item in items if item.get("kind") == "Pod"]

    def held_node(name: str, since: Optional[datetime]) -> HeldNode:
        labels = (nodes.get(name) or {}).get("metadata", {}).get("labels") or {}
        instance_type = labels.get(INSTANCE_TYPE_LABEL, "?")
        return HeldNode(name, instance_type, hourly_price(instance_type, labels.get(REGION_LABEL, "")), since)

    lines = [f"held without training at {now.isoformat(timespec='seconds')}:"]
    per_hour: List[Optional[float]] = []

    capacity: Dict[str, List[Mapping[str, Any]]] = defaultdict(list)
    for pod in pods:
        gang = ((pod.get("metadata") or {}).get("labels") or {}).get(CAPACITY_LABEL)
        if gang and not _ended(pod) and not pod["metadata"].get("deletionTimestamp"):
            capacity[gang].append(pod)
    for gang, held_pods in sorted(capacity.items()):
        first_bound: Dict[str, Optional[datetime]] = {}
        for p in held_pods:
            name = p["spec"].get("nodeName")
            if name:  # pods smaller than a node may share one: each node counts once, from its first pod
                times = [t for t in (first_bound.get(name), _scheduled_at(p)) if t]
                first_bound[name] = min(times, default=None)
        bound = [held_node(name, since) for name, since in sorted(first_bound.items())]
        placed = sum(1 for p in held_pods if p["spec"].get("nodeName"))
        since = min((_time(p["metadata"].get("creationTimestamp")) or now for p in held_pods), default=now)
        per_hour += [node.usd_per_hour for node in bound]
        lines.append(
            f"  gang {gang}: its release holds {len(bound)} nodes with {placed} of {len(held_pods)} capacity pods "
            f"placed (since {_minutes(now - since)}): {_usd_line(bound, now)}"
        )
        lines.extend(f"    {node.name} ({node.instance_type})" for node in bound)

    stalled: Dict[str, List[Mapping[str, Any]]] = defaultdict(list)
    gang_labels = set(GANG_POD_LABELS.values())
    for pod in placed_not_started(pods):
        labels = (pod.get("metadata") or {}).get("labels") or {}
        gang = next((labels[key] for key in sorted(gang_labels) if key in labels), None)
        if gang:
            stalled[gang].append(pod)
    for gang, waiting in sorted(stalled.items()):
        since = min((_placed_at(p) or now for p in waiting), default=now)
        lines.append(
            f"  gang {gang}: {len(waiting)} pods placed but not started ({PLACED_NOT_STARTED}: the gang does not fit "
            f"whole) for {_minutes(now - since)}; its release takes it back after its stall time"
        )

    running = defaultdict(list)
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            running[node].append(pod)
    idle = []
    for name, node in sorted(nodes.items()):
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        if not any(str(allocatable.get(resource, "0")) not in ("0", "") for resource in ACCELERATED_RESOURCES):
            continue
        on_it = running.get(name, [])
        if any(not _daemon(p) and not _ended(p) for p in on_it):
            continue
        ends = [_finished_at(p) for p in on_it if _ended(p) and not _daemon(p)]
        since = max((t for t in ends if t), default=_time(node["metadata"].get("creationTimestamp")))
        idle.append(held_node(name, since))
    per_hour += [node.usd_per_hour for node in idle]
    if idle:
        lines.append(f"  idle training nodes (no pod but DaemonSets): {_usd_line(idle, now)}")
        lines.extend(
            f"    {node.name} ({node.instance_type}), empty for {_minutes(now - node.since) if node.since else '?'}"
            for node in idle
        )
    if len(lines) == 1:
        lines.append("  nothing: every training node runs a pod, and no gang waits for nodes")
        return "\n".join(lines)
    known = sum(value for value in per_hour if value is not None)
    missing = " (and nodes without a price)" if any(value is None for value in per_hour) else ""
    lines.append(f"  total: {known:,.2f} USD/hour{missing}")
    return "\n".join(lines)


def _placed_at(pod: Mapping[str, Any]) -> Optional[datetime]:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("reason") == PLACED_NOT_STARTED:
            return _time(condition.get("lastTransitionTime"))
    return None


def _finished_at(pod: Mapping[str, Any]) -> Optional[datetime]:
    ends = [
        _time(((status.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for status in (pod.get("status") or {}).get("containerStatuses") or ()
    ]
    return max((end for end in ends if end), default=None)


def _minutes(span: timedelta) -> str:
    return f"{max(0, int(span.total_seconds() // 60))} min"


def _usd_line(nodes: Sequence[HeldNode], now: datetime) -> str:
    if not nodes:
        return "no node yet"
    rates = [node.usd_per_hour for node in nodes]
    so_far = [node.usd_until(now) for node in nodes]
    rate = "n/a" if None in rates else f"{sum(rates):,.2f}"
    spent = "n/a" if None in so_far else f"{sum(so_far):,.2f}"
    return f"{len(nodes)} x node, {rate} USD/hour, {spent} USD so far"
