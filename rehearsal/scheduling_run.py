"""The scheduling rehearsal: the jobs a stack applies, run on its nodes in every order of arrival, with failures.

A run creates the stack's standing objects (device plugins, services, priority classes, queues, runtimes, Karpenter
NodePools and EC2NodeClasses) at tick 0, then the jobs (and release Jobs) one per tick in the order given, and lets
the controllers (:mod:`.workload_controllers`), the schedulers (:mod:`.pod_schedulers`, Volcano with the stack's
actions), Karpenter (:mod:`.karpenter_provisioner`) and the containers (:mod:`.container_programs`) act once per tick
until every job has ended, nothing has moved for :data:`STALL_TICKS`, or :data:`MAX_TICKS` have passed. Once every
job has ended, a cluster with Karpenter nodes runs on until they are gone or their pools' ``consolidateAfter`` has
passed (:func:`~.karpenter_provisioner.settle_ticks`; idle minutes are skipped). What it promises (:func:`violations`
of a run):

- every job ends ``Complete`` (a Volcano Job ``Completed``): none fails, none is left waiting;
- no pod waits for something no node will ever have: a label, a toleration, or a resource that no node offers even
  empty (with every device plugin that can run there running), nor a node of a NodePool;
- no node Karpenter launched is left running once the jobs have ended and ``consolidateAfter`` has passed.

:func:`rehearse_jobs` runs every order of the arrivals (:func:`arrival_orders`), each with no failure and with the
first attempt of every job failing.

**Orders.** Every permutation of the arrivals, except that a fabric check (its release Job, or the check itself when
it waits for nothing) and the release Job of the job it guards arrive together, as one unit, in both inner orders:
``k! x 2`` orders of ``k`` units instead of ``(k + p)!`` for ``p`` checks (TrainiumEks: 3! x 2 = 12 instead of 5! =
120). Sound because the guarded job's release is inert until the check has completed: it waits for the check
(``decide`` says ``wait`` while the check is missing or running; a missing check whose release has not failed is no
failure: ``wait_states``) and the check waits for everything else the guarded job waits for, so before the check has
run that release can neither create its job nor act on anything the check's own release would not act on first. Until
then it only polls, in a 10m CPU / 32 MiB pod on the system nodes. Where it arrives among the others thus changes
nothing but that pod's room, which both inner orders exercise, provided the check completes after the last arrival;
``tests/rehearsal/test_scheduling_run.py`` checks that premise in every run. Every permutation of the other arrivals,
the jobs the app declares, is kept.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple

from rehearsal.container_programs import Classifier, Programs
from rehearsal.karpenter_provisioner import (
    CapacityShortfall,
    empty_since,
    karpenter_nodes,
    next_event,
    prospective_nodes,
    provision_and_consolidate,
    settle_ticks,
)
from rehearsal.kubelet_expansion import expand
from rehearsal.pod_placement import NodeFacts, first_problem, invalid_requests, selection_problems
from rehearsal.pod_schedulers import default_scheduler, volcano_scheduler
from rehearsal.simulated_cluster import (
    DEFAULT_VOLCANO_ACTIONS,
    DEVICE_PLUGINS,
    Node,
    SimulatedCluster,
    addons_of,
    node_pool_objects_of,
    volcano_actions_of,
    workload_kind,
)
from rehearsal.workload_controllers import merged_pod_spec, reconcile
from trainium_eks.core.conventions import FABRIC_CHECK_LABEL
from trainium_eks.manifests.jobs.job_release import HELD_JOB_LABEL

MAX_TICKS = 1000
STALL_TICKS = 60
"""Ticks without any change after which a run is stuck: longer than any wait of the model (a rendezvous times out in
10)."""

JOB_KINDS = ("job", "vcjob", "trainjob", "pytorchjob")


@dataclass(frozen=True)
class RunReport:
    """What one run did: the arrival order, the jobs that failed their first attempt, the jobs' final states, the
    promises it broke and the log."""

    arrival: Tuple[str, ...]
    failing: FrozenSet[str]
    ticks: int
    jobs: Mapping[str, str]
    violations: Tuple[str, ...]
    log: Tuple[str, ...]
    peak_nodes: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """NodePool -> the most NodeClaims (launching or joined) it had at once."""
    nodes_left: Tuple[str, ...] = ()
    """The nodes Karpenter launched that were still there (or launching) when the run ended."""


@dataclass(frozen=True)
class StackScheduling:
    """What a stack's template tells the scheduling model besides its objects: its Volcano scheduler's actions, its
    Karpenter objects (NodePools, EC2NodeClasses) and its EKS add-ons (whose pods run on every node)."""

    volcano_actions: Tuple[str, ...] = DEFAULT_VOLCANO_ACTIONS
    node_pools: Tuple[Mapping[str, Any], ...] = ()
    addons: Tuple[str, ...] = ()


def stack_scheduling(template: Mapping[str, Any]) -> StackScheduling:
    """The :class:`StackScheduling` of a synthesized template (a dict): the Volcano release's actions
    (:func:`~.simulated_cluster.volcano_actions_of`), the NodePool and EC2NodeClass objects its manifests apply
    (:func:`~.simulated_cluster.node_pool_objects_of`), its EKS add-ons."""
    return StackScheduling(
        volcano_actions=volcano_actions_of(template),
        node_pools=tuple(node_pool_objects_of(template)),
        addons=addons_of(template),
    )


def is_job(manifest: Mapping[str, Any]) -> bool:
    """Whether ``manifest`` is a job (it arrives, runs and must end)."""
    return workload_kind(manifest) in JOB_KINDS


def run_jobs(
    nodes: Sequence[Node],
    standing: Iterable[Mapping[str, Any]],
    arrivals: Sequence[Mapping[str, Any]],
    *,
    failing: FrozenSet[str] = frozenset(),
    classifier: Optional[Classifier] = None,
    volcano_actions: Sequence[str] = DEFAULT_VOLCANO_ACTIONS,
    node_pools: Sequence[Mapping[str, Any]] = (),
    addons: Sequence[str] = (),
    shortfalls: Optional[Mapping[str, CapacityShortfall]] = None,
    below_floor: FrozenSet[str] = frozenset(),
) -> RunReport:
    """Run ``arrivals`` (one per tick, in order) on ``nodes`` among the ``standing`` objects.

    :param volcano_actions: The actions of the Volcano scheduler. Default: the chart's, with ``enqueue``.
    :param node_pools: Karpenter ``NodePool`` and ``EC2NodeClass`` objects (more standing objects: those among
        ``standing`` count as well). Default: none.
    :param addons: The cluster's EKS add-ons, whose pods take room on every node Karpenter launches. Default: none.
    :param shortfalls: NodePool name -> what EC2 can launch for it. Default: all it asks for.
    :param below_floor: Fabric checks that measure a fabric below their floor (their names, or the names of the
        jobs they guard: :class:`~.container_programs.Programs`). Default: none.
    """
    cluster = SimulatedCluster(
        nodes=copy.deepcopy(list(nodes)),
        queues={"default": {"weight": 1}},
        volcano_actions=tuple(volcano_actions),
        addons=tuple(addons),
        shortfalls=dict(shortfalls or {}),
    )
    for manifest in list(standing) + list(node_pools):
        cluster.create(manifest)
    programs = Programs(failing=failing, classifier=classifier, below_floor=frozenset(below_floor))
    pending = list(arrivals)
    quiet, last = 0, None
    ended: Optional[int] = None
    while cluster.tick < MAX_TICKS or ended is not None:
        if pending:
            cluster.create(pending.pop(0))
        step(cluster, programs)
        jobs = [w for w in cluster.workloads.values() if w.is_job]
        signature = _signature(cluster)
        if not pending and all(w.finished for w in jobs):
            ended = cluster.tick if ended is None else ended
            if not karpenter_nodes(cluster) and not cluster.node_claims:
                break
            deadline = ended + settle_ticks(cluster)
            if cluster.tick >= deadline:
                break
            if signature == last:
                due = next_event(cluster)
                cluster.tick = min(due if due is not None else deadline, deadline) - 1
            last = signature
            cluster.tick += 1
            continue
        quiet = quiet + 1 if signature == last else 0
        last = signature
        if quiet >= STALL_TICKS:
            break
        cluster.tick += 1
    return RunReport(
        arrival=tuple(_name(m) for m in arrivals),
        failing=failing,
        ticks=cluster.tick,
        jobs={w.ref: w.state for w in cluster.workloads.values() if w.is_job},
        violations=tuple(violations(cluster, pending, quiet >= STALL_TICKS)),
        log=tuple(cluster.log),
        peak_nodes=dict(cluster.peak_nodes),
        nodes_left=tuple(n.name for n in karpenter_nodes(cluster)) + tuple(c.name for c in cluster.node_claims),
    )


def step(cluster: SimulatedCluster, programs: Programs) -> None:
    """One tick of the cluster: the controllers, Volcano's scheduler, the default scheduler, Karpenter, then the
    kubelets."""
    reconcile(cluster, programs)
    volcano_scheduler(cluster)
    default_scheduler(cluster)
    provision_and_consolidate(cluster)
    _kubelets(cluster, programs)


def _name(manifest: Mapping[str, Any]) -> str:
    return f"{workload_kind(manifest)}/{manifest['metadata']['name']}"


def _kubelets(cluster: SimulatedCluster, programs: Programs) -> None:
    """Every bound pod runs its current container one tick."""
    for pod in list(cluster.pods):
        if pod.phase != "Running" or pod.node is None or pod not in cluster.pods:
            continue
        code = programs.step(cluster, pod)
        if code is None:
            continue
        if code != 0:
            pod.phase, pod.exit_code = "Failed", code
            cluster.say(f"pod {pod.name} failed (exit {code})")
        elif pod.step + 1 >= len(pod.containers):
            pod.phase, pod.exit_code = "Succeeded", 0
        else:
            pod.step, pod.ticks, pod.waited = pod.step + 1, 0, 0


def _signature(cluster: SimulatedCluster) -> Tuple[Any, ...]:
    return (
        tuple(sorted((w.ref, w.state, w.attempt, w.failures) for w in cluster.workloads.values())),
        tuple(sorted((p.name, p.phase, p.node or "", p.step, p.ticks) for p in cluster.pods)),
        tuple(sorted((g.name, g.phase) for g in cluster.pod_groups.values())),
        tuple(sorted(n.name for n in cluster.nodes)),
        tuple(sorted(c.name for c in cluster.node_claims)),
        len(cluster.log),
    )


def potential_facts(cluster: SimulatedCluster, node: Node) -> NodeFacts:
    """The node with every device plugin of the cluster that may run on it advertising: the most it can offer."""
    full = dict(node.allocatable)
    for workload in cluster.workloads.values():
        resources = DEVICE_PLUGINS.get(workload.name) if workload.kind == "daemonset" else None
        template = workload.manifest["spec"]["template"]["spec"] if resources else None
        if resources and not selection_problems(template, node.facts()):
            for resource in resources:
                full[resource] = node.devices(resource)
    return NodeFacts(node.name, node.labels, node.taints, full)


def violations(cluster: SimulatedCluster, unarrived: Sequence[Mapping[str, Any]], stuck: bool) -> List[str]:
    """The promises a run broke (see the module's docstring)."""
    found: List[str] = []
    standing = [node for node in cluster.nodes if node.pool is None]
    nodes = [potential_facts(cluster, node) for node in standing + prospective_nodes(cluster)]
    for workload in cluster.workloads.values():
        for name, spec in _pod_templates(cluster, workload):
            why = first_problem(spec, nodes)
            if why is not None:
                found.append(f"pods {name} of {workload.ref} can never be placed ({why})")
    for pod in cluster.pods:
        owner = cluster.workloads.get(pod.owner)
        if owner is None or not owner.is_job:
            continue
        for problem in invalid_requests(pod.spec):
            found.append(f"pod {pod.name} of {owner.ref} is invalid: {problem}")
        why = first_problem(pod.spec, nodes)
        if why is not None:
            found.append(f"pod {pod.name} of {owner.ref} can never be placed ({why})")
    for workload in cluster.workloads.values():
        if not workload.is_job or workload.succeeded:
            continue
        if workload.finished:
            found.append(f"{workload.ref} ended {workload.state}: {workload.detail}")
        else:
            found.append(f"{workload.ref} never finished ({workload.state}): {_waiting_for(cluster, workload.ref)}")
    if unarrived:
        found.append(f"the run ended before {len(unarrived)} job(s) arrived")
    elif all(w.finished for w in cluster.workloads.values() if w.is_job):
        left = [_left(cluster, node) for node in karpenter_nodes(cluster)]
        left += [f"{claim.name} (NodePool {claim.pool}, still launching)" for claim in cluster.node_claims]
        if left:
            found.append(f"Karpenter nodes left running after the jobs: {', '.join(left)}")
    if stuck:
        found.append(f"nothing moved for {STALL_TICKS} minutes at t={cluster.tick}: a wait that never ends")
    return sorted(set(found))


def _left(cluster: SimulatedCluster, node: Node) -> str:
    """A Karpenter node still there after the jobs, and why."""
    if node.workload_pods:
        why = f"runs {', '.join(sorted(node.workload_pods))}"
    elif node.nominated >= cluster.tick - 1:
        why = "a pending pod counts on it"
    elif node.initialized is None:
        why = f"never initialized (waits for {', '.join(sorted(node.requested))} to be registered)"
    else:
        why = f"empty since t={empty_since(node)}"
    return f"{node.name} (NodePool {node.pool}, {why})"


def _pod_templates(cluster: SimulatedCluster, workload: Any) -> List[Tuple[str, Mapping[str, Any]]]:
    """The pod specs a job will create, whether or not it has created them yet: a Volcano Job's tasks, a TrainJob's
    merged ``node`` pods."""
    spec = workload.manifest.get("spec") or {}
    if workload.kind == "vcjob":
        return [
            (f"{workload.name}-{t.get('name')}-*", (t.get("template") or {}).get("spec") or {})
            for t in spec.get("tasks") or ()
        ]
    if workload.kind == "trainjob":
        runtime = cluster.runtime((spec.get("runtimeRef") or {}).get("name", ""))
        if runtime is not None:
            return [(f"{workload.name}-node-0-*", merged_pod_spec(runtime, workload.manifest)[0])]
    return []


def _waiting_for(cluster: SimulatedCluster, ref: str) -> str:
    reasons = []
    for group in cluster.pod_groups.values():
        if group.owner == ref and group.phase == "Pending":
            reasons.append(f"PodGroup {group.name} never enqueued (asks for {group.min_resources})")
    for pod in cluster.pods_of(ref):
        if pod.finished:
            continue
        if pod.node is None:
            reason = f", {pod.scheduled_reason}" if pod.scheduled_reason else ""
            reasons.append(f"pod {pod.name} unbound ({pod.scheduler}{reason})")
        else:
            reasons.append(f"pod {pod.name} running container {pod.step} on {pod.node}")
    waiting = [p for p in cluster.pods_of(ref) if p.node is None and p.scheduled_reason == "Unschedulable"]
    counted_on = [n.name for n in karpenter_nodes(cluster) if n.nominated >= cluster.tick - 1 and not n.workload_pods]
    if waiting and counted_on:
        reasons.append(f"Karpenter counts the Unschedulable pods on empty {', '.join(counted_on)} and launches nothing")
    return "; ".join(reasons) or "no pod"


PlanFactory = Callable[[Sequence[Mapping[str, Any]]], List[FrozenSet[str]]]


def failure_plans(arrivals: Sequence[Mapping[str, Any]]) -> List[FrozenSet[str]]:
    """No failure, and the first attempt of every job failing."""
    return [frozenset(), frozenset(m["metadata"]["name"] for m in arrivals if is_job(m))]


def created_name(manifest: Mapping[str, Any]) -> str:
    """The name of the job an arrival is, or, for a release Job, of the job it creates."""
    labels = (manifest.get("metadata") or {}).get("labels") or {}
    return str(labels.get(HELD_JOB_LABEL) or manifest["metadata"]["name"])


def guarded_name(manifest: Mapping[str, Any]) -> Optional[str]:
    """The job a fabric check guards (its ``FABRIC_CHECK_LABEL``), when the arrival is a fabric check or the release
    Job of one; else None."""
    job: Mapping[str, Any] = manifest
    labels = (manifest.get("metadata") or {}).get("labels") or {}
    if HELD_JOB_LABEL in labels:
        (container,) = manifest["spec"]["template"]["spec"]["containers"]
        held = [e["value"] for e in container.get("env") or () if e["name"] == "HELD_JOB"]
        job = json.loads(expand(held[0], {})) if held else {}
    value = ((job.get("metadata") or {}).get("labels") or {}).get(FABRIC_CHECK_LABEL)
    return str(value) if value else None


def arrival_units(arrivals: Sequence[Mapping[str, Any]]) -> List[Tuple[Mapping[str, Any], ...]]:
    """The arrivals in units: each fabric check (or its release) with the release of the job it guards, check
    first; every other arrival alone. In the order of ``arrivals`` (of each unit's first member)."""
    by_name = {created_name(m): index for index, m in enumerate(arrivals)}
    partner: Dict[int, int] = {}
    for index, manifest in enumerate(arrivals):
        guarded = guarded_name(manifest)
        if guarded is not None and guarded in by_name:
            partner[index] = by_name[guarded]
    taken = set(partner.values())
    units: List[Tuple[Mapping[str, Any], ...]] = []
    for index, manifest in enumerate(arrivals):
        if index in partner:
            units.append((manifest, arrivals[partner[index]]))
        elif index not in taken:
            units.append((manifest,))
    return units


def arrival_orders(arrivals: Sequence[Mapping[str, Any]]) -> List[Tuple[Mapping[str, Any], ...]]:
    """The orders a rehearsal runs (see the module docstring): every permutation of :func:`arrival_units`, each
    unit of a check and the job it guards in both inner orders (all checks first, then all guarded jobs first)."""
    units = arrival_units(arrivals)
    inner = (False, True) if any(len(unit) > 1 for unit in units) else (False,)
    return [
        tuple(item for unit in order for item in (reversed(unit) if flip else unit))
        for flip in inner
        for order in itertools.permutations(units)
    ]


OrderFactory = Callable[[Sequence[Mapping[str, Any]]], List[Tuple[Mapping[str, Any], ...]]]


def rehearse_jobs(
    nodes: Sequence[Node],
    standing: Sequence[Mapping[str, Any]],
    arrivals: Sequence[Mapping[str, Any]],
    *,
    orders: OrderFactory = arrival_orders,
    plans: PlanFactory = failure_plans,
    classifier: Optional[Classifier] = None,
    volcano_actions: Sequence[str] = DEFAULT_VOLCANO_ACTIONS,
    node_pools: Sequence[Mapping[str, Any]] = (),
    addons: Sequence[str] = (),
    shortfalls: Optional[Mapping[str, CapacityShortfall]] = None,
    below_floor: FrozenSet[str] = frozenset(),
) -> List[RunReport]:
    """Every order of ``arrivals`` (``orders``: :func:`arrival_orders`; ``itertools.permutations`` for all of them),
    with each failure plan (the other parameters: :func:`run_jobs`'s)."""
    reports = []
    for order in orders(arrivals):
        for failing in plans(arrivals):
            reports.append(
                run_jobs(
                    nodes,
                    standing,
                    order,
                    failing=failing,
                    classifier=classifier,
                    volcano_actions=volcano_actions,
                    node_pools=node_pools,
                    addons=addons,
                    shortfalls=shortfalls,
                    below_floor=below_floor,
                )
            )
    return reports


def broken(reports: Sequence[RunReport]) -> Dict[str, List[str]]:
    """Violation -> the runs (arrival order, failing jobs) that broke it."""
    found: Dict[str, List[str]] = {}
    for report in reports:
        for violation in report.violations:
            where = f"arrival {' -> '.join(report.arrival)}" + (
                f", first attempts failing: {', '.join(sorted(report.failing))}" if report.failing else ""
            )
            found.setdefault(violation, []).append(where)
    return found
