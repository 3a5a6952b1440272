"""TrainingNodeGroup: a managed node group of Trainium, GPU or CPU instances laid out for collective traffic."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from aws_cdk import Annotations, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from trainium_eks.constructs.cluster_node_groups import ClusterNodeGroups
from trainium_eks.constructs.efa_layout import EfaLayout, efa_network_interfaces
from trainium_eks.constructs.node_capacity import CapacityKind, NodeCapacity
from trainium_eks.constructs.node_launch_template import NodeLaunchTemplate
from trainium_eks.constructs.node_role import NodeRole
from trainium_eks.constructs.security_group_rules import allow_ingress
from trainium_eks.core.conventions import Taint, accelerator_taint
from trainium_eks.core.cost import CostLine, nodes_usd_per_hour, priced, stack_region
from trainium_eks.core.validation import (
    DNS1123_SUBDOMAIN,
    Problems,
    az_name_hint,
    check_cluster,
    check_implements,
    check_instance,
    check_integer,
    check_label_key,
    check_label_value,
    check_labels,
    check_pattern,
    coerce_enum,
    is_concrete,
    is_integer,
    nearest,
    whole_number_hint,
)
from trainium_eks.facts.catalog import (
    INSTANCE_CATALOG,
    MAX_NODES_PER_MANAGED_NODE_GROUP,
    Accelerator,
    InstanceFacts,
    Offering,
    offering,
)
from trainium_eks.facts.regions import AZ_IDS_BY_REGION, region_of_az_id
from trainium_eks.manifests.jobs.topology import NodeGroupTopology

DEFAULT_INSTANCE_TYPE = "trn1.32xlarge"
"""Instance type of :class:`TrainingNodeGroup`: the seed system's Trainium instance."""

DEFAULT_NODE_COUNT = 2
"""Nodes of :class:`TrainingNodeGroup`: the seed system trains on two nodes."""

ROOT_VOLUME_GIB: Mapping[Accelerator, int] = {
    Accelerator.NEURON: 500,
    Accelerator.NVIDIA: 200,
    Accelerator.NONE: 100,
}
"""Root volume of a node by accelerator, in GiB, when none is given. Neuron: 500, the aws-neuron-eks-samples node
group template's ``VolumeSize`` default (cfn/eks_trn1_ng_stack.yaml): the Neuron training DLC is about 10 GB
compressed, unpacked next to the compile cache's local spill. NVIDIA: 200, room for several CUDA images (the PyTorch
CUDA runtime and the Composer image are 3-6 GB compressed, about twice that unpacked) and their updates. CPU: 100.
Datasets and checkpoints live on the shared file system, not here."""

DEFAULT_ROOT_VOLUME_GIB = ROOT_VOLUME_GIB[Accelerator.NEURON]
"""Root volume of the default (Trainium) node group, GiB."""

ACCELERATOR_AMI_TYPES: Mapping[Accelerator, eks.NodegroupAmiType] = {
    Accelerator.NEURON: eks.NodegroupAmiType.AL2023_X86_64_NEURON,
    Accelerator.NVIDIA: eks.NodegroupAmiType.AL2023_X86_64_NVIDIA,
    Accelerator.NONE: eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
}
"""EKS-optimized AMI type per accelerator: Amazon Linux 2023 with the Neuron driver, the NVIDIA driver, or neither.
Source: Amazon EKS user guide, "Create nodes with optimized Amazon Linux AMIs"."""


