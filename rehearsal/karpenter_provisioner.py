"""Karpenter in the scheduling rehearsal: nodes launched for the pods no node can take, and removed once empty.

Modelled on Karpenter v1.14.1: kubernetes-sigs/karpenter at ``v1.14.1`` (core) with aws/karpenter-provider-aws at
``v1.14.1`` (provider), read from their source. :func:`provision_and_consolidate` runs once a tick, after the
schedulers (:mod:`.pod_schedulers`) have marked the pods they could not bind.

**Which pods.** A pod is provisioned for only if it is unbound, not owned by a DaemonSet, and its ``PodScheduled``
condition has reason exactly ``Unschedulable`` (core ``pkg/utils/pod/scheduling.go`` ``IsProvisionable``,
``FailedToSchedule``); its ``schedulerName`` does not matter. A pod Volcano marks ``Schedulable`` (placed in a gang
it then discarded) is therefore ignored (volcano-sh/volcano#3976). Karpenter's pod controller requeues such a pod
every 10 s while it stays provisionable (core ``pkg/controllers/provisioning/controller.go``): here, every tick.

**Simulation.** The pods, most CPU then most memory first (core ``pkg/controllers/provisioning/scheduling/queue.go``
``byCPUAndMemoryDescending``), each go to the first place with room whose labels and taints they accept: a node of
the cluster (its room now; a node Karpenter launched counts what its instance type will offer, devices included,
before its device plugins have registered them, less the DaemonSet pods still to come), a NodeClaim still launching,
a NodeClaim made earlier in this pass, else a new NodeClaim. A node a pending pod was simulated onto is *nominated*:
it is not disrupted while pods count on it (core ``scheduling/scheduler.go`` ``Results.Record``;
``pkg/controllers/state/statenode.go`` ``ValidateNodeDisruptable``; the window is max(2 x batchMaxDuration, 10 s)
and renewed by every requeue: here, that tick).

**New NodeClaims.** From a NodePool, highest ``weight`` first, whose node the pod's node selector and required node
affinity accept and whose taints it tolerates. The node of a pool has the template's labels, the single value of each
``In`` requirement as a label (instance type, ``topology.k8s.aws/zone-id``, ``karpenter.sh/capacity-type``),
``karpenter.sh/nodepool``, ``kubernetes.io/os``, its ``kubernetes.io/hostname``, and the template's taints. Its room
is :mod:`.node_capacity`'s allocatable for the instance type less the EKS add-ons' pods and the cluster's DaemonSets
that would run there, plus the devices of the type: Neuron devices and cores and GPUs from
:mod:`trainium_eks.facts.catalog`, and one ``vpc.amazonaws.com/efa`` per ``efa-only`` entry of its EC2NodeClass's
``networkInterfaces``, else the type's EFA maximum when the field is absent (provider
``pkg/providers/instancetype/types.go`` ``efas``). A claim is never made beyond the pool's ``limits`` (``nodes``,
and ``cpu``, ``memory`` or a device as the capacity of its launching and joined nodes): the real check is eventually
consistent and may overrun when claims are made at once (Karpenter docs, NodePools ``limits``); here it is exact. A
pool whose EC2NodeClass does not exist launches nothing.

**Launch.** Each NodeClaim is one EC2 launch; its node joins :data:`NODE_LAUNCH_TICKS` later (an assumption). A
launch EC2 has no capacity for (the run's :class:`CapacityShortfall`) fails at once: the claim is deleted (core
``pkg/controllers/nodeclaim/lifecycle/launch.go``) and the offering (instance type, zone, capacity type: a pool of
the library has one) is unavailable for :data:`UNAVAILABLE_OFFERING_TICKS` (provider ``pkg/cache/cache.go``
``UnavailableOfferingsTTL``); pods still ``Unschedulable`` then get a new claim. The node that joins runs the
DaemonSets that select it, whose device plugins then advertise its devices (:mod:`.workload_controllers`).

**Initialization.** A joined node is initialized once every extended resource its claim's pods request is
registered (core ``pkg/controllers/nodeclaim/lifecycle/initialization.go`` ``RequestedResourcesRegistered``); only
an initialized node is disrupted.

**Consolidation** (``WhenEmpty``; the emptiness check runs for every policy: core
``pkg/controllers/disruption/emptiness.go``, ``pkg/controllers/nodeclaim/disruption/consolidation.go``,
``pkg/controllers/nodeclaim/podevents``). A node is empty when it runs no pod but DaemonSet pods and pods that have
ended. An initialized, empty, not nominated node whose last pod event (a pod bound to it, or leaving it by ending or
being deleted) or, without one, its initialization is ``consolidateAfter`` (1 tick = 1 minute, rounded up) ago is
removed within the tick (tainted, drained, terminated). ``consolidateAfter: Never`` keeps it. A node that runs a
job's pod is never empty, so never removed.

Not modelled: several instance types or zones per pool (a pool must pin one instance type), prices, spot,
consolidation that replaces or moves pods (``WhenEmptyOrUnderutilized``), disruption budgets (the library's pools
allow every empty node at once), drift, expiry, interruption, ``karpenter.sh/do-not-disrupt``, startup taints, the
registration timeout, kubelet ``maxPods`` and the ENIs taken by ``efa-only`` interfaces (the pods a node takes are
:mod:`.node_capacity`'s), well-known labels a pool leaves open (a pod selecting a zone label the pool does not set
is taken as not accepted), pod affinity and topology spread.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from rehearsal.node_capacity import allocatable
from rehearsal.pod_placement import NodeFacts, fits, pod_requests, quantity, selection_problems
from rehearsal.simulated_cluster import (
    DEVICE_PLUGINS,
    TAINT_EFFECTS,
    Node,
    NodeClaim,
    Pod,
    SimulatedCluster,
    addon_overhead,
)
from trainium_eks.facts.catalog import instance_facts

NODE_LAUNCH_TICKS = 4
"""Ticks (minutes) from a NodeClaim's creation to its node joining the cluster: EC2 launch, boot, kubelet
registration. An assumption of the model, not a measurement; a joined node's device plugins take another tick or
two."""

UNAVAILABLE_OFFERING_TICKS = 3
"""How long an offering that failed a launch for want of capacity is not tried again: the provider's
``UnavailableOfferingsTTL`` of 3 minutes (aws/karpenter-provider-aws v1.14.1 ``pkg/cache/cache.go``)."""

POOL_LABEL = "karpenter.sh/nodepool"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
DEVICE_RESOURCES: Tuple[str, ...] = tuple(sorted({r for resources in DEVICE_PLUGINS.values() for r in resources}))
_DURATION = re.compile(r"([0-9]+)(h|m|s)")


@dataclass(frozen=True)
class CapacityShortfall:
    """What EC2 can launch for one NodePool: room for ``instances`` of its instances at once; a launch beyond them
    fails for want of capacity (``InsufficientInstanceCapacity``), ``failures`` times before the capacity comes back
    (None: it never does).

    ``CapacityShortfall(1, failures=1)``: of two claims made together, one fails once and its retry succeeds.
    ``CapacityShortfall(1)``: never more than one node."""

    instances: int
    failures: Optional[int] = None


@dataclass(frozen=True)
class PoolShape:
    """What the model reads of a NodePool and its EC2NodeClass."""

    name: str
    instance_type: str
    labels: Mapping[str, str]
    taints: Tuple[Mapping[str, str], ...]
    efa_interfaces: int
    consolidate_after: Optional[int]
    """Ticks a node stays empty before it is removed (None: ``Never``)."""
    limits: Mapping[str, int]
    weight: int
    ready: bool
    """Whether its EC2NodeClass exists."""


def duration_ticks(text: str) -> Optional[int]:
    """A Karpenter duration (``10m``, ``90s``, ``1h30m``) in ticks of a minute, rounded up; None for ``Never``."""
    if text == "Never":
        return None
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{text!r} is not a Karpenter duration")
    seconds = sum(int(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    return math.ceil(seconds / 60)


def pool_shape(cluster: SimulatedCluster, name: str) -> PoolShape:
    """The NodePool ``name`` of the cluster as the model reads it."""
    pool = cluster.node_pools[name]
    spec = pool.get("spec") or {}
    template = spec.get("template") or {}
    template_spec = template.get("spec") or {}
    labels = {str(k): str(v) for k, v in ((template.get("metadata") or {}).get("labels") or {}).items()}
    instance_types: List[str] = []
    for requirement in template_spec.get("requirements") or ():
        values = [str(v) for v in requirement.get("values") or ()]
        if requirement.get("operator") == "In" and len(values) == 1:
            labels[requirement["key"]] = values[0]
        if requirement.get("key") == INSTANCE_TYPE_LABEL and requirement.get("operator") == "In":
            instance_types = values
    if len(instance_types) != 1:
        raise ValueError(f"NodePool {name}: the model needs exactly one instance type (an In requirement on it)")
    taints = tuple(
        {"key": t["key"], "value": str(t.get("value", "")), "effect": TAINT_EFFECTS.get(t["effect"], t["effect"])}
        for t in template_spec.get("taints") or ()
    )
    node_class = cluster.node_classes.get(str((template_spec.get("nodeClassRef") or {}).get("name")))
    facts = instance_facts(instance_types[0])
    interfaces = ((node_class or {}).get("spec") or {}).get("networkInterfaces")
    efa = (
        sum(1 for i in interfaces if i.get("interfaceType") == "efa-only")
        if interfaces is not None
        else facts.efa_interfaces
    )
    limits: Dict[str, int] = {}
    for key, value in (spec.get("limits") or {}).items():
        limits[key] = int(value) if key == "nodes" else quantity(key, value)
    disruption = spec.get("disruption") or {}
    return PoolShape(
        name=name,
        instance_type=instance_types[0],
        labels=labels,
        taints=taints,
        efa_interfaces=efa,
        consolidate_after=duration_ticks(str(disruption.get("consolidateAfter", "0s"))),
        limits=limits,
        weight=int(spec.get("weight") or 0),
        ready=node_class is not None,
    )


def pool_node(cluster: SimulatedCluster, shape: PoolShape, name: str) -> Node:
    """A node of the pool ``shape`` called ``name``, as it joins (no device advertised yet)."""
    labels = {
        **shape.labels,
        INSTANCE_TYPE_LABEL: shape.instance_type,
        POOL_LABEL: shape.name,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
    }
    return Node(
        name,
        shape.name,
        shape.instance_type,
        labels,
        [dict(t) for t in shape.taints],
        shape.efa_interfaces,
        allocatable(shape.instance_type),
        addon_overhead(cluster.addons, shape.instance_type),
        pool=shape.name,
        joined=cluster.tick,
    )


def expected_allocatable(node: Node) -> Dict[str, int]:
    """What ``node`` offers pods once its device plugins have registered its devices (Karpenter's view of a node it
    launched: the capacity of the instance type)."""
    found = {name: value - node.overhead.get(name, 0) for name, value in node.base.items()}
    for resource in DEVICE_RESOURCES:
        count = node.devices(resource)
        if count:
            found[resource] = count
    return found


def prospective_nodes(cluster: SimulatedCluster) -> List[Node]:
    """A node of every pool that can launch one (its EC2NodeClass exists, ``limits.nodes`` is not 0), as it joins:
    what the pools can ever add."""
    found = []
    for name in sorted(cluster.node_pools):
        shape = pool_shape(cluster, name)
        if shape.ready and shape.limits.get("nodes", 1) > 0:
            found.append(pool_node(cluster, shape, f"{name}-(new)"))
    return found


def karpenter_nodes(cluster: SimulatedCluster) -> List[Node]:
    """The nodes Karpenter launched."""
    return [node for node in cluster.nodes if node.pool is not None]


def _daemon_set_pods(cluster: SimulatedCluster, facts: NodeFacts, node: Optional[str] = None) -> Dict[str, int]:
    """What the DaemonSets that would run on a node of ``facts`` request, less those already bound to ``node``."""
    total: Dict[str, int] = {}
    bound = {p.owner for p in cluster.pods if node is not None and p.node == node and not p.finished}
    for workload in cluster.workloads.values():
        if workload.kind != "daemonset" or workload.ref in bound:
            continue
        template = workload.manifest["spec"]["template"]["spec"]
        if not selection_problems(template, facts):
            for key, value in pod_requests(template).items():
                total[key] = total.get(key, 0) + value
    return total


def _less(room: Mapping[str, int], taken: Mapping[str, int]) -> Dict[str, int]:
    found = dict(room)
    for key, value in taken.items():
        found[key] = found.get(key, 0) - value
    return found


def _is_provisionable(pod: Pod) -> bool:
    return (
        pod.node is None
        and not pod.finished
        and pod.scheduled_reason == "Unschedulable"
        and not pod.owner.startswith("daemonset/")
    )


def _workload_pods(cluster: SimulatedCluster, node: Node) -> frozenset:
    return frozenset(
        p.name for p in cluster.pods if p.node == node.name and not p.finished and not p.owner.startswith("daemonset/")
    )


@dataclass(eq=False)
class _Place:
    """Somewhere the simulation may put a pod: a node, a launching claim, or a claim of this pass."""

    facts: NodeFacts
    room: Dict[str, int]
    node: Optional[Node] = None
    claim: Optional[NodeClaim] = None
    shape: Optional[PoolShape] = None


def provision_and_consolidate(cluster: SimulatedCluster) -> None:
    """One pass of Karpenter: claims whose node joins, initialization and pod events of its nodes, NodeClaims for the
    provisionable pods, then the removal of empty nodes."""
    if not cluster.node_pools and not cluster.node_claims and not karpenter_nodes(cluster):
        return
    shapes = {name: pool_shape(cluster, name) for name in cluster.node_pools}
    _join(cluster, shapes)
    for node in karpenter_nodes(cluster):
        extended = [r for r, v in node.requested.items() if v and r not in ("cpu", "memory", "pods")]
        if node.initialized is None and all(node.allocatable.get(r, 0) > 0 for r in extended):
            node.initialized = cluster.tick
        current = _workload_pods(cluster, node)
        if current != node.workload_pods:
            node.workload_pods, node.last_pod_event = current, cluster.tick
    _provision(cluster, shapes)
    for name in shapes:
        count = sum(1 for n in karpenter_nodes(cluster) if n.pool == name)
        count += sum(1 for c in cluster.node_claims if c.pool == name)
        cluster.peak_nodes[name] = max(cluster.peak_nodes.get(name, 0), count)
    _consolidate(cluster, shapes)


def _join(cluster: SimulatedCluster, shapes: Mapping[str, PoolShape]) -> None:
    for claim in [c for c in cluster.node_claims if c.joins <= cluster.tick]:
        cluster.node_claims.remove(claim)
        shape = shapes.get(claim.pool)
        if shape is None:
            cluster.say(f"NodeClaim {claim.name} dropped: its NodePool {claim.pool} is gone")
            continue
        node = pool_node(cluster, shape, claim.name)
        node.requested = dict(claim.requests)
        cluster.nodes.append(node)
        cluster.say(f"node {node.name} ({shape.instance_type}) of NodePool {shape.name} joined")


def _places(cluster: SimulatedCluster, shapes: Mapping[str, PoolShape]) -> List[_Place]:
    """The nodes and launching claims, with what Karpenter thinks they have left."""
    places: List[_Place] = []
    for node in sorted(cluster.nodes, key=lambda n: (n.pool is not None and n.initialized is None, n.name)):
        if node.pool is None:
            places.append(_Place(node.facts(), cluster.free(node), node=node))
            continue
        room = _less(expected_allocatable(node), cluster.used(node))
        facts = NodeFacts(node.name, node.labels, node.taints, expected_allocatable(node))
        places.append(_Place(facts, _less(room, _daemon_set_pods(cluster, facts, node.name)), node=node))
    for claim in cluster.node_claims:
        shape = shapes.get(claim.pool)
        if shape is not None:
            facts, room = _new_room(cluster, shape, claim.name)
            places.append(_Place(facts, room, claim=claim, shape=shape))
    return places


def _new_room(cluster: SimulatedCluster, shape: PoolShape, name: str) -> Tuple[NodeFacts, Dict[str, int]]:
    node = pool_node(cluster, shape, name)
    full = expected_allocatable(node)
    facts = NodeFacts(node.name, node.labels, node.taints, full)
    return facts, _less(full, _daemon_set_pods(cluster, facts))


def _provision(cluster: SimulatedCluster, shapes: Mapping[str, PoolShape]) -> None:
    pending = sorted(
        (p for p in cluster.pods if _is_provisionable(p)),
        key=lambda p: (-p.requests.get("cpu", 0), -p.requests.get("memory", 0), p.created, p.name),
    )
    if not pending:
        return
    places = _places(cluster, shapes)
    made: List[_Place] = []
    for pod in pending:
        requests = pod.requests
        place = next(
            (p for p in places + made if not selection_problems(pod.spec, p.facts) and fits(requests, p.room)),
            None,
        )
        if place is None:
            place = _new_claim(cluster, shapes, pod)
            if place is None:
                continue
            made.append(place)
        place.room = _less(place.room, requests)
        if place.node is not None:
            place.node.nominated = cluster.tick
        elif any(place is new for new in made) and place.claim is not None:
            for key, value in requests.items():
                place.claim.requests[key] = place.claim.requests.get(key, 0) + value


def _in_use(cluster: SimulatedCluster, shape: PoolShape) -> Iterable[str]:
    """The names of the pool's nodes and launching claims."""
    yield from (n.name for n in cluster.nodes if n.pool == shape.name)
    yield from (c.name for c in cluster.node_claims if c.pool == shape.name)


