"""TrainingNodePool: training nodes that Karpenter launches for a job's pending pods and removes once idle."""

from __future__ import annotations

import hashlib
from typing import Any, Dict, List, Mapping, Optional, Sequence

from aws_cdk import Annotations, Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from trainium_eks.constructs.applied_chart import AppliedChart
from trainium_eks.constructs.cluster_node_groups import ClusterNodeGroups
from trainium_eks.constructs.efa_layout import EfaLayout, karpenter_network_interfaces
from trainium_eks.constructs.karpenter_controller import KarpenterController
from trainium_eks.constructs.node_capacity import CapacityKind, NodeCapacity
from trainium_eks.constructs.training_node_group import (
    DEFAULT_INSTANCE_TYPE,
    DEFAULT_NODE_COUNT,
    DEFAULT_ROOT_VOLUME_GIB,
    NODE_KINDS,
    ROOT_VOLUME_GIB,
    add_node_security_group,
    check_claim_name,
    check_node_group_settings,
    check_offering,
    check_region_offering,
    check_taints,
    kubernetes_taints,
    needs_placement_group,
    training_node_labels,
    training_node_taints,
)
from trainium_eks.core.cost import CostLine, nodes_usd_per_hour, priced, stack_region
from trainium_eks.core.validation import (
    Problems,
    check_cluster,
    check_implements,
    check_instance,
    check_labels,
    coerce_enum,
)
from trainium_eks.facts.catalog import INSTANCE_CATALOG, InstanceFacts
from trainium_eks.manifests.addons.karpenter_node_pool import KarpenterNodePoolChart
from trainium_eks.manifests.jobs.topology import NodeGroupTopology

DEFAULT_IDLE_TIMEOUT = Duration.minutes(10)
"""How long a node of a :class:`TrainingNodePool` stays without pods (but DaemonSets') before Karpenter removes it:
long enough for the next job of a sequence to find the nodes warm (a release Job creates it within a minute of its
predecessor's end), short enough that an idle trn1.32xlarge bills at most about 3.60 USD after a run."""

KARPENTER_LABEL_DOMAINS = ("karpenter.sh", "karpenter.k8s.aws")
"""Label domains Karpenter keeps for itself: a NodePool whose template labels use them is refused
(kubernetes-sigs/karpenter v1.14.1 ``pkg/apis/v1/labels.go`` ``RestrictedLabelDomains``: karpenter.sh;
aws/karpenter-provider-aws v1.14.1 ``pkg/apis/v1/labels.go`` adds karpenter.k8s.aws)."""

MIN_IDLE_TIMEOUT = Duration.minutes(1)
MAX_IDLE_TIMEOUT = Duration.hours(24)
"""The idle timeouts a pool takes: below a minute, a node may go between two jobs of one sequence; above a day, the
pool is a fixed node group that bills while idle, which ``provisioning="node-group"`` says more plainly."""