class TrainingNodeGroup(Construct):
    """A managed node group of accelerated instances in one subnet, with one EFA device on every network card.

    What it builds:

    - a launch template (:class:`NodeLaunchTemplate`) carrying the instance type and, for EFA-capable types, one
      network interface per network card in the chosen :class:`EfaLayout` (trn1.32xlarge 8, trn1n.32xlarge and
      trn2.48xlarge 16); IMDSv2 with hop limit 1 (``IMDS_HOP_LIMIT``); an encrypted gp3 root volume;
    - a cluster placement group (EFA-capable types, on-demand capacity);
    - a node security group with self-referencing all-traffic ingress **and** egress (EFA traffic is dropped
      silently without both), all egress, and all traffic to and from the cluster security group (the
      control plane reaches kubelets and webhooks; pods reach CoreDNS and the services on the system nodes);
    - the managed node group: AMI type from the accelerator (``AL2023_X86_64_NEURON`` for Neuron), one subnet (so
      one AZ), labels, the accelerator taint (``aws.amazon.com/neuron=true:NoSchedule``), the capacity type, node
      auto repair, min/desired/max sizes.

    An instance type without EFA gets no explicit interfaces; an accelerated one (trn1.2xlarge, the small GPU types)
    may run one node only, since collective traffic between accelerated nodes needs EFA; CPU nodes may be many (they
    train over TCP with gloo).

    :param cluster: The EKS cluster. Required.
    :param subnet: The one subnet of the nodes. Required.
    :param instance_type: A type of :mod:`trainium_eks.facts.catalog`. Default: :data:`DEFAULT_INSTANCE_TYPE`.
    :param node_count: Desired number of nodes. Default: :data:`DEFAULT_NODE_COUNT`.
    :param min_size: Default: ``node_count`` (training nodes are not scaled in under a running job).
    :param max_size: Default: ``node_count``.
    :param efa_layout: Default: ``EfaLayout.IP_OPTIMIZED``.
    :param capacity: Default: ``NodeCapacity.on_demand()``.
    :param placement_group: An existing placement group (for instance the one a capacity reservation was made
        in). Default: a new cluster placement group for on-demand EFA nodes, none otherwise.
    :param root_volume_size_gib: Default: by accelerator (:data:`ROOT_VOLUME_GIB`: Neuron 500, NVIDIA 200, CPU 100).
    :param node_role: Default: a new :class:`NodeRole`.
    :param labels: Extra Kubernetes labels. Default: none.
    :param taints: Extra taints (``eks.TaintSpec``), on top of the accelerator's. Default: none.
    :param availability_zone_id: The AZ ID of ``subnet``, checked against the catalog's offerings of the instance type
        (and against the stack's region, when known): an AZ that does not offer the type is refused, one the catalog
        cannot vouch for is a warning. Default: none (an ``ISubnet`` does not tell its AZ ID at synth; no check).
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
        root_volume_size_gib: Optional[int] = None,
        node_role: Optional[iam.IRole] = None,
        labels: Optional[Mapping[str, str]] = None,
        taints: Sequence[eks.TaintSpec] = (),
        availability_zone_id: Optional[str] = None,
        setting_names: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(scope, id_)
        capacity = capacity or NodeCapacity.on_demand()
        known = INSTANCE_CATALOG.get(instance_type) if isinstance(instance_type, str) else None
        if root_volume_size_gib is None:
            root_volume_size_gib = ROOT_VOLUME_GIB[known.accelerator] if known else DEFAULT_ROOT_VOLUME_GIB
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
        check_cluster(problems, "cluster", cluster, "vpc", "cluster_security_group")
        check_implements(problems, "subnet", subnet, ec2.ISubnet, "one ec2.ISubnet (one AZ, as EFA needs)")
        efa_layout = coerce_enum(problems, "efa_layout", efa_layout, EfaLayout)
        if placement_group is not None:
            check_implements(problems, "placement_group", placement_group, ec2.IPlacementGroup, "an IPlacementGroup")
        if node_role is not None:
            check_implements(problems, "node_role", node_role, iam.IRole, "an iam.IRole")
        if labels is not None:
            check_labels(problems, "labels", labels)
        check_taints(problems, taints)
        if instance is not None and availability_zone_id is not None:
            check_offering(problems, self, instance, availability_zone_id)
        elif instance is not None:
            check_region_offering(problems, self, instance)
        problems.raise_if_any()
        if availability_zone_id is None:
            region = Stack.of(self).region
            Annotations.of(self).add_warning_v2(
                "trainium-eks:unverifiedOffering",
                f"No availability_zone_id: the library cannot check that the subnet's AZ offers {instance_type}. "
                "A subnet in an AZ without the type makes every node launch fail about 20 minutes into the deploy. "
                "Pass the subnet's AZ ID, or check with `aws ec2 describe-instance-type-offerings --location-type "
                f"availability-zone-id --filters Name=instance-type,Values={instance_type}"
                + (f" --region {region}`." if is_concrete(region) else "`."),
            )
        assert instance is not None
        self.instance: InstanceFacts = instance
        self.node_count = node_count
        self.min_size = node_count if min_size is None else min_size
        self.max_size = node_count if max_size is None else max_size
        self.efa_layout = efa_layout
        self.subnet = subnet
        self.availability_zone_id = availability_zone_id
        self.capacity = capacity
        self.shared_claims: List[str] = []

        self.security_group = add_node_security_group(self, cluster)

        if capacity.kind is CapacityKind.CAPACITY_BLOCK:
            Annotations.of(self).add_warning_v2(
                "trainium-eks:capacityBlockWindow",
                f"Capacity Block {capacity.reservation_id}: instances launch only inside the block's time window. "
                "Deployed earlier, the node group's launches fail and are retried until the block starts; EKS scales "
                "the group to 0 about 40 minutes before it ends (EKS user guide, capacity-blocks-mng.html).",
            )
        if placement_group is None and needs_placement_group(instance, capacity):
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

        self.labels: Dict[str, str] = training_node_labels(instance, labels)
        self.taints: List[eks.TaintSpec] = training_node_taints(instance, taints)

        self.cluster = cluster
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
        self.usd_per_hour: Optional[float] = priced(
            self,
            f"{node_count} x {instance.name}",
            nodes_usd_per_hour(stack_region(self), instance.name, node_count, root_volume_size_gib),
        )
        """On-demand USD per hour of ``node_count`` nodes with their root volumes in the stack's region, or None
        (with a synth warning) where the catalog has no verified price. Capacity Blocks are paid upfront at their own
        price; the figure is the on-demand one."""
        self._root_volume_size_gib = root_volume_size_gib
        ClusterNodeGroups.of(cluster).add(self.topology)

    @property
    def cost_line(self) -> CostLine:
        """The nodes as a line of the stack's idle cost: a managed node group's nodes run, and bill, whether a job
        runs or not."""
        return CostLine(
            component=NODE_KINDS[self.instance.accelerator],
            quantity=f"{self.node_count} x {self.instance.name} standing, {self._root_volume_size_gib} GiB gp3 each",
            usd_per_hour=self.usd_per_hour,
            idle=True,
        )

    def add_shared_volume(self, claim_name: str) -> None:
        """Record that these nodes can mount the file system behind PersistentVolumeClaim ``claim_name`` (the caller
        has let their security group reach it, e.g. ``LustreStorage.allow_clients``); jobs may then mount it.
        ``claim_name`` is ``ClusterAddons.volume_chart.claim_name``."""
        check_claim_name(f"{self.node.path}.add_shared_volume", claim_name)
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
            taints=kubernetes_taints(self.taints),
            shared_claims=frozenset(self.shared_claims),
        )


def add_node_security_group(scope: Construct, cluster: eks.ICluster) -> ec2.SecurityGroup:
    """The security group of training nodes, built in ``scope`` (ids ``NodeSecurityGroup``, ``EfaSelfEgress``,
    ``FromClusterSecurityGroup``, ``ToClusterSecurityGroup``): self-referencing all-traffic ingress and egress (EFA
    traffic is dropped silently without both), all egress, and all traffic to and from the cluster security group
    (the control plane reaches kubelets and webhooks; pods reach CoreDNS and the services on the system nodes)."""
    group = ec2.SecurityGroup(
        scope,
        "NodeSecurityGroup",
        vpc=cluster.vpc,
        description="Accelerated nodes: EFA self traffic and traffic with the cluster security group",
        allow_all_outbound=True,
    )
    group.add_ingress_rule(group, ec2.Port.all_traffic(), "EFA and pods between nodes")
    # The group already allows all egress, but EFA's documented requirement is an explicit self-referencing
    # egress rule (kept even if the catch-all egress is later narrowed); the L2 drops extra egress rules next
    # to allow_all_outbound, so this one is an L1 resource.
    ec2.CfnSecurityGroupEgress(
        scope,
        "EfaSelfEgress",
        group_id=group.security_group_id,
        destination_security_group_id=group.security_group_id,
        ip_protocol="-1",
        description="EFA and pods between nodes",
    )
    allow_ingress(
        scope,
        "FromClusterSecurityGroup",
        group=group,
        peer=cluster.cluster_security_group,
        port=ec2.Port.all_traffic(),
        description="Control plane (kubelet, webhooks) and pods on nodes of the cluster security group",
    )
    allow_ingress(
        scope,
        "ToClusterSecurityGroup",
        group=cluster.cluster_security_group,
        peer=group,
        port=ec2.Port.all_traffic(),
        description="Accelerated nodes to the API server and system-node pods",
    )
    return group


def check_claim_name(where: str, claim_name: Any) -> None:
    """Raise ``ConfigurationError`` unless ``claim_name`` names a PersistentVolumeClaim (``add_shared_volume``)."""
    problems = Problems(where)
    check_pattern(
        problems,
        "claim_name",
        claim_name,
        DNS1123_SUBDOMAIN,
        "the name of the shared volume's PersistentVolumeClaim: ClusterAddons.volume_chart.claim_name (the claim "
        "of the LustreStorage or EfsStorage given to ClusterAddons as its volume)",
    )
    problems.raise_if_any()


def needs_placement_group(instance: InstanceFacts, capacity: NodeCapacity) -> bool:
    """Whether training nodes get a new cluster placement group: EFA types bought on demand (a reservation's
    instances are placed where the reservation is)."""
    return instance.efa_supported and capacity == NodeCapacity.on_demand()


def training_node_labels(instance: InstanceFacts, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The labels of training nodes of ``instance``: ``trainium-eks/accelerator``, ``vpc.amazonaws.com/efa.present``
    on EFA types (the EFA device plugin's node affinity), ``aws.amazon.com/neuron.present`` on Neuron types, then
    ``extra``."""
    labels: Dict[str, str] = {"trainium-eks/accelerator": instance.accelerator.value}
    if instance.efa_supported:
        labels["vpc.amazonaws.com/efa.present"] = "true"
    if instance.accelerator is Accelerator.NEURON:
        labels["aws.amazon.com/neuron.present"] = "true"
    labels.update(extra or {})
    return labels


