"""The state of a running cluster as the scheduling rehearsal sees it: nodes, workload objects, pods, PodGroups,
Karpenter's NodePools and NodeClaims.

Standing nodes come from a stack's template (:func:`nodes_of`): each managed node group's desired size, labels and
taints, its launch template's instance type and EFA interfaces; what each node offers is :mod:`.node_capacity`'s
allocatable less the EKS add-ons' own pods, plus the extended resources of the device plugins once their pods run on
it. Other nodes come and go with Karpenter (:mod:`.karpenter_provisioner`), from the ``NodePool`` and
``EC2NodeClass`` objects the stack applies. Objects are the Kubernetes objects the stack applies (and those the
controllers create); time runs in ticks of a minute.

What a stack tells the model besides its objects is read from its template too: the EKS add-ons (:func:`addons_of`),
the actions of its Volcano scheduler (:func:`volcano_actions_of`) and its Karpenter objects
(:func:`node_pool_objects_of`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

import yaml

from rehearsal.node_capacity import addon_pods, allocatable
from rehearsal.pod_placement import NodeFacts, pod_requests
from trainium_eks.core.cfn_text import cfn_text
from trainium_eks.core.conventions import EFA_RESOURCE, GPU_RESOURCE, NEURON_CORE_RESOURCE, NEURON_DEVICE_RESOURCE
from trainium_eks.facts.catalog import instance_facts

EFA_INTERFACE_TYPES = ("efa", "efa-only")

DEVICE_PLUGINS: Mapping[str, Tuple[str, ...]] = {
    "neuron-device-plugin": (NEURON_DEVICE_RESOURCE, NEURON_CORE_RESOURCE),
    "aws-efa-k8s-device-plugin": (EFA_RESOURCE,),
    "nvidia-device-plugin": (GPU_RESOURCE,),
}
"""The library's device plugin DaemonSets and what a node advertises once their pod runs on it (Neuron SDK
k8s-neuron-device-plugin, EKS user guide node-efa, NVIDIA k8s-device-plugin)."""

TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}

DEFAULT_VOLCANO_ACTIONS: Tuple[str, ...] = ("enqueue", "allocate", "backfill")
"""The actions of the Volcano chart's own scheduler configuration (volcano-sh/volcano v1.15.1
``installer/helm/chart/volcano/config/volcano-scheduler.conf``), which a release without
``custom.scheduler_config_override`` runs."""

HELM_CHART_TYPE = "Custom::AWSCDK-EKS-HelmChart"
MANIFEST_TYPE = "Custom::AWSCDK-EKS-KubernetesResource"
VOLCANO_RELEASE = "volcano"

KARPENTER_KINDS: Tuple[Tuple[str, str], ...] = (
    ("karpenter.sh/v1", "NodePool"),
    ("karpenter.k8s.aws/v1", "EC2NodeClass"),
)
"""(apiVersion, kind) of the Karpenter objects the model reads."""


@dataclass
class Node:
    """A node: its facts, what the add-ons take, and the extended resources its device plugins advertise."""

    name: str
    group: str
    instance_type: str
    labels: Dict[str, str]
    taints: List[Dict[str, str]]
    efa_interfaces: int
    base: Dict[str, int]
    overhead: Dict[str, int]
    advertised: Dict[str, int] = field(default_factory=dict)
    pool: Optional[str] = None
    """The Karpenter NodePool that launched the node (None: a node of a managed node group)."""
    joined: int = 0
    requested: Dict[str, int] = field(default_factory=dict)
    """Karpenter: what the pods its NodeClaim was made for request (the claim's ``spec.resources.requests``)."""
    initialized: Optional[int] = None
    """Karpenter: the tick the node became initialized (its requested extended resources registered)."""
    last_pod_event: Optional[int] = None
    """Karpenter: the tick a pod last was bound to the node or left it (``status.lastPodEventTime``)."""
    workload_pods: FrozenSet[str] = frozenset()
    """Karpenter: the non-DaemonSet pods it last saw running on the node (to see pod events)."""
    nominated: int = -1
    """Karpenter: the last tick a pending pod was simulated onto the node (it is then not disrupted)."""

    def devices(self, resource: str) -> int:
        """How many of ``resource`` the node's hardware has (what its device plugin would advertise)."""
        facts = instance_facts(self.instance_type)
        return {
            NEURON_DEVICE_RESOURCE: facts.neuron_devices,
            NEURON_CORE_RESOURCE: facts.neuron_cores,
            EFA_RESOURCE: self.efa_interfaces,
            GPU_RESOURCE: facts.gpus,
        }[resource]

    @property
    def allocatable(self) -> Dict[str, int]:
        """What pods may request on the node now: allocatable less the add-on pods, plus advertised devices."""
        found = {name: value - self.overhead.get(name, 0) for name, value in self.base.items()}
        found.update(self.advertised)
        return found

    def facts(self) -> NodeFacts:
        """The node as the placement filters read it."""
        return NodeFacts(self.name, self.labels, self.taints, self.allocatable)


@dataclass
class Pod:
    """A pod: its spec, owner, scheduling, and where its containers are.

    ``phase``: Pending (not bound), Running (bound: init containers or containers), Succeeded, Failed.
    ``step``: index of the container running (init containers first), ``ticks`` in that container.
    """

    name: str
    namespace: str
    owner: str
    spec: Dict[str, Any]
    created: int
    scheduler: str
    priority: int
    group: Optional[str] = None
    generation: int = 0
    node: Optional[str] = None
    phase: str = "Pending"
    step: int = 0
    ticks: int = 0
    waited: int = 0
    exit_code: Optional[int] = None
    reason: str = ""
    scheduled_reason: str = ""
    """The reason of the pod's ``PodScheduled=False`` condition, set by its scheduler when it did not bind it:
    ``Unschedulable`` (no node fits), ``Schedulable`` (Volcano placed it in a gang it then discarded); empty while
    the scheduler has not tried, and once bound."""

    @property
    def requests(self) -> Dict[str, int]:
        """What the pod holds on its node from binding to its end."""
        return pod_requests(self.spec)

    @property
    def containers(self) -> List[Dict[str, Any]]:
        """Init containers, then containers, in the order the kubelet runs them."""
        return list(self.spec.get("initContainers") or ()) + list(self.spec.get("containers") or ())

    @property
    def finished(self) -> bool:
        """Whether the pod has ended."""
        return self.phase in ("Succeeded", "Failed")


@dataclass
class PodGroup:
    """A Volcano PodGroup: gang size, minimum resources, queue, priority, phase (Pending, Inqueue, Running)."""

    name: str
    namespace: str
    owner: str
    min_member: int
    min_resources: Dict[str, int]
    queue: str
    priority: int
    created: int
    phase: str = "Pending"


@dataclass
class Workload:
    """A workload object the controllers act on: a Deployment, DaemonSet, batch Job, Volcano Job or TrainJob.

    ``state``: what the job reports (``Running``, ``Complete``, ``Failed``; a Volcano Job's phase). ``attempt``: how
    many times it has started over (restarts of a Volcano Job or JobSet, failed pods of a batch Job).
    """

    ref: str
    kind: str
    manifest: Dict[str, Any]
    created: int
    owner: Optional[str] = None
    state: str = "Pending"
    attempt: int = 0
    failures: int = 0
    generation: int = 0
    detail: str = ""

    @property
    def name(self) -> str:
        """The object's name."""
        return self.manifest["metadata"]["name"]

    @property
    def namespace(self) -> str:
        """The object's namespace."""
        return self.manifest["metadata"].get("namespace") or "default"

    @property
    def is_job(self) -> bool:
        """Whether the workload is a job (it must end), not a service (it runs on)."""
        return self.kind in ("job", "vcjob", "trainjob", "pytorchjob")

    @property
    def finished(self) -> bool:
        """Whether the job has ended, well or not."""
        return self.state in ("Complete", "Completed", "Failed", "Terminated")

    @property
    def succeeded(self) -> bool:
        """Whether the job has completed."""
        return self.state in ("Complete", "Completed")


@dataclass
class NodeClaim:
    """A Karpenter NodeClaim being launched: its NodePool, when its node joins, what its pods request."""

    name: str
    pool: str
    created: int
    joins: int
    requests: Dict[str, int]


@dataclass
class SimulatedCluster:
    """Nodes, workloads, pods, PodGroups, Karpenter's pools and claims and the time, shared by controllers,
    schedulers, Karpenter and kubelets.

    ``volcano_actions``: the actions of the Volcano scheduler's configuration. ``addons``: the EKS add-ons, whose pods
    run on every node Karpenter launches. ``shortfalls``: NodePool name -> the
    :class:`~rehearsal.karpenter_provisioner.CapacityShortfall` EC2 has for it.
    """

    nodes: List[Node]
    priority_classes: Dict[str, int] = field(default_factory=dict)
    queues: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    runtimes: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    workloads: Dict[str, Workload] = field(default_factory=dict)
    pods: List[Pod] = field(default_factory=list)
    pod_groups: Dict[str, PodGroup] = field(default_factory=dict)
    tick: int = 0
    log: List[str] = field(default_factory=list)
    volcano_actions: Tuple[str, ...] = DEFAULT_VOLCANO_ACTIONS
    addons: Tuple[str, ...] = ()
    node_pools: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    node_classes: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    node_claims: List[NodeClaim] = field(default_factory=list)
    shortfalls: Mapping[str, Any] = field(default_factory=dict)
    claims_made: int = 0
    launch_failures: Dict[str, int] = field(default_factory=dict)
    """NodePool name -> launches that failed for want of capacity."""
    unavailable_until: Dict[str, int] = field(default_factory=dict)
    """NodePool name -> the tick its offering is available again after a failed launch."""
    peak_nodes: Dict[str, int] = field(default_factory=dict)
    """NodePool name -> the most NodeClaims (launching or joined) it had at once."""

    def say(self, message: str) -> None:
        """Record what happened at this tick."""
        self.log.append(f"t={self.tick}: {message}")

    def runtime(self, name: str) -> Optional[Dict[str, Any]]:
        """The ClusterTrainingRuntime called ``name``, if any."""
        return self.runtimes.get(name)

    def node(self, name: str) -> Node:
        """The node called ``name``."""
        return next(node for node in self.nodes if node.name == name)

    def used(self, node: Node) -> Dict[str, int]:
        """What the node's bound, unfinished pods request."""
        total: Dict[str, int] = {}
        for pod in self.pods:
            if pod.node == node.name and not pod.finished:
                for name, value in pod.requests.items():
                    total[name] = total.get(name, 0) + value
        return total

    def free(self, node: Node) -> Dict[str, int]:
        """What the node has left for another pod."""
        used = self.used(node)
        return {name: value - used.get(name, 0) for name, value in node.allocatable.items()}

    def pods_of(self, owner: str, generation: Optional[int] = None) -> List[Pod]:
        """The pods a workload owns (of one generation)."""
        return [p for p in self.pods if p.owner == owner and (generation is None or p.generation == generation)]

    def priority_of(self, spec: Mapping[str, Any]) -> int:
        """A pod's priority from its priority class (0 without one)."""
        name = spec.get("priorityClassName")
        if not name:
            return 0
        return {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}.get(
            name, self.priority_classes.get(name, 0)
        )

    def create(self, manifest: Mapping[str, Any], owner: Optional[str] = None) -> Optional[Workload]:
        """Add an object: a workload the controllers act on, or what they read (priority classes, queues, runtimes);
        None for an object the model does not need."""
        kind = workload_kind(manifest)
        metadata = manifest.get("metadata") or {}
        if kind is None:
            if (manifest.get("apiVersion"), manifest.get("kind")) == KARPENTER_KINDS[0]:
                self.node_pools[metadata["name"]] = json.loads(json.dumps(manifest))
            elif (manifest.get("apiVersion"), manifest.get("kind")) == KARPENTER_KINDS[1]:
                self.node_classes[metadata["name"]] = json.loads(json.dumps(manifest))
            elif manifest.get("kind") == "PriorityClass":
                self.priority_classes[metadata["name"]] = int(manifest.get("value", 0))
            elif manifest.get("kind") == "Queue":
                self.queues[metadata["name"]] = dict(manifest.get("spec") or {})
            elif manifest.get("kind") == "ClusterTrainingRuntime":
                self.runtimes[metadata["name"]] = dict(manifest)
            return None
        workload = Workload(
            f"{kind}/{metadata.get('namespace') or 'default'}/{metadata['name']}",
            kind,
            dict(manifest),
            self.tick,
            owner,
        )
        if workload.ref in self.workloads:
            return None
        self.workloads[workload.ref] = workload
        if workload.is_job:
            self.say(f"{workload.ref} created" + (f" by {owner}" if owner else ""))
        return workload

    def delete_workload(self, ref: str, why: str) -> None:
        """Delete a workload, its pods and PodGroups, and (background garbage collection) everything it owns."""
        workload = self.workloads.pop(ref, None)
        if workload is None:
            return
        self.say(f"{ref} deleted ({why})")
        self.pods = [p for p in self.pods if p.owner != ref]
        self.pod_groups = {k: g for k, g in self.pod_groups.items() if g.owner != ref}
        for owned in [w.ref for w in self.workloads.values() if w.owner == ref]:
            self.delete_workload(owned, f"its owner {ref} was deleted")

    def remove_node(self, name: str, why: str) -> None:
        """Remove a node and its DaemonSet pods (the node must run no other pod that has not ended; the ended ones
        stay, as records)."""
        busy = [p.name for p in self.pods if p.node == name and not p.finished and not p.owner.startswith("daemonset/")]
        if busy:
            raise ValueError(f"node {name} still runs {', '.join(busy)}")
        self.nodes = [n for n in self.nodes if n.name != name]
        self.pods = [
            p
            for p in self.pods
            if not (
                p.owner.startswith("daemonset/")
                and (p.node == name or (p.spec.get("nodeSelector") or {}).get("kubernetes.io/hostname") == name)
            )
        ]
        self.say(f"node {name} removed ({why})")


def addons_of(template: Mapping[str, Any]) -> Tuple[str, ...]:
    """The EKS add-ons of ``template`` (``AWS::EKS::Addon`` names)."""
    resources = template.get("Resources") or {}
    return tuple(str(r["Properties"]["AddonName"]) for r in resources.values() if r["Type"] == "AWS::EKS::Addon")


def _as_text(value: Any) -> str:
    """A property that is a string or a string expression (``Fn::Join`` of literals and references), references
    read as a placeholder."""
    return cfn_text(value, reference=lambda _: "cfn-token", attribute=lambda _: "cfn-token")


def volcano_actions_of(template: Mapping[str, Any]) -> Tuple[str, ...]:
    """The actions of the Volcano scheduler ``template`` installs: those of the Volcano release's
    ``custom.scheduler_config_override`` (the YAML text the chart writes as ``volcano-scheduler.conf``,
    volcano-sh/volcano v1.15.1 ``installer/helm/chart/volcano/templates/scheduler.yaml``), else the chart's own
    (:data:`DEFAULT_VOLCANO_ACTIONS`). The release is the ``Custom::AWSCDK-EKS-HelmChart`` resource whose
    ``Release`` is ``volcano``; its ``Values`` are JSON text. A template without it gets the chart's own too."""
    for resource in (template.get("Resources") or {}).values():
        props = resource.get("Properties") or {}
        if resource.get("Type") != HELM_CHART_TYPE or props.get("Release") != VOLCANO_RELEASE:
            continue
        values = json.loads(_as_text(props["Values"])) if props.get("Values") else {}
        override = (values.get("custom") or {}).get("scheduler_config_override")
        if override:
            actions = (yaml.safe_load(override) or {}).get("actions")
            if actions:
                return tuple(a.strip() for a in str(actions).split(",") if a.strip())
    return DEFAULT_VOLCANO_ACTIONS


def node_pool_objects_of(template: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The ``NodePool`` and ``EC2NodeClass`` objects ``template`` applies (references as placeholders)."""
    found: List[Dict[str, Any]] = []
    for resource in (template.get("Resources") or {}).values():
        if resource.get("Type") != MANIFEST_TYPE:
            continue
        for obj in json.loads(_as_text(resource["Properties"]["Manifest"])):
            if (obj.get("apiVersion"), obj.get("kind")) in KARPENTER_KINDS:
                found.append(obj)
    return found


def nodes_of(template: Mapping[str, Any]) -> List[Node]:
    """The nodes of every managed node group of ``template`` (desired size), with their labels, taints, instance
    type, EFA interfaces and what the EKS add-ons of the template leave for pods. The properties read are literals
    in the library's templates (the launch template is found by its ``Ref``)."""
    resources = template.get("Resources") or {}
    addons = addons_of(template)
    nodes: List[Node] = []
    for logical_id, resource in sorted(resources.items()):
        if resource["Type"] != "AWS::EKS::Nodegroup":
            continue
        props = resource["Properties"]
        instance_type, interfaces = _instance_and_interfaces(props, resources)
        labels = {str(k): str(v) for k, v in (props.get("Labels") or {}).items()}
        taints = [
            {"key": t["Key"], "value": t.get("Value", ""), "effect": TAINT_EFFECTS[t["Effect"]]}
            for t in props.get("Taints") or ()
        ]
        overhead = addon_overhead(addons, instance_type)
        for index in range(int(props["ScalingConfig"]["DesiredSize"])):
            name = f"{logical_id}-{index}"
            node_labels = {
                **labels,
                "node.kubernetes.io/instance-type": instance_type,
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "eks.amazonaws.com/nodegroup": logical_id,
            }
            nodes.append(
                Node(
                    name,
                    logical_id,
                    instance_type,
                    node_labels,
                    taints,
                    interfaces,
                    allocatable(instance_type),
                    overhead,
                )
            )
    return nodes


def addon_overhead(addons: Sequence[str], instance_type: str) -> Dict[str, int]:
    """What the pods of the EKS add-ons ``addons`` take on a node of ``instance_type``."""
    overhead: Dict[str, int] = {"cpu": 0, "memory": 0, "pods": 0}
    for pod in addon_pods(addons, instance_facts(instance_type).accelerator):
        overhead["cpu"] += pod.millicpu
        overhead["memory"] += pod.memory_mib
        overhead["pods"] += 1
    return overhead


def _instance_and_interfaces(props: Mapping[str, Any], resources: Mapping[str, Any]) -> Tuple[str, int]:
    """The node group's instance type and the EFA interfaces its launch template attaches."""
    data: Mapping[str, Any] = {}
    reference = (props.get("LaunchTemplate") or {}).get("Id") or {}
    template_id = reference.get("Ref") if isinstance(reference, dict) else None
    if template_id in resources:
        data = resources[template_id]["Properties"].get("LaunchTemplateData") or {}
    instance_type = data.get("InstanceType") or (props.get("InstanceTypes") or [None])[0]
    if instance_type is None:
        raise ValueError(f"node group {props.get('NodegroupName')}: no instance type in it or its launch template")
    interfaces = [i for i in data.get("NetworkInterfaces") or () if i.get("InterfaceType") in EFA_INTERFACE_TYPES]
    return str(instance_type), len(interfaces)


WORKLOAD_KINDS: Mapping[Tuple[str, str], str] = {
    ("apps/v1", "DaemonSet"): "daemonset",
    ("apps/v1", "Deployment"): "deployment",
    ("batch/v1", "Job"): "job",
    ("batch.volcano.sh/v1alpha1", "Job"): "vcjob",
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): "trainjob",
    ("kubeflow.org/v1", "PyTorchJob"): "pytorchjob",
}


def workload_kind(manifest: Mapping[str, Any]) -> Optional[str]:
    """The model's name of a workload's kind (``vcjob``...), or None for another kind."""
    return WORKLOAD_KINDS.get((str(manifest.get("apiVersion")), str(manifest.get("kind"))))
