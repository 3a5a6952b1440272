"""The state of a running cluster as the scheduling rehearsal sees it: nodes, workload objects, pods, PodGroups.

Nodes come from a stack's template (:func:`nodes_of`): each managed node group's desired size, labels and taints, its
launch template's instance type and EFA interfaces; what each node offers is :mod:`.node_capacity`'s allocatable less
the EKS add-ons' own pods, plus the extended resources of the device plugins once their pods run on it. Objects are
the Kubernetes objects the stack applies (and those the controllers create); time runs in ticks of a minute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from rehearsal.admission import ApiView, denials
from rehearsal.node_capacity import addon_pods, allocatable
from rehearsal.pod_placement import NodeFacts, pod_requests
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
class SimulatedCluster:
    """Nodes, workloads, pods, PodGroups and the time, shared by controllers, schedulers and kubelets."""

    nodes: List[Node]
    priority_classes: Dict[str, int] = field(default_factory=dict)
    queues: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    runtimes: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    workloads: Dict[str, Workload] = field(default_factory=dict)
    pods: List[Pod] = field(default_factory=list)
    pod_groups: Dict[str, PodGroup] = field(default_factory=dict)
    tick: int = 0
    log: List[str] = field(default_factory=list)

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
            if manifest.get("kind") == "PriorityClass":
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

    def admit(self, manifest: Mapping[str, Any]) -> List[str]:
        """The denials of the webhooks (:mod:`.admission`) for a new object: queues are open, runtimes and priority
        classes those the cluster holds."""
        view = ApiView(
            queues={name: "Open" for name in self.queues},
            runtimes=dict(self.runtimes),
            priority_classes=set(self.priority_classes),
        )
        return denials(manifest, view)

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


def nodes_of(template: Mapping[str, Any]) -> List[Node]:
    """The nodes of every managed node group of ``template`` (desired size), with their labels, taints, instance
    type, EFA interfaces and what the EKS add-ons of the template leave for pods. The properties read are literals
    in the library's templates (the launch template is found by its ``Ref``)."""
    resources = template.get("Resources") or {}
    addons = [str(r["Properties"]["AddonName"]) for r in resources.values() if r["Type"] == "AWS::EKS::Addon"]
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
        facts = instance_facts(instance_type)
        overhead: Dict[str, int] = {"cpu": 0, "memory": 0, "pods": 0}
        for pod in addon_pods(addons, facts.accelerator):
            overhead["cpu"] += pod.millicpu
            overhead["memory"] += pod.memory_mib
            overhead["pods"] += 1
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