def training_node_taints(instance: InstanceFacts, extra: Sequence[eks.TaintSpec] = ()) -> List[eks.TaintSpec]:
    """The taints of training nodes of ``instance``: the accelerator's (none on CPU types), then ``extra``."""
    taints: List[eks.TaintSpec] = list(extra)
    own_taint = accelerator_taint(instance.accelerator)
    if own_taint is not None:
        taints.insert(
            0, eks.TaintSpec(key=own_taint.key, value=own_taint.value, effect=_EKS_TAINT_EFFECTS[own_taint.effect])
        )
    return taints


def kubernetes_taints(taints: Sequence[eks.TaintSpec]) -> Tuple[Taint, ...]:
    """``taints`` in Kubernetes spelling."""
    return tuple(Taint(t.key, t.value, _TAINT_EFFECTS[t.effect]) for t in taints)


NODE_KINDS = {Accelerator.NEURON: "Trainium nodes", Accelerator.NVIDIA: "GPU nodes", Accelerator.NONE: "CPU nodes"}
"""How a stack's cost names training nodes of each accelerator."""

_TAINT_EFFECTS = {
    eks.TaintEffect.NO_SCHEDULE: "NoSchedule",
    eks.TaintEffect.PREFER_NO_SCHEDULE: "PreferNoSchedule",
    eks.TaintEffect.NO_EXECUTE: "NoExecute",
}
_EKS_TAINT_EFFECTS = {kubernetes: effect for effect, kubernetes in _TAINT_EFFECTS.items()}


