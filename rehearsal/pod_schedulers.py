"""The two schedulers of the stacks' clusters, as the scheduling rehearsal runs them once per tick.

**The default scheduler** (kube-scheduler) takes the pods whose ``schedulerName`` is empty or ``default-scheduler``
one at a time, highest priority first, then oldest (its active queue's ``PrioritySort``), and binds each to a node
that passes the filters (:mod:`.pod_placement`) and has room, preferring the least allocated
(``NodeResourcesFit`` LeastAllocated). It knows nothing of PodGroups: the pods of one gang are placed one by one.
A pod it cannot place gets ``PodScheduled=False`` reason ``Unschedulable`` (what Karpenter launches nodes for).
Preemption is not modelled (no priority class of the library preempts, and no job pod outranks another's).

**Volcano** (volcano-sh/volcano v1.15.1, no preemption or reclaim) handles the pods whose ``schedulerName`` is
``volcano``, per PodGroup, with the actions of the cluster's configuration (``SimulatedCluster.volcano_actions``: the
chart's ``volcano-scheduler.conf`` has ``enqueue, allocate, backfill``; a stack may override it):

- *enqueue* (``pkg/scheduler/actions/enqueue``): a ``Pending`` PodGroup becomes ``Inqueue`` when both voters permit:
  ``overcommit`` (the PodGroups already in queue plus this one's ``minResources`` fit in 1.2 x the cluster's
  allocatable less what pods use, on every resource the PodGroup asks for) and ``proportion`` (its queue is open and
  the queue's allocated and in-queue resources plus this ``minResources`` fit in the cluster's total). A PodGroup
  asking for more than the cluster has, or for a resource no node advertises, stays ``Pending``; a Volcano job's pods
  are created only after enqueue, so nothing else happens. *Without* ``enqueue`` among the actions, ``allocate``
  moves every ``Pending`` PodGroup (of an existing queue) to ``Inqueue`` unconditionally, with no capacity check
  (``pkg/scheduler/actions/allocate/allocate.go`` ``buildAllocateContext``; the phase persists through
  ``pkg/scheduler/framework/session.go`` ``getPodGroupPhase``), so the job's pods are created even on zero nodes;
- *allocate* (``pkg/scheduler/actions/allocate`` with the ``gang`` plugin): PodGroups in queue, highest priority then
  oldest; the pending pods of one are placed on nodes that pass the same filters (``predicates`` plugin) and have
  room; unless the PodGroup then has ``minMember`` pods placed, every tentative placement is discarded (all or
  nothing). With several queues holding jobs, a queue gets at most its weighted share of the cluster (``proportion``'s
  ``deserved``, capped by what it asks for); the library's jobs all use one queue.
- a PodGroup becomes ``Running`` once ``minMember`` of its pods are bound;
- at the session's close every unbound pod of every PodGroup of the session (its queue exists) gets a
  ``PodScheduled=False`` reason (``pkg/scheduler/cache/cache.go`` ``RecordJobStatusEvent``,
  ``pkg/scheduler/api/job_info.go`` ``TaskSchedulingReason``): ``Schedulable`` for the pods of a gang it placed
  tentatively and then discarded (their last transaction was ``Allocated``), ``Unschedulable`` for the others (did
  not fit, were not tried, or their PodGroup is not in queue). Karpenter launches nodes only for the second
  (volcano-sh/volcano#3976).

``backfill`` (pods that request nothing) has nothing to do with the library's pods, which all request resources; an
action list without ``allocate`` places nothing.

Quantities in the overcommit check are compared after the add-on pods' share was taken from each node (the real
plugin counts those pods as used instead; the difference is a fifth of what add-ons take).
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Set, Tuple

from rehearsal.pod_placement import fits, selection_problems
from rehearsal.simulated_cluster import DEFAULT_VOLCANO_ACTIONS, Node, Pod, PodGroup, SimulatedCluster

__all__ = ["DEFAULT_VOLCANO_ACTIONS", "default_scheduler", "volcano_scheduler"]

UNSCHEDULABLE = "Unschedulable"
SCHEDULABLE = "Schedulable"
"""Reasons of a pod's ``PodScheduled=False`` condition (``corev1.PodReasonUnschedulable``; Volcano
``pkg/scheduler/api/unschedule_info.go`` ``PodReasonSchedulable``)."""

OVERCOMMIT_FACTOR = 1.2
"""Volcano's ``overcommit-factor`` default (``pkg/scheduler/plugins/overcommit/overcommit.go``)."""


