"""ClusterNodeGroups: the node groups the library built for a cluster, so that in-cluster add-ons follow them."""

from __future__ import annotations

from typing import Callable, List

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from trainium_eks.manifests.jobs.topology import NodeGroupTopology

NodeGroupListener = Callable[[NodeGroupTopology], None]


class ClusterNodeGroups(Construct):
    """The node groups of one cluster, as the library's constructs know them (no CloudFormation resource).

    ``TrainingNodeGroup`` adds itself here; ``ClusterAddons`` listens (:meth:`subscribe`) and applies the device
    plugins each node group needs (Neuron, EFA, NVIDIA), whichever of the two is built first. One per cluster, found
    with :meth:`of`: a child of the cluster's stack named after the cluster construct's address (an imported cluster
    is an interface, which cannot hold children).
    """

    def __init__(self, scope: Construct, id_: str) -> None:
        super().__init__(scope, id_)
        self.groups: List[NodeGroupTopology] = []
        self._listeners: List[NodeGroupListener] = []

    @classmethod
    def of(cls, cluster: eks.ICluster) -> "ClusterNodeGroups":
        """The node groups of ``cluster`` (created on first use)."""
        stack = Stack.of(cluster)
        id_ = f"TrainiumEksNodeGroups{cluster.node.addr}"
        found = stack.node.try_find_child(id_)
        return found if isinstance(found, cls) else cls(stack, id_)

    def add(self, group: NodeGroupTopology) -> None:
        """Record a node group of the cluster and tell every listener."""
        self.groups.append(group)
        for listener in list(self._listeners):
            listener(group)

    def subscribe(self, listener: NodeGroupListener) -> None:
        """Call ``listener`` for every node group recorded so far, and for every one recorded later."""
        self._listeners.append(listener)
        for group in list(self.groups):
            listener(group)