def check_taints(problems: Problems, taints: Any) -> None:
    """Record a problem for each taint that is not an ``eks.TaintSpec`` with a valid key, value and effect."""
    if not isinstance(taints, (list, tuple)) or not all(isinstance(taint, eks.TaintSpec) for taint in taints):
        problems.add("taints", taints, "a list of eks.TaintSpec")
        return
    for taint in taints:
        check_label_key(problems, "taints key", taint.key)
        if taint.value is not None:
            check_label_value(problems, f"taints[{taint.key!r}] value", taint.value)
        if taint.effect is None:
            problems.add(f"taints[{taint.key!r}] effect", None, "an eks.TaintEffect")


def check_node_group_settings(
    problems: Problems,
    *,
    instance_type: Any,
    node_count: Any,
    min_size: Any = None,
    max_size: Any = None,
    capacity: Any = None,
    root_volume_size_gib: Any = DEFAULT_ROOT_VOLUME_GIB,
) -> Optional[InstanceFacts]:
    """Record every problem of the node-group settings in ``problems``; return the instance facts when known."""
    instance = INSTANCE_CATALOG.get(instance_type) if isinstance(instance_type, str) else None
    if instance is None:
        hint = nearest(instance_type, list(INSTANCE_CATALOG))
        problems.add(
            "instance_type", instance_type, f"an instance type of the catalog{hint}: {', '.join(INSTANCE_CATALOG)}"
        )
    if max_size is not None:
        check_integer(problems, "max_size", max_size, minimum=1, maximum=MAX_NODES_PER_MANAGED_NODE_GROUP)
    ceiling = max_size if is_integer(max_size) and 1 <= max_size <= MAX_NODES_PER_MANAGED_NODE_GROUP else None
    limit = (
        f"{problems.setting_names.get('max_size', 'max_size')}={ceiling}"
        if ceiling
        else f"the EKS limit of {MAX_NODES_PER_MANAGED_NODE_GROUP} nodes per managed node group"
    )
    ceiling = ceiling or MAX_NODES_PER_MANAGED_NODE_GROUP
    if not is_integer(node_count) or not 1 <= node_count <= ceiling:
        problems.add(
            "node_count", node_count, f"an integer from 1 to {ceiling} ({limit}){whole_number_hint(node_count)}"
        )
    elif instance is not None and not collectives_between_nodes(instance) and node_count > 1:
        problems.add(
            "node_count",
            node_count,
            f"{instance.name} has no EFA, so nodes cannot run collectives together: use 1 node, or an EFA type "
            f"({', '.join(_efa_types_like(instance))})",
        )
    if min_size is not None and is_integer(node_count):
        check_integer(problems, "min_size", min_size, minimum=0, maximum=max(node_count, 0))
    check_integer(problems, "root_volume_size_gib", root_volume_size_gib, minimum=20, maximum=16384)
    if capacity is not None and check_instance(
        problems, "capacity", capacity, NodeCapacity, "a NodeCapacity (on_demand(), capacity_block(...), ...)"
    ):
        capacity.check(problems)
    return instance


