"""Deploy and destroy a stack's template on the test cluster as CloudFormation would: its steps in CloudFormation's
order (:func:`rehearsal.cfn_changes.plan`), every Kubernetes object and Helm release through aws-eks-v2's own
kubectl handler (:class:`rehearsal.handler.HandlerWorkspace`) with the real kubectl and helm of the kubectl layer
against the real API server (:mod:`e2e.commands`), the managed node groups' nodes as kwok nodes, and the Karpenter
NodePools for Karpenter's kwok provider (:mod:`e2e.karpenter_kwok`).

What has no offline stand-in is not done: the cluster itself exists before the first step (an
``AWS::EKS::Cluster`` step only records its id), and the other AWS resources (VPC, IAM, Lambda, ...) are planned but
not created.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from e2e import commands
from e2e.cluster import TestCluster
from e2e.karpenter_kwok import for_kwok, install_node_class_crd, uses_node_pools
from rehearsal.cfn_changes import Deployment, Plan, Step, plan
from rehearsal.handler import HANDLER_TYPES, HandlerWorkspace, Invocation, custom_resource_event
from rehearsal.intrinsics import Resolver, StackIdentity
from rehearsal.simulated_cluster import Node, nodes_of
from trainium_eks.core.conventions import EFA_RESOURCE, GPU_RESOURCE, NEURON_CORE_RESOURCE, NEURON_DEVICE_RESOURCE

NODEGROUP_TYPE = "AWS::EKS::Nodegroup"
NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
ADDON_TYPE = "AWS::EKS::Addon"
REPO = Path(__file__).resolve().parents[1]
UPSTREAM = REPO.parent / "shared" / "upstream"
"""The upstream charts at the stacks' pinned tags (``../shared/upstream/SOURCES.md``)."""


class LiveHandlerWorkspace(HandlerWorkspace):
    """The handler's workspace with the layer's real kubectl and helm, the e2e ``aws`` and ``helm`` commands
    (:mod:`e2e.commands`) and the test cluster's kubeconfig.

    :param region: The stack's region.
    :param cluster: The test cluster.
    :param tools: ``{"kubectl": path, "helm": path}`` of the kubectl layer (:func:`e2e.layer.layer_tools`).
    """

    def __init__(self, region: str, cluster: TestCluster, tools: Mapping[str, Path]) -> None:
        super().__init__(region)
        self.cluster = cluster
        self.tools = dict(tools)
        (self.bin_dir / "kubectl").symlink_to(self.tools["kubectl"])
        commands.install(self.bin_dir, python=sys.executable, import_root=REPO)

    def environment(self) -> Dict[str, str]:
        env = super().environment()
        env.update(
            {
                commands.KUBECONFIG_ENV: str(self.cluster.kubeconfig),
                commands.UPSTREAM_ENV: str(UPSTREAM),
                commands.HELM_ENV: str(self.tools["helm"]),
            }
        )
        return env


@dataclass
class StepResult:
    """One step and what came of it (an invocation of the handler, or a note)."""

    step: Step
    invocation: Optional[Invocation] = None
    note: str = ""

    @property
    def failed(self) -> bool:
        return self.invocation is not None and not self.invocation.succeeded


@dataclass
class DeployResult:
    """A plan and the steps run (the run stops at the first failed step, where CloudFormation would roll back)."""

    plan: Plan
    steps: List[StepResult] = field(default_factory=list)

    @property
    def failures(self) -> List[StepResult]:
        return [step for step in self.steps if step.failed]

    def describe_failures(self) -> str:
        """Each failed step with the handler's error and log."""
        parts = []
        for result in self.failures:
            assert result.invocation is not None
            step = result.step
            parts.append(
                f"{step.operation} {step.logical_id} ({step.resource_type}): {result.invocation.error}\n"
                f"{result.invocation.log[-4000:]}"
            )
        return "\n".join(parts)


def kwok_node(node: Node, zone: str) -> Dict[str, Any]:
    """The node's labels (the node group's, and the well-known ones kubelet and EKS set: zone, region,
    architecture), taints and allocatable (what EKS's add-ons leave, plus its devices), for kwok."""
    capacity = {
        "cpu": f"{node.allocatable['cpu']}m",
        "memory": f"{node.allocatable['memory']}Mi",
        "pods": str(node.allocatable["pods"]),
    }
    for resource in (NEURON_DEVICE_RESOURCE, NEURON_CORE_RESOURCE, EFA_RESOURCE, GPU_RESOURCE):
        if node.devices(resource):
            capacity[resource] = str(node.devices(resource))
    labels = {
        **node.labels,
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": zone[:-1],
        "kubernetes.io/arch": "amd64",
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
    }
    return {"labels": labels, "taints": node.taints, "capacity": capacity}


