"""AcceleratedNodeGroup: a managed node group of Trainium, GPU or CPU instances laid out for collective traffic."""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

from aws_cdk import Annotations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from trainium_eks.catalog import INSTANCE_CATALOG, Accelerator, InstanceFacts, instance_facts
from trainium_eks.constructs.efa_layout import EfaLayout, efa_network_interfaces
from trainium_eks.constructs.node_capacity import CapacityKind, NodeCapacity
from trainium_eks.constructs.node_launch_template import NodeLaunchTemplate
from trainium_eks.constructs.node_role import NodeRole
from trainium_eks.manifests.topology import NodeGroupTopology, Taint
from trainium_eks.validation import Problems

DEFAULT_INSTANCE_TYPE = "trn1.32xlarge"
"""Instance type of :class:`AcceleratedNodeGroup`: the seed system's Trainium instance."""

DEFAULT_NODE_COUNT = 2
"""Nodes of :class:`AcceleratedNodeGroup`: the seed system trains on two nodes."""

DEFAULT_ROOT_VOLUME_GIB = 500
"""Root volume of an accelerated node, in GiB (container images of the Neuron SDK are large); the tutorial's value."""

MAX_NODES_PER_MANAGED_NODE_GROUP = 450
"""Service quota "Nodes per managed node group" of Amazon EKS. Source: Amazon EKS user guide, "View and manage
Amazon EKS and Fargate service quotas" (https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html)."""

ACCELERATOR_TAINTS: Mapping[Accelerator, eks.TaintSpec] = {
    Accelerator.NEURON: eks.TaintSpec(effect=eks.TaintEffect.NO_SCHEDULE, key="aws.amazon.com/neuron", value="true"),
    Accelerator.NVIDIA: eks.TaintSpec(effect=eks.TaintEffect.NO_SCHEDULE, key="nvidia.com/gpu", value="true"),
}
"""The taint that keeps other pods off accelerated nodes, per accelerator (CPU nodes are not tainted)."""

ACCELERATOR_AMI_TYPES: Mapping[Accelerator, eks.NodegroupAmiType] = {
    Accelerator.NEURON: eks.NodegroupAmiType.AL2023_X86_64_NEURON,
    Accelerator.NVIDIA: eks.NodegroupAmiType.AL2023_X86_64_NVIDIA,
    Accelerator.NONE: eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
}
"""EKS-optimized AMI type per accelerator: Amazon Linux 2023 with the Neuron driver, the NVIDIA driver, or neither.
Source: Amazon EKS user guide, "Create nodes with optimized Amazon Linux AMIs"."""