def check_offering(
    problems: Problems, scope: Construct, instance: InstanceFacts, az_id: Any, warn: bool = True
) -> None:
    """Refuse an AZ ID that the catalog says does not offer ``instance`` (or that is not in the stack's region, when
    the region is known); warn on ``scope`` when the catalog cannot tell (unless ``warn`` is false)."""
    region = Stack.of(scope).region
    az_region = region_of_az_id(az_id) if isinstance(az_id, str) else None
    if az_region is None or (is_concrete(region) and az_region != region):
        ids = AZ_IDS_BY_REGION.get(region, ()) if is_concrete(region) else ()
        known = ", ".join(ids) if is_concrete(region) else "e.g. usw2-az4"
        where = f"region {region}" if is_concrete(region) else "the stack"
        hint = nearest(az_id, ids or [az for ids in AZ_IDS_BY_REGION.values() for az in ids])
        problems.add(
            "availability_zone_id",
            az_id,
            f"an AZ ID of {where}{hint}: {known or 'none the library knows'}{az_name_hint(az_id)}",
        )
        return
    found = offering(instance, az_region, az_id)
    if found is Offering.NOT_OFFERED:
        offered = instance.offered_az_ids.get(az_region)
        where = (
            f"offered in {', '.join(offered)}"
            if offered
            else f"offered in regions {', '.join(instance.offered_az_ids)}"
        )
        problems.add("availability_zone_id", az_id, f"{instance.name} is not offered there; it is {where}")
    elif found is Offering.UNKNOWN and warn:
        Annotations.of(scope).add_warning_v2(
            "trainium-eks:unverifiedOffering",
            f"The catalog does not know whether {az_id} offers {instance.name}; check with `aws ec2 "
            f"describe-instance-type-offerings --location-type availability-zone-id --filters "
            f"Name=instance-type,Values={instance.name} --region {az_region}`.",
        )


def check_region_offering(problems: Problems, scope: Construct, instance: InstanceFacts) -> None:
    """Without an AZ ID, refuse ``instance`` in a stack whose region the catalog knows does not offer it (its offerings
    list every region that does: :func:`~trainium_eks.facts.catalog.offering`); a subnet there could only fail every
    launch. Nothing is said when the region is a token or the catalog knows no offering of the type."""
    region = Stack.of(scope).region
    if is_concrete(region) and instance.offered_az_ids and region not in instance.offered_az_ids:
        problems.add(
            "instance_type",
            instance.name,
            f"a type offered in the stack's region {region}: {instance.name} is offered in regions "
            f"{', '.join(instance.offered_az_ids)}",
        )


def collectives_between_nodes(instance: InstanceFacts) -> bool:
    """Whether several nodes of ``instance`` can train together: accelerated nodes need EFA for their collectives
    (Neuron collectives and NCCL between nodes); CPU nodes train over TCP (gloo), as the Kubeflow workshop does."""
    return instance.efa_supported or instance.accelerator is Accelerator.NONE


def _efa_types_like(instance: InstanceFacts) -> List[str]:
    return [f.name for f in INSTANCE_CATALOG.values() if f.accelerator is instance.accelerator and f.efa_supported]
