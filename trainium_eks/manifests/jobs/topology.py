"""NodeGroupTopology: what a job needs to know about the nodes it runs on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, Optional, Tuple

from trainium_eks.core.conventions import Taint
from trainium_eks.facts.catalog import InstanceFacts, instance_facts


@dataclass(frozen=True)
class NodeGroupTopology:
    """The nodes of a node group, as a job sees them. ``TrainingNodeGroup.topology`` builds one.

    :param instance_type: EC2 instance type of every node.
    :param node_count: Nodes the group runs (its desired size).
    :param max_nodes: Its maximum size.
    :param efa_interfaces: EFA interfaces attached to each node (what the EFA device plugin advertises).
    :param taints: Taints of the nodes, which job pods must tolerate.
    :param shared_claims: PersistentVolumeClaims whose file system these nodes can reach (security group and AZ).
    :param launched_for_pods: The nodes exist only while pods need them (a Karpenter NodePool launches them for
        pending pods and removes them when empty), rather than standing (a managed node group). Default: false.
    :param node_pool: The Karpenter NodePool that launches the nodes (its limits bound them), when it does. Default:
        none.
    """

    instance_type: str
    node_count: int
    max_nodes: int
    efa_interfaces: int
    taints: Tuple[Taint, ...] = ()
    shared_claims: FrozenSet[str] = field(default_factory=frozenset)
    launched_for_pods: bool = False
    node_pool: Optional[str] = None

    @property
    def instance(self) -> InstanceFacts:
        """The catalog row of the instance type."""
        return instance_facts(self.instance_type)

    @property
    def neuron_devices(self) -> int:
        """Neuron devices per node (``aws.amazon.com/neuron``)."""
        return self.instance.neuron_devices

    @property
    def neuron_cores(self) -> int:
        """NeuronCores per node (``aws.amazon.com/neuroncore``)."""
        return self.instance.neuron_cores

    def pod_placement(self) -> Dict[str, Any]:
        """Pod spec fields that put a pod on these nodes: a node selector on the instance type and tolerations of
        the nodes' taints (plain manifest form)."""
        return {
            "nodeSelector": {"node.kubernetes.io/instance-type": self.instance_type},
            "tolerations": [taint.toleration() for taint in self.taints],
        }

    @property
    def gpus(self) -> int:
        """NVIDIA GPUs per node (``nvidia.com/gpu``)."""
        return self.instance.gpus