def _add(total: Dict[str, int], more: Mapping[str, int], sign: int = 1) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + sign * value


def _best_node(cluster: SimulatedCluster, pod: Pod, free: Mapping[str, Dict[str, int]]) -> Optional[Node]:
    """The least allocated node that passes the filters and has room for ``pod`` in ``free``."""
    best: Optional[Tuple[float, str, Node]] = None
    requests = pod.requests
    for node in cluster.nodes:
        if selection_problems(pod.spec, node.facts()):
            continue
        if not fits(requests, free[node.name]):
            continue
        allocatable = node.allocatable
        score = sum(
            (allocatable.get(r, 0) - free[node.name].get(r, 0) + requests.get(r, 0)) / max(1, allocatable.get(r, 0))
            for r in ("cpu", "memory")
        )
        if best is None or (score, node.name) < best[:2]:
            best = (score, node.name, node)
    return best[2] if best else None


def _bind(cluster: SimulatedCluster, pod: Pod, node: Node) -> None:
    pod.node = node.name
    pod.phase = "Running"
    pod.scheduled_reason = ""
    cluster.say(f"pod {pod.name} bound to {node.name} by {pod.scheduler}")


def default_scheduler(cluster: SimulatedCluster) -> None:
    """Bind every pending pod of the default scheduler that fits, in priority then age order."""
    free = {node.name: cluster.free(node) for node in cluster.nodes}
    pending = [p for p in cluster.pods if p.phase == "Pending" and p.scheduler == "default-scheduler"]
    for pod in sorted(pending, key=lambda p: (-p.priority, p.created, p.name)):
        node = _best_node(cluster, pod, free)
        if node is not None:
            _bind(cluster, pod, node)
            _add(free[node.name], pod.requests, -1)
        else:
            pod.scheduled_reason = UNSCHEDULABLE


def _totals(cluster: SimulatedCluster) -> Tuple[Dict[str, int], Dict[str, int]]:
    """The cluster's allocatable and what its pods use."""
    total: Dict[str, int] = {}
    used: Dict[str, int] = {}
    for node in cluster.nodes:
        _add(total, node.allocatable)
        _add(used, cluster.used(node))
    return total, used


def _members(cluster: SimulatedCluster, group: PodGroup) -> List[Pod]:
    return [p for p in cluster.pods if p.group == group.name and p.owner == group.owner and not p.finished]


def volcano_scheduler(cluster: SimulatedCluster) -> None:
    """One Volcano session: enqueue (when configured), then allocate, then the pending pods' reasons."""
    groups = sorted(cluster.pod_groups.values(), key=lambda g: (-g.priority, g.created, g.name))
    if "enqueue" in cluster.volcano_actions:
        _enqueue(cluster, groups)
    if "allocate" not in cluster.volcano_actions:
        return
    for group in groups:
        if group.phase == "Pending" and "enqueue" not in cluster.volcano_actions and group.queue in cluster.queues:
            group.phase = "Inqueue"
            cluster.say(f"PodGroup {group.name} in queue (allocate, no enqueue action)")
    discarded = _allocate(cluster, groups)
    for group in groups:
        if group.queue not in cluster.queues:
            continue
        for pod in _members(cluster, group):
            if pod.node is None and pod.scheduler == "volcano":
                pod.scheduled_reason = SCHEDULABLE if pod.name in discarded else UNSCHEDULABLE