class TrainingNodePool(Construct):
    """Training nodes on demand: a Karpenter ``EC2NodeClass`` and ``NodePool`` that launch nodes of one instance
    type in one subnet when pods that need them are pending, and remove them after ``idle_timeout`` without pods.

    Built from the same facts and code as :class:`~trainium_eks.constructs.training_node_group.TrainingNodeGroup`:
    the catalog's instance type, the node security group (EFA self traffic, the cluster security group), a cluster
    placement group for EFA types on demand, one EFA device on every network card in the :class:`EfaLayout`
    (:func:`~trainium_eks.constructs.efa_layout.karpenter_network_interfaces`: 8 on trn1.32xlarge, 16 on
    trn1n.32xlarge and trn2.48xlarge), the accelerator's labels and taint, IMDSv2 with hop limit 1
    (``IMDS_HOP_LIMIT``), an encrypted gp3
    root volume sized per accelerator, the AL2023 AMI of the accelerator at a pinned release
    (:data:`~trainium_eks.facts.versions.EKS_AMI_RELEASE`), the AZ by ID and the capacity (:class:`NodeCapacity`: a
    Capacity Block or an ODCR becomes ``capacityReservationSelectorTerms`` with ``karpenter.sh/capacity-type:
    reserved``; Karpenter launches into a block only while it is active and drains its nodes 40 minutes before the
    block ends, 10 minutes before EC2 begins terminating them: aws/karpenter-provider-aws v1.14.1
    ``pkg/apis/v1/ec2nodeclass_status.go``, ``capacityReservationExpirationPeriod``).

    What a job sees (:attr:`topology`) is the same as for a node group of ``node_count`` nodes: jobs size their gangs
    by it. Karpenter launches at most ``max_nodes``; a node that runs a job's pod is never removed as empty, drift
    (a new AMI pin) never drains a busy node, and nodes do not expire (:class:`KarpenterNodePoolChart`).

    The pool's objects are applied after ``controller.ready`` and deleted before the controller: on ``cdk destroy``
    the EC2NodeClass's finalizer holds ``kubectl delete`` until Karpenter has terminated the pool's instances.

    :param cluster: The EKS cluster. Required.
    :param subnet: The one subnet of the nodes. Required.
    :param controller: The cluster's :class:`KarpenterController`. Required.
    :param instance_type: A type of :mod:`trainium_eks.facts.catalog`. Default: ``trn1.32xlarge``.
    :param node_count: The nodes a job of the pool runs on (what :attr:`topology` tells the jobs). Default: 2.
    :param max_nodes: The most nodes the pool runs at once. Default: ``node_count``.
    :param idle_timeout: Default: :data:`DEFAULT_IDLE_TIMEOUT` (10 minutes); from 1 minute to 24 hours.
    :param efa_layout: Default: ``EfaLayout.IP_OPTIMIZED``.
    :param capacity: Default: ``NodeCapacity.on_demand()``.
    :param placement_group: An existing placement group. Default: a new cluster placement group for on-demand EFA
        types, none otherwise.
    :param root_volume_size_gib: Default: by accelerator (Neuron 500, NVIDIA 200, CPU 100).
    :param labels: Extra Kubernetes labels. Default: none.
    :param taints: Extra taints (``eks.TaintSpec``), after the accelerator's. Default: none.
    :param availability_zone_id: The subnet's AZ ID: a NodePool requirement and checked against the catalog's
        offerings. Default: none (the subnet alone pins the zone; no check).
    :param setting_names: Names of the settings in error messages. Default: the parameter names.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster: eks.ICluster,
        subnet: ec2.ISubnet,
        controller: KarpenterController,
        instance_type: str = DEFAULT_INSTANCE_TYPE,
        node_count: int = DEFAULT_NODE_COUNT,
        max_nodes: Optional[int] = None,
        idle_timeout: Duration = DEFAULT_IDLE_TIMEOUT,
        efa_layout: EfaLayout = EfaLayout.IP_OPTIMIZED,
        capacity: Optional[NodeCapacity] = None,
        placement_group: Optional[ec2.IPlacementGroup] = None,
        root_volume_size_gib: Optional[int] = None,
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
        instance = check_node_pool_settings(
            problems,
            instance_type=instance_type,
            node_count=node_count,
            max_nodes=max_nodes,
            idle_timeout=idle_timeout,
            capacity=capacity,
            root_volume_size_gib=root_volume_size_gib,
        )
        check_cluster(problems, "cluster", cluster, "vpc", "cluster_security_group", "kubectl_provider")
        check_implements(problems, "subnet", subnet, ec2.ISubnet, "one ec2.ISubnet (one AZ, as EFA needs)")
        check_instance(
            problems,
            "controller",
            controller,
            KarpenterController,
            "the cluster's KarpenterController, which launches the pool's nodes: build one with "
            "KarpenterController(scope, id, cluster=..., after=[training_cluster.system_nodegroup]) and pass it",
        )
        efa_layout = coerce_enum(problems, "efa_layout", efa_layout, EfaLayout)
        if placement_group is not None:
            check_implements(problems, "placement_group", placement_group, ec2.IPlacementGroup, "an IPlacementGroup")
        if labels is not None and check_labels(problems, "labels", labels):
            for key in labels:
                domain = key.split("/", 1)[0] if "/" in key else ""
                if any(domain == own or domain.endswith("." + own) for own in KARPENTER_LABEL_DOMAINS):
                    problems.add(f"labels[{key!r}]", labels[key], "a label outside karpenter.sh and karpenter.k8s.aws")
        check_taints(problems, taints)
        if instance is not None and availability_zone_id is not None:
            check_offering(problems, self, instance, availability_zone_id)
        elif instance is not None:
            check_region_offering(problems, self, instance)
        problems.raise_if_any()
        if availability_zone_id is None:
            Annotations.of(self).add_warning_v2(
                "trainium-eks:unverifiedOffering",
                f"No availability_zone_id: the library cannot check that the subnet's AZ offers {instance_type}. "
                "Karpenter cannot launch a type the AZ does not offer, and the jobs then stay Pending. Pass the "
                "subnet's AZ ID.",
            )
        assert instance is not None and efa_layout is not None
        self.instance: InstanceFacts = instance
        self.node_count = node_count
        self.max_nodes = node_count if max_nodes is None else max_nodes
        self.idle_timeout = idle_timeout
        self.efa_layout = efa_layout
        self.subnet = subnet
        self.availability_zone_id = availability_zone_id
        self.capacity = capacity
        self.cluster = cluster
        self.shared_claims: List[str] = []

        self.security_group = add_node_security_group(self, cluster)
        if capacity.kind is CapacityKind.CAPACITY_BLOCK:
            Annotations.of(self).add_warning_v2(
                "trainium-eks:capacityBlockWindow",
                f"Capacity Block {capacity.reservation_id}: Karpenter launches its instances only while the block is "
                "active, and drains them 40 minutes before the block ends (EC2 terminates them from 30 minutes "
                "before; Karpenter docs, 'Capacity Reservations'); a job pending outside the window waits for it, and "
                "a run must end, or checkpoint, before the drain.",
            )
        if placement_group is None and needs_placement_group(instance, capacity):
            placement_group = ec2.PlacementGroup(self, "PlacementGroup", strategy=ec2.PlacementGroupStrategy.CLUSTER)
        self.placement_group = placement_group

        interfaces = karpenter_network_interfaces(instance, efa_layout)
        self.efa_interfaces = (
            sum(1 for i in interfaces if i["interfaceType"] == "efa-only")
            if interfaces is not None
            else instance.efa_interfaces
        )
        """EFA devices of a node: one per ``efa-only`` entry, or (``ALL_EFA``) the type's maximum, which Karpenter
        attaches when the pods ask for EFA (``pkg/providers/instance/instance.go`` ``getEFACountForInstance``)."""
        self.labels: Dict[str, str] = training_node_labels(instance, labels)
        self.taints: List[eks.TaintSpec] = training_node_taints(instance, taints)
        self.chart = KarpenterNodePoolChart(
            name=_pool_name(self, instance.name),
            instance=instance,
            availability_zone_id=availability_zone_id,
            subnet_id=subnet.subnet_id,
            security_group_ids=[self.security_group.security_group_id],
            node_role_name=controller.node_role.role_name,
            max_nodes=self.max_nodes,
            idle_after=int(idle_timeout.to_seconds()),
            root_volume_gib=root_volume_size_gib,
            labels=self.labels,
            taints=kubernetes_taints(self.taints),
            network_interfaces=interfaces,
            placement_group_name=placement_group.placement_group_name if placement_group else None,
            reservation_ids=[capacity.reservation_id] if capacity.reservation_id else [],
            tags={"Name": self.node.path},
        )
        self.applied = AppliedChart(self, "NodePool", cluster=cluster, chart=self.chart, after=controller.ready)
        for pool in self.applied.of_kind("NodePool"):
            pool.node.add_dependency(*self.applied.of_kind("EC2NodeClass"))
        self.usd_per_hour: Optional[float] = priced(
            self,
            f"{node_count} x {instance.name}",
            nodes_usd_per_hour(stack_region(self), instance.name, node_count, root_volume_size_gib),
        )
        """On-demand USD per hour of ``node_count`` nodes with their root volumes while a job runs (nothing while
        none does), or None (with a synth warning) where the catalog has no verified price."""
        self._root_volume_size_gib = root_volume_size_gib
        ClusterNodeGroups.of(cluster).add(self.topology)

    @property
    def pool_name(self) -> str:
        """Name of the NodePool and EC2NodeClass."""
        return self.chart.pool_name

    @property
    def cost_line(self) -> CostLine:
        """The nodes as a line of the stack's cost: what a running job adds; nothing while idle."""
        return CostLine(
            component=NODE_KINDS[self.instance.accelerator],
            quantity=f"{self.node_count} x {self.instance.name} while a job runs, {self._root_volume_size_gib} GiB "
            "gp3 each",
            usd_per_hour=self.usd_per_hour,
            idle=False,
            tail_hours=self.idle_timeout.to_seconds() / 3600,
        )

    def add_shared_volume(self, claim_name: str) -> None:
        """Record that these nodes can mount the file system behind PersistentVolumeClaim ``claim_name``
        (``ClusterAddons.volume_chart.claim_name``)."""
        check_claim_name(f"{self.node.path}.add_shared_volume", claim_name)
        if claim_name not in self.shared_claims:
            self.shared_claims.append(claim_name)

    @property
    def topology(self) -> NodeGroupTopology:
        """The nodes as a job sees them: instance type, the job's node count, EFA devices, taints, shared claims."""
        return NodeGroupTopology(
            instance_type=self.instance.name,
            node_count=self.node_count,
            max_nodes=self.max_nodes,
            efa_interfaces=self.efa_interfaces,
            taints=kubernetes_taints(self.taints),
            shared_claims=frozenset(self.shared_claims),
            launched_for_pods=True,
            node_pool=self.pool_name,
        )