class AcceleratedNodeGroup(Construct):
    """A managed node group of accelerated instances in one subnet, with one EFA device on every network card.

    What it builds:

    - a launch template (:class:`NodeLaunchTemplate`) carrying the instance type and, for EFA-capable types, one
      network interface per network card in the chosen :class:`EfaLayout` (trn1.32xlarge 8, trn1n.32xlarge and
      trn2.48xlarge 16); IMDSv2 with hop limit 2; an encrypted gp3 root volume;
    - a cluster placement group (EFA-capable types, on-demand capacity);
    - a node security group with self-referencing all-traffic ingress **and** egress (EFA traffic is dropped
      silently without both), all egress, and all traffic to and from the cluster security group (the
      control plane reaches kubelets and webhooks; pods reach CoreDNS and the services on the system nodes);
    - the managed node group: AMI type from the accelerator (``AL2023_X86_64_NEURON`` for Neuron), one subnet (so
      one AZ), labels, the accelerator taint (``aws.amazon.com/neuron=true:NoSchedule``), the capacity type, node
      auto repair, min/desired/max sizes.

    An instance type without EFA (trn1.2xlarge, CPU types) gets no explicit interfaces and may run one node only:
    collective traffic between nodes needs EFA.

    :param cluster: The EKS cluster. Required.
    :param subnet: The one subnet of the nodes. Required.
    :param instance_type: A type of :mod:`trainium_eks.catalog`. Default: :data:`DEFAULT_INSTANCE_TYPE`.
    :param node_count: Desired number of nodes. Default: :data:`DEFAULT_NODE_COUNT`.
    :param min_size: Default: ``node_count`` (training nodes are not scaled in under a running job).
    :param max_size: Default: ``node_count``.
    :param efa_layout: Default: ``EfaLayout.IP_OPTIMIZED``.
    :param capacity: Default: ``NodeCapacity.on_demand()``.
    :param placement_group: An existing placement group (for instance the one a capacity reservation was made
        in). Default: a new cluster placement group for on-demand EFA nodes, none otherwise.
    :param root_volume_size_gib: Default: :data:`DEFAULT_ROOT_VOLUME_GIB`.
    :param node_role: Default: a new :class:`NodeRole`.
    :param labels: Extra Kubernetes labels. Default: none.
    :param taints: Extra taints, on top of the accelerator's. Default: none.
    :param setting_names: Names of the settings in error messages. Default: the parameter names.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster: eks.ICluster,
        subnet: ec2.ISubnet,
        instance_type: str = DEFAULT_INSTANCE_TYPE,
        node_count: int = DEFAULT_NODE_COUNT,
        min_size: Optional[int] = None,
        max_size: Optional[int] = None,
        efa_layout: EfaLayout = EfaLayout.IP_OPTIMIZED,
        capacity: Optional[NodeCapacity] = None,
        placement_group: Optional[ec2.IPlacementGroup] = None,
        root_volume_size_gib: int = DEFAULT_ROOT_VOLUME_GIB,
        node_role: Optional[iam.IRole] = None,
        labels: Optional[Mapping[str, str]] = None,
        taints: Sequence[eks.TaintSpec] = (),
        setting_names: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(scope, id_)
        capacity = capacity or NodeCapacity.on_demand()
        problems = Problems(self.node.path, setting_names=setting_names)
        instance = check_node_group_settings(
            problems,
            instance_type=instance_type,
            node_count=node_count,
            min_size=min_size,
            max_size=max_size,
            capacity=capacity,
            root_volume_size_gib=root_volume_size_gib,
        )
        problems.raise_if_any()
        assert instance is not None
        self.instance: InstanceFacts = instance
        self.node_count = node_count
        self.min_size = node_count if min_size is None else min_size
        self.max_size = node_count if max_size is None else max_size
        self.efa_layout = efa_layout
        self.subnet = subnet
        self.shared_claims: List[str] = []

        self.security_group = ec2.SecurityGroup(
            self,
            "NodeSecurityGroup",
            vpc=cluster.vpc,
            description="Accelerated nodes: EFA self traffic and traffic with the cluster security group",
            allow_all_outbound=True,
        )
        self.security_group.add_ingress_rule(self.security_group, ec2.Port.all_traffic(), "EFA and pods between nodes")
        # The group already allows all egress, but EFA's documented requirement is an explicit self-referencing
        # egress rule (kept even if the catch-all egress is later narrowed); the L2 drops extra egress rules next
        # to allow_all_outbound, so this one is an L1 resource.
        ec2.CfnSecurityGroupEgress(
            self,
            "EfaSelfEgress",
            group_id=self.security_group.security_group_id,
            destination_security_group_id=self.security_group.security_group_id,
            ip_protocol="-1",
            description="EFA and pods between nodes",
        )
        self.security_group.add_ingress_rule(
            cluster.cluster_security_group,
            ec2.Port.all_traffic(),
            "Control plane (kubelet, webhooks) and pods on nodes of the cluster security group",
        )
        cluster.cluster_security_group.add_ingress_rule(
            self.security_group, ec2.Port.all_traffic(), "Accelerated nodes to the API server and system-node pods"
        )

        if capacity.kind is CapacityKind.CAPACITY_BLOCK:
            Annotations.of(self).add_warning_v2(
                "trainium-eks:capacityBlockWindow",
                f"Capacity Block {capacity.reservation_id}: instances launch only inside the block's time window. "
                "Deployed earlier, the node group's launches fail and are retried until the block starts; EKS scales "
                "the group to 0 about 40 minutes before it ends (EKS user guide, capacity-blocks-mng.html).",
            )
        if placement_group is None and instance.efa_supported and capacity == NodeCapacity.on_demand():
            placement_group = ec2.PlacementGroup(self, "PlacementGroup", strategy=ec2.PlacementGroupStrategy.CLUSTER)
        self.placement_group = placement_group

        interfaces = efa_network_interfaces(instance, efa_layout, [self.security_group.security_group_id])
        self.efa_interfaces = len(interfaces)
        self.launch_template = NodeLaunchTemplate(
            self,
            "LaunchTemplate",
            instance_type=instance.name,
            network_interfaces=interfaces,
            security_group_ids=[self.security_group.security_group_id],
            placement_group=placement_group,
            capacity=capacity,
            root_volume_size_gib=root_volume_size_gib,
        )

        self.labels: Dict[str, str] = {"trainium-eks/accelerator": instance.accelerator.value}
        if instance.efa_supported:
            self.labels["vpc.amazonaws.com/efa.present"] = "true"
        if instance.accelerator is Accelerator.NEURON:
            self.labels["aws.amazon.com/neuron.present"] = "true"
        self.labels.update(labels or {})
        self.taints: List[eks.TaintSpec] = list(taints)
        if instance.accelerator in ACCELERATOR_TAINTS:
            self.taints.insert(0, ACCELERATOR_TAINTS[instance.accelerator])

        self.nodegroup = eks.Nodegroup(
            self,
            "Nodegroup",
            cluster=cluster,
            ami_type=ACCELERATOR_AMI_TYPES[instance.accelerator],
            capacity_type=capacity.eks_capacity_type,
            launch_template_spec=self.launch_template.spec,
            subnets=ec2.SubnetSelection(subnets=[subnet]),
            min_size=self.min_size,
            desired_size=node_count,
            max_size=self.max_size,
            node_role=node_role or NodeRole(self, "NodeRole").role,
            labels=self.labels,
            taints=self.taints or None,
            enable_node_auto_repair=True,
        )

    def add_shared_volume(self, claim_name: str) -> None:
        """Record that these nodes can mount the file system behind PersistentVolumeClaim ``claim_name`` (the caller
        has let their security group reach it, e.g. ``LustreStorage.allow_clients``); jobs may then mount it."""
        if claim_name not in self.shared_claims:
            self.shared_claims.append(claim_name)

    @property
    def topology(self) -> NodeGroupTopology:
        """The nodes as a job sees them: instance type, counts, attached EFA interfaces, taints, shared claims."""
        return NodeGroupTopology(
            instance_type=self.instance.name,
            node_count=self.node_count,
            max_nodes=self.max_size,
            efa_interfaces=self.efa_interfaces,
            taints=tuple(Taint(t.key, t.value, _TAINT_EFFECTS[t.effect]) for t in self.taints),
            shared_claims=frozenset(self.shared_claims),
        )


_TAINT_EFFECTS = {
    eks.TaintEffect.NO_SCHEDULE: "NoSchedule",
    eks.TaintEffect.PREFER_NO_SCHEDULE: "PreferNoSchedule",
    eks.TaintEffect.NO_EXECUTE: "NoExecute",
}


def check_node_group_settings(
    problems: Problems,
    *,
    instance_type: str,
    node_count: int,
    min_size: Optional[int] = None,
    max_size: Optional[int] = None,
    capacity: Optional[NodeCapacity] = None,
    root_volume_size_gib: int = DEFAULT_ROOT_VOLUME_GIB,
) -> Optional[InstanceFacts]:
    """Record every problem of the node-group settings in ``problems``; return the instance facts when known."""
    try:
        instance: Optional[InstanceFacts] = instance_facts(instance_type)
    except KeyError as error:
        problems.add("instance_type", instance_type, str(error.args[0]))
        instance = None
    ceiling = MAX_NODES_PER_MANAGED_NODE_GROUP if max_size is None else max_size
    if not isinstance(node_count, int) or isinstance(node_count, bool) or not 1 <= node_count <= ceiling:
        limit = (
            f"the EKS limit of {MAX_NODES_PER_MANAGED_NODE_GROUP} nodes per managed node group"
            if max_size is None
            else f"max_size={max_size}"
        )
        problems.add("node_count", node_count, f"an integer from 1 to {ceiling} ({limit})")
    elif instance is not None and not instance.efa_supported and node_count > 1:
        problems.add(
            "node_count",
            node_count,
            f"{instance.name} has no EFA, so nodes cannot run collectives together: use 1 node, or an EFA type "
            f"({', '.join(_efa_types_like(instance))})",
        )
    if min_size is not None and isinstance(node_count, int) and not 0 <= min_size <= node_count:
        problems.add("min_size", min_size, f"an integer from 0 to node_count={node_count}")
    if max_size is not None and not 1 <= max_size <= MAX_NODES_PER_MANAGED_NODE_GROUP:
        problems.add("max_size", max_size, f"an integer from 1 to {MAX_NODES_PER_MANAGED_NODE_GROUP} (EKS quota)")
    if not 20 <= root_volume_size_gib <= 16384:
        problems.add("root_volume_size_gib", root_volume_size_gib, "20 to 16384 GiB (gp3 limits)")
    if capacity is not None:
        capacity.check(problems)
    return instance


def _efa_types_like(instance: InstanceFacts) -> List[str]:
    return [f.name for f in INSTANCE_CATALOG.values() if f.accelerator is instance.accelerator and f.efa_supported]