def _enqueue(cluster: SimulatedCluster, groups: List[PodGroup]) -> None:
    """The enqueue action: overcommit and proportion vote on every Pending PodGroup."""
    total, used = _totals(cluster)
    inqueue: Dict[str, int] = {}
    queue_load: Dict[str, Dict[str, int]] = {}
    for group in groups:
        if group.phase in ("Inqueue", "Running"):
            bound = {}
            for pod in _members(cluster, group):
                if pod.node is not None:
                    _add(bound, pod.requests)
            remaining = {k: max(0, v - bound.get(k, 0)) for k, v in group.min_resources.items()}
            _add(inqueue, remaining)
            _add(queue_load.setdefault(group.queue, {}), group.min_resources)
    for group in groups:
        if group.phase != "Pending":
            continue
        asked = {k: v for k, v in group.min_resources.items() if v > 0}
        idle = {k: total.get(k, 0) * OVERCOMMIT_FACTOR - used.get(k, 0) for k in asked}
        overcommit = all(inqueue.get(k, 0) + v <= idle[k] for k, v in asked.items())
        load = queue_load.setdefault(group.queue, {})
        proportion = group.queue in cluster.queues and all(
            load.get(k, 0) + v <= total.get(k, 0) for k, v in asked.items()
        )
        if overcommit and proportion:
            group.phase = "Inqueue"
            _add(inqueue, asked)
            _add(load, asked)
            cluster.say(f"PodGroup {group.name} enqueued")


def _allocate(cluster: SimulatedCluster, groups: List[PodGroup]) -> Set[str]:
    """The allocate action (gang: all or nothing); the names of the pods it placed in gangs it then discarded."""
    total, _ = _totals(cluster)
    discarded: Set[str] = set()
    deserved = _deserved(cluster, total)
    free = {node.name: cluster.free(node) for node in cluster.nodes}
    allocated: Dict[str, Dict[str, int]] = {}
    for pod in cluster.pods:
        if pod.node is not None and not pod.finished and pod.scheduler == "volcano" and pod.group:
            group = cluster.pod_groups.get(pod.group)
            if group is not None:
                _add(allocated.setdefault(group.queue, {}), pod.requests)
    for group in groups:
        if group.phase not in ("Inqueue", "Running"):
            continue
        members = _members(cluster, group)
        pending = [p for p in members if p.node is None and p.scheduler == "volcano"]
        if len(members) < group.min_member or not pending:
            _update_phase(cluster, group)
            continue
        tentative: List[Tuple[Pod, Node]] = []
        share = dict(allocated.get(group.queue, {}))
        trial = {name: dict(values) for name, values in free.items()}
        for pod in sorted(pending, key=lambda p: (-p.priority, p.name)):
            limit = deserved.get(group.queue)
            if limit is not None and not all(share.get(k, 0) + v <= limit.get(k, 0) for k, v in pod.requests.items()):
                break
            node = _best_node(cluster, pod, trial)
            if node is None:
                break
            tentative.append((pod, node))
            _add(trial[node.name], pod.requests, -1)
            _add(share, pod.requests)
        bound = len(members) - len(pending)
        if bound + len(tentative) >= group.min_member:
            for pod, node in tentative:
                _bind(cluster, pod, node)
            free = trial
            allocated[group.queue] = share
        else:
            discarded.update(pod.name for pod, _ in tentative)
        _update_phase(cluster, group)
    return discarded


def _update_phase(cluster: SimulatedCluster, group: PodGroup) -> None:
    bound = sum(1 for p in _members(cluster, group) if p.node is not None)
    if group.phase == "Inqueue" and bound >= group.min_member:
        group.phase = "Running"


def _deserved(cluster: SimulatedCluster, total: Mapping[str, int]) -> Dict[str, Optional[Dict[str, int]]]:
    """Each queue's share of the cluster when several queues hold PodGroups (weighted, capped by what a queue asks
    for); with one queue, no limit."""
    asking: Dict[str, Dict[str, int]] = {}
    for group in cluster.pod_groups.values():
        for pod in _members(cluster, group):
            _add(asking.setdefault(group.queue, {}), pod.requests)
    if len(asking) <= 1:
        return {queue: None for queue in asking}
    weights = {queue: int(cluster.queues.get(queue, {}).get("weight", 1)) for queue in asking}
    shares: Dict[str, Optional[Dict[str, int]]] = {}
    for queue, request in asking.items():
        portion = weights[queue] / sum(weights.values())
        shares[queue] = {k: min(v, int(total.get(k, 0) * portion)) for k, v in request.items()}
    return shares