def _within_limits(cluster: SimulatedCluster, shape: PoolShape) -> bool:
    """Whether one more node keeps the pool within its limits."""
    count = len(list(_in_use(cluster, shape))) + 1
    facts = instance_facts(shape.instance_type)
    capacity = {"cpu": facts.vcpus * 1000, "memory": facts.memory_gib * 1024}
    probe = pool_node(cluster, shape, "limit-probe")
    for resource in DEVICE_RESOURCES:
        capacity[resource] = probe.devices(resource)
    for key, limit in shape.limits.items():
        used = count if key == "nodes" else count * capacity.get(key, 0)
        if used > limit:
            return False
    return True


def _new_claim(cluster: SimulatedCluster, shapes: Mapping[str, PoolShape], pod: Pod) -> Optional[_Place]:
    """A new NodeClaim for ``pod`` from the first pool that accepts it, has room, is within its limits and has an
    available offering; None when there is none (or its launch failed)."""
    for shape in sorted(shapes.values(), key=lambda s: (-s.weight, s.name)):
        if not shape.ready or cluster.unavailable_until.get(shape.name, -1) > cluster.tick:
            continue
        facts, room = _new_room(cluster, shape, f"{shape.name}-{cluster.claims_made}")
        if selection_problems(pod.spec, facts) or not fits(pod.requests, room):
            continue
        if not _within_limits(cluster, shape):
            continue
        claim = NodeClaim(facts.name, shape.name, cluster.tick, cluster.tick + NODE_LAUNCH_TICKS, {})
        cluster.claims_made += 1
        if _launch_fails(cluster, shape):
            cluster.launch_failures[shape.name] = cluster.launch_failures.get(shape.name, 0) + 1
            cluster.unavailable_until[shape.name] = cluster.tick + UNAVAILABLE_OFFERING_TICKS
            cluster.say(
                f"NodeClaim {claim.name} of NodePool {shape.name} for pod {pod.name}: launch failed "
                f"(InsufficientInstanceCapacity), claim deleted; offering unavailable for "
                f"{UNAVAILABLE_OFFERING_TICKS} minutes"
            )
            continue
        cluster.node_claims.append(claim)
        cluster.say(f"NodeClaim {claim.name} of NodePool {shape.name} launched for pod {pod.name}")
        return _Place(facts, room, claim=claim, shape=shape)
    return None