class LiveStack:
    """One stack deployed on ``cluster``; a context manager that stops the handler processes on exit.

    Steps run as CloudFormation runs them: concurrently, each once the steps it waits for have finished (a create
    or update waits for the resources it references or depends on; a delete waits for the deletes of the resources
    that reference it; the cleanup phase starts when the update phase has finished), each handler invocation in an
    execution environment of its own, as Lambda gives concurrent invocations. The first failed step stops the run
    where CloudFormation would begin its rollback (the steps already running finish; the rollback is not run).

    :param cluster: The test cluster (empty of the stack's objects at first).
    :param stack: The stack's name.
    :param region: Its region.
    :param tools: The kubectl layer's kubectl and helm.
    :param concurrency: How many steps run at once at most.
    :param hold: Which creates of a handler resource to hold back (:attr:`held`) until :meth:`arrive` runs them, in
        an order a test chooses. Default: none.
    """

    def __init__(
        self,
        cluster: TestCluster,
        stack: str,
        region: str,
        tools: Mapping[str, Path],
        concurrency: int = 8,
        hold: Optional[Callable[[Step], bool]] = None,
    ) -> None:
        self.cluster = cluster
        self.hold = hold
        self.held: List[Tuple[int, StepResult]] = []
        """(index in the plan, step) of each create held back, in the plan's order."""
        self.identity = StackIdentity(stack, region)
        self.tools = dict(tools)
        self.concurrency = concurrency
        self.deployment = Deployment.empty()
        self._idle: "queue.SimpleQueue[LiveHandlerWorkspace]" = queue.SimpleQueue()
        self._workspaces: List[LiveHandlerWorkspace] = []
        self._lock = threading.Lock()

    def __enter__(self) -> "LiveStack":
        return self

    def __exit__(self, *_: Any) -> None:
        for workspace in self._workspaces:
            workspace.close()

    def deploy(self, template: Optional[Mapping[str, Any]]) -> DeployResult:
        """Change the stack to ``template`` (None: ``cdk destroy``); the result's steps are in the plan's order."""
        changes = plan(self.deployment, template, self.identity)
        result = DeployResult(changes, [StepResult(step) for step in changes.steps])
        for phase in ("update", "cleanup"):
            runs = [(index, run) for index, run in enumerate(result.steps) if run.step.phase == phase]
            if not self._run_phase(runs, template or {}):
                return result
        self.deployment = changes.result
        return result

    def _run_phase(self, runs: List[Tuple[int, StepResult]], template: Mapping[str, Any]) -> bool:
        """Run one phase's steps; False when one failed."""
        done: Dict[int, "Future[None]"] = {}
        failed = threading.Event()
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            for position, (index, run) in enumerate(runs):
                waits = [done[i] for i, earlier in runs[:position] if _waits_for(run.step, earlier.step)]
                done[index] = pool.submit(self._run_step, index, run, waits, template, failed)
            for future in done.values():
                future.result()
        return not failed.is_set()

    def _run_step(
        self,
        index: int,
        run: StepResult,
        waits: List["Future[None]"],
        template: Mapping[str, Any],
        failed: threading.Event,
    ) -> None:
        for future in waits:
            future.result()
        if failed.is_set():
            return
        step = run.step
        if self.hold is not None and step.operation == "Create" and self.hold(step):
            with self._lock:
                self.held.append((index, run))
                self.held.sort(key=lambda held: held[0])
            run.note = "held back"
        elif step.resource_type in HANDLER_TYPES and step.operation in ("Create", "Update", "Delete"):
            self._invoke(index, run)
            if run.failed:
                failed.set()
        elif step.resource_type == NODEGROUP_TYPE and step.operation == "Create":
            run.note = self._add_nodes(template, step)
        elif step.resource_type == NODEGROUP_TYPE and step.operation == "Delete":
            run.note = self._remove_nodes(step)
        elif step.resource_type == ADDON_TYPE and step.operation == "Create":
            run.note = self.cluster.csi.install(self.cluster.api, str(step.properties.get("AddonName")))

    def arrive(self, held: List[Tuple[int, StepResult]], gap: float) -> List[StepResult]:
        """Run held creates (from :attr:`held`) one after the other in the order given, ``gap`` seconds apart; the
        runs that failed."""
        failed = []
        for position, (index, run) in enumerate(held):
            if position:
                time.sleep(gap)
            self._invoke(index, run)
            if run.failed:
                failed.append(run)
        return failed

    def _invoke(self, index: int, run: StepResult) -> None:
        """Run the handler with the step's event in an idle execution environment."""
        workspace = self._workspace()
        try:
            run.invocation = workspace.invoke(self._event(run.step, index))
        finally:
            self._idle.put(workspace)

    def _event(self, step: Step, index: int) -> Dict[str, Any]:
        """The step's CloudFormation event, its NodePools for Karpenter's kwok provider
        (:func:`e2e.karpenter_kwok.for_kwok`; the provider's node class CRD installed first)."""
        event = custom_resource_event(step, self.identity, index)
        for properties in (event["ResourceProperties"], event.get("OldResourceProperties") or {}):
            manifest = properties.get("Manifest")
            if manifest and uses_node_pools(manifest):
                install_node_class_crd(self.cluster.api)
                properties["Manifest"] = for_kwok(manifest)
        return event

    def _workspace(self) -> LiveHandlerWorkspace:
        """An idle handler environment, or a new one."""
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            workspace = LiveHandlerWorkspace(self.identity.region, self.cluster, self.tools)
            with self._lock:
                self._workspaces.append(workspace)
            return workspace

    def _add_nodes(self, template: Mapping[str, Any], step: Step) -> str:
        """The node group's nodes, spread over the zones of its subnets in turn (an Auto Scaling group balances
        its instances across its zones); the subnets' zones are not resolved offline, so each subnet of the group
        counts as one zone of the stack's region (a, b, c...). Each is named after the node group's physical id
        and labelled with it (``eks.amazonaws.com/nodegroup``, the node group's name on EKS), so that a replaced
        node group's new nodes join beside the old ones, which its delete then removes."""
        group = step.logical_id
        subnets = (template["Resources"][group]["Properties"].get("Subnets")) or [None]
        added = []
        members = [node for node in nodes_of(template) if node.group == group]
        for index, node in enumerate(members):
            zone = f"{self.identity.region}{'abcdef'[index % len(subnets)]}"
            spec = kwok_node(node, zone)
            spec["labels"][NODEGROUP_LABEL] = _label_value(step.physical_id)
            name = f"{step.physical_id}-{index}".lower()
            self.cluster.add_node(name, **spec)
            added.append(name)
        return f"nodes {', '.join(added)} joined"

    def _remove_nodes(self, step: Step) -> str:
        removed = []
        selector = f"{NODEGROUP_LABEL}={_label_value(step.physical_id)}"
        for node in self.cluster.api.list("v1", "Node", selector=selector):
            self.cluster.api.delete("v1", "Node", node["metadata"]["name"])
            removed.append(node["metadata"]["name"])
        return f"nodes {', '.join(removed)} removed"