def _pool_name(scope: Construct, instance_type: str) -> str:
    """A DNS label for the pool, unique in the cluster (two stacks never share one): the construct's id, lower-cased,
    and 8 hex characters of a hash of its address and instance type. Another instance type is another pool:
    CloudFormation creates it, with the jobs for the new type, then deletes the old one, whose nodes Karpenter
    terminates at once (a NodePool owns its NodeClaims: kubernetes-sigs/karpenter v1.14.1
    ``pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go``). Renamed in place, the pool would keep the old
    type's nodes until they had been empty for the idle timeout (its drift budget is 0), counted against its limits,
    so that the new type's gang could not launch until then."""
    base = "".join(c if c.isalnum() else "-" for c in scope.node.id.lower()).strip("-")[:40] or "pool"
    return f"{base}-{hashlib.sha256(f'{scope.node.addr}/{instance_type}'.encode()).hexdigest()[:8]}"


_NODE_GROUP_SETTINGS = ("instance_type", "node_count", "capacity", "root_volume_size_gib")


def check_node_pool_settings(
    problems: Problems,
    *,
    instance_type: Any,
    node_count: Any,
    max_nodes: Any = None,
    idle_timeout: Any = DEFAULT_IDLE_TIMEOUT,
    capacity: Any = None,
    root_volume_size_gib: Any = DEFAULT_ROOT_VOLUME_GIB,
) -> Optional[InstanceFacts]:
    """Record every problem of a node pool's settings in ``problems`` (those of a node group, with ``max_nodes``
    for ``max_size``, and the idle timeout); return the instance facts when known."""
    instance = check_node_group_settings(
        problems.renamed({**{name: name for name in _NODE_GROUP_SETTINGS}, "max_size": "max_nodes"}),
        instance_type=instance_type,
        node_count=node_count,
        max_size=max_nodes,
        capacity=capacity,
        root_volume_size_gib=root_volume_size_gib,
    )
    check_idle_timeout(problems, idle_timeout)
    return instance


def check_idle_timeout(problems: Problems, idle_timeout: Any) -> None:
    """Record a problem when ``idle_timeout`` is not a Duration from :data:`MIN_IDLE_TIMEOUT` to
    :data:`MAX_IDLE_TIMEOUT` in whole seconds."""
    if not check_instance(problems, "idle_timeout", idle_timeout, Duration, "a Duration (Duration.minutes(10))"):
        return
    seconds = idle_timeout.to_seconds()
    if not MIN_IDLE_TIMEOUT.to_seconds() <= seconds <= MAX_IDLE_TIMEOUT.to_seconds():
        problems.add("idle_timeout", f"{seconds:g} s", "from 1 minute to 24 hours")