def _launch_fails(cluster: SimulatedCluster, shape: PoolShape) -> bool:
    shortfall = cluster.shortfalls.get(shape.name)
    if shortfall is None:
        return False
    if len(list(_in_use(cluster, shape))) < shortfall.instances:
        return False
    return shortfall.failures is None or cluster.launch_failures.get(shape.name, 0) < shortfall.failures


def empty_since(node: Node) -> Optional[int]:
    """The tick from which a Karpenter node's emptiness counts (its last pod event, else its initialization)."""
    return node.last_pod_event if node.last_pod_event is not None else node.initialized


def _consolidate(cluster: SimulatedCluster, shapes: Mapping[str, PoolShape]) -> None:
    for node in karpenter_nodes(cluster):
        shape = shapes.get(node.pool or "")
        since = empty_since(node)
        if shape is None or shape.consolidate_after is None or node.initialized is None or since is None:
            continue
        if node.workload_pods or node.nominated == cluster.tick:
            continue
        if cluster.tick - since >= shape.consolidate_after:
            cluster.remove_node(
                node.name, f"Karpenter: empty for {cluster.tick - since} minutes, NodePool {shape.name} WhenEmpty"
            )


def next_event(cluster: SimulatedCluster) -> Optional[int]:
    """The next tick at which Karpenter acts without anything else changing: a node joins, an offering is available
    again, an empty node's ``consolidateAfter`` ends. None when nothing is due."""
    due: List[int] = [claim.joins for claim in cluster.node_claims]
    due.extend(until for until in cluster.unavailable_until.values() if until > cluster.tick)
    for node in karpenter_nodes(cluster):
        shape = pool_shape(cluster, node.pool) if node.pool in cluster.node_pools else None
        since = empty_since(node)
        if shape is None or shape.consolidate_after is None or since is None or node.workload_pods:
            continue
        due.append(max(cluster.tick + 1, since + shape.consolidate_after))
    later = [t for t in due if t > cluster.tick]
    return min(later) if later else None


def settle_ticks(cluster: SimulatedCluster) -> int:
    """How long after the last job's end Karpenter's nodes may take to go: a launching node joins, is initialized,
    and stays empty for the longest ``consolidateAfter`` of the pools (``Never`` counts as none)."""
    longest = 0
    for name in cluster.node_pools:
        ticks = pool_shape(cluster, name).consolidate_after
        longest = max(longest, ticks or 0)
    return NODE_LAUNCH_TICKS + 3 + longest