def _label_value(text: str) -> str:
    """``text`` as a label value: at most 63 characters, ending in a letter or digit."""
    return text[-63:].strip("-_.")


def _waits_for(step: Step, earlier: Step) -> bool:
    """Whether ``step`` waits for ``earlier`` (an earlier step of the same phase): a create or update waits for
    what it needs; a delete waits for the deletes of what needs it; every step waits for an earlier step on the
    same resource (a replacement's delete before its create)."""
    if earlier.logical_id == step.logical_id:
        return True
    if step.phase == "cleanup":
        return step.logical_id in earlier.needs
    return earlier.logical_id in step.needs


def applied_objects(live: LiveStack, *, retained: Optional[bool] = None) -> List[Dict[str, Any]]:
    """Every Kubernetes object the stack's deployed template applies (its manifests, resolved); with ``retained``,
    only those a ``cdk destroy`` keeps (their resource's ``DeletionPolicy`` is ``Retain``), or only the others."""
    template = live.deployment.template
    resolver = Resolver(template, live.deployment.resources, live.identity)
    found: List[Dict[str, Any]] = []
    for logical_id, resource in (template.get("Resources") or {}).items():
        kept = resource.get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate")
        if retained is not None and kept != retained:
            continue
        if resource["Type"] == HANDLER_TYPES[0] and logical_id in live.deployment.resources:
            found.extend(json.loads(resolver.resolve(resource["Properties"]["Manifest"])))
    return found
