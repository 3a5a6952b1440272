"""TrainingClusterStack: what the app's three stacks share, built the same way and with the same construct ids."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from aws_cdk import Annotations, CfnOutput, Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from trainium_eks.constructs.cluster import DEFAULT_NETWORK_POLICY_MODE, TrainingCluster
from trainium_eks.constructs.cluster_addons import ClusterAddons
from trainium_eks.constructs.dns_firewall import DnsFirewall, DnsFirewallMode
from trainium_eks.constructs.image_repository import TrainingImageRepository
from trainium_eks.constructs.job_sequence import JobSequence
from trainium_eks.constructs.karpenter_controller import KarpenterController
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.constructs.node_provisioning import NodeProvisioning
from trainium_eks.constructs.preflight import Preflight
from trainium_eks.constructs.training_dashboard import TrainingDashboard
from trainium_eks.constructs.training_node_group import (
    TrainingNodeGroup,
    check_node_group_settings,
    check_offering,
)
from trainium_eks.constructs.training_node_pool import TrainingNodePool
from trainium_eks.constructs.training_pod_identity import TrainingPodIdentity
from trainium_eks.core.conventions import EfsVolumeSource, LustreVolumeSource
from trainium_eks.core.cost import CostLine, add_cost_outputs
from trainium_eks.core.template_limits import check_template_sizes
from trainium_eks.core.validation import Problems, check_stack_props
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import INSTANCE_CATALOG, Accelerator, InstanceFacts
from trainium_eks.stacks.cluster_stack_props import DEFAULT_AZ_ID, ClusterStackProps


@dataclass(frozen=True)
class NodeTypes:
    """The instance types a node group of a stack takes: those of the catalog with one of ``accelerators``; ``why``
    tells the user why another is refused (the message lists the allowed types after it)."""

    accelerators: Tuple[Accelerator, ...]
    why: str

    def allowed(self) -> List[str]:
        """The catalog's types with one of :attr:`accelerators`."""
        return [name for name, facts in INSTANCE_CATALOG.items() if facts.accelerator in self.accelerators]

    def accepts(self, problems: Problems, setting: str, instance: InstanceFacts) -> bool:
        """Whether ``instance`` is of these types; when it is not, the problem is recorded under ``setting``."""
        if instance.accelerator in self.accelerators:
            return True
        problems.add(setting, instance.name, f"{self.why}: {', '.join(self.allowed())}")
        return False


TrainingNodes = Union[TrainingNodeGroup, TrainingNodePool]
"""A stack's training nodes, as its ``provisioning`` builds them: both kinds have ``security_group``, ``topology``,
``cost_line`` and ``add_shared_volume``."""


OPEN_TO_ALL = "0.0.0.0/0"
"""The CIDR block of every IPv4 address: a public endpoint's range when a stack needs one and none is set."""

EXPECTED_EFS_GB = 1.0
"""What the cost figures assume an EFS volume of the app's stacks holds: CIFAR-10 (0.18 GB extracted) with checkpoints
and outputs, rounded up. EFS bills what is stored, not a size."""


class TrainingClusterStack(Stack):
    """Base of the app's stacks (``TrainiumEksStack``, ``KubeflowTrainingStack``, ``ComposerTrainingStack``): one EKS
    training system per stack, built from the library's constructs with the same construct ids in each, so that a
    fix reaches every stack and no stack changes the logical IDs of another's resources.

    A subclass checks all of its settings (its own into :attr:`setting_problems`, its node groups with
    :meth:`check_node_group`, then ``raise_if_any``) before it builds anything, then builds in this order:
    :meth:`build_network`, :meth:`build_cluster`, its node groups (:meth:`build_node_group`),
    :meth:`build_pod_identity`, its storage, :meth:`build_in_cluster` (add-ons, image repository, job sequence,
    dashboard), its jobs, :meth:`record_costs`, :meth:`build_outputs` (which builds the preflight last).

    The stack registers :func:`~trainium_eks.core.template_limits.check_template_sizes` (CloudFormation's template size
    limit, checked at synth).

    The props of :class:`~trainium_eks.stacks.cluster_stack_props.ClusterStackProps` (``availability_zone_id``,
    ``kubernetes_version``, ``admin_role_arn``, ``vpc``, ``node_subnet``, ``image_directory``, ``image_build_args``,
    ``seed_jobs``, ``provisioning``, ``idle_timeout``, ``preflight``, ``public_endpoint_cidrs``, ``dns_firewall``,
    ``dns_allowed_domains``, ``kubectl_invocation_alarm``, ``network_policy_mode``, ``setting_names``) are
    every stack's, documented and checked
    there once: :attr:`props` holds them and :attr:`setting_problems` their problems, to which a subclass adds its own
    before it raises them.

    :param stack_props: Passed to ``Stack`` (``env``, ``description``, ...).
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        availability_zone_id: str = DEFAULT_AZ_ID,
        kubernetes_version: str = versions.DEFAULT_KUBERNETES_VERSION,
        admin_role_arn: Optional[str] = None,
        vpc: Optional[ec2.IVpc] = None,
        node_subnet: Optional[ec2.ISubnet] = None,
        image_directory: Optional[str] = None,
        image_build_args: Optional[Mapping[str, str]] = None,
        seed_jobs: bool = True,
        provisioning: NodeProvisioning = NodeProvisioning.KARPENTER,
        idle_timeout: Optional[Duration] = None,
        preflight: bool = True,
        public_endpoint_cidrs: Optional[Sequence[str]] = None,
        dns_firewall: DnsFirewallMode = DnsFirewallMode.BLOCK,
        dns_allowed_domains: Sequence[str] = (),
        kubectl_invocation_alarm: bool = False,
        network_policy_mode: str = DEFAULT_NETWORK_POLICY_MODE,
        setting_names: Optional[Mapping[str, str]] = None,
        **stack_props: Any,
    ) -> None:
        check_stack_props(id_, stack_props, self._own_props())
        super().__init__(scope, id_, **stack_props)
        check_template_sizes(self)
        self.props = ClusterStackProps(
            availability_zone_id=availability_zone_id,
            kubernetes_version=kubernetes_version,
            admin_role_arn=admin_role_arn,
            vpc=vpc,
            node_subnet=node_subnet,
            image_directory=image_directory,
            image_build_args=image_build_args,
            seed_jobs=seed_jobs,
            provisioning=provisioning,
            idle_timeout=idle_timeout,
            preflight=preflight,
            public_endpoint_cidrs=public_endpoint_cidrs,
            dns_firewall=dns_firewall,
            dns_allowed_domains=dns_allowed_domains,
            kubectl_invocation_alarm=kubectl_invocation_alarm,
            network_policy_mode=network_policy_mode,
            setting_names=setting_names,
        )
        self.setting_names = dict(setting_names or {})
        self.setting_problems = self.problems()
        """The problems of the stack's settings: those of :attr:`props`, then the subclass's own."""
        self.props.check(self.setting_problems, region=self.region)
        self.network: Optional[TrainingNetwork] = None
        self.dns_firewall: Optional[DnsFirewall] = None
        """The DNS firewall of the stack's own network (id ``DnsFirewall``), unless ``dns_firewall`` is off."""
        self.karpenter: Optional[KarpenterController] = None
        """The cluster's Karpenter (id ``Karpenter``), built with the first node pool."""
        self.cost_lines: List[CostLine] = []
        """What the stack costs per hour, by component (:class:`~trainium_eks.core.cost.CostLine`), filled by the
        subclass; the ``python -m trainium_eks cost`` command and the stack's cost outputs read it."""

    @classmethod
    def _own_props(cls) -> List[str]:
        """The keyword props of this stack's class and of the stack classes it extends, for the nearest name of one
        it does not take."""
        return list(
            dict.fromkeys(
                parameter.name
                for klass in cls.__mro__
                if isinstance(klass, type) and issubclass(klass, TrainingClusterStack)
                for parameter in inspect.signature(klass.__init__).parameters.values()
                if parameter.kind is parameter.KEYWORD_ONLY and parameter.name != "setting_names"
            )
        )

    def problems(self) -> Problems:
        """A collector for this stack's settings, named as the app names them."""
        return Problems(self.node.path, setting_names=self.setting_names)

    def check_node_group(
        self,
        problems: Problems,
        *,
        instance_type: Any,
        node_count: Any,
        availability_zone_id: Any,
        types: Optional[NodeTypes],
        prefix: str = "",
        **settings: Any,
    ) -> Optional[InstanceFacts]:
        """Check the settings of one of the stack's node groups (props ``<prefix>instance_type``,
        ``<prefix>node_count`` and ``settings`` such as ``capacity``): the type is in the catalog and of ``types``
        (None: any), the count fits it, ``availability_zone_id`` offers it. Return the instance facts when usable."""
        named = problems.renamed(self.node_group_names(prefix))
        instance = check_node_group_settings(named, instance_type=instance_type, node_count=node_count, **settings)
        if instance is None or (types is not None and not types.accepts(named, "instance_type", instance)):
            return None
        check_offering(named, self, instance, availability_zone_id, warn=False)
        return instance

    def node_group_names(self, prefix: str) -> Dict[str, str]:
        """How a node group's props are called in this stack's messages: ``instance_type`` is ``<prefix>instance_type``
        (and then the app's context key)."""
        own = {
            "instance_type": f"{prefix}instance_type",
            "node_count": f"{prefix}node_count",
            "availability_zone_id": "availability_zone_id",
        }
        return {prop: self.setting_names.get(name, name) for prop, name in own.items()}

    def build_network(self) -> Tuple[ec2.IVpc, ec2.ISubnet]:
        """The VPC and the one subnet of the training nodes: those of :attr:`props`, or a new
        :class:`TrainingNetwork` (id ``Network``) whose node subnet lies in ``availability_zone_id``, with its
        :class:`DnsFirewall` (id ``DnsFirewall``, over the private subnets and the node subnet) unless
        :attr:`props`' ``dns_firewall`` is off."""
        if self.props.vpc is not None and self.props.node_subnet is not None:
            return self.props.vpc, self.props.node_subnet
        self.network = network = TrainingNetwork(self, "Network", node_az_id=self.props.availability_zone_id)
        mode = DnsFirewallMode(self.props.dns_firewall)
        if mode is not DnsFirewallMode.OFF:
            self.dns_firewall = DnsFirewall(
                self,
                "DnsFirewall",
                vpc=network.vpc,
                extra_domains=self.props.dns_allowed_domains,
                mode=mode,
                subnets=[*network.vpc.private_subnets, network.node_subnet],
            )
        return network.vpc, network.node_subnet

    def build_cluster(
        self,
        *,
        vpc: ec2.IVpc,
        fsx_csi_driver: bool = False,
        efs_csi_driver: bool = False,
        public_endpoint_for: Optional[str] = None,
    ) -> TrainingCluster:
        """The :class:`TrainingCluster` (id ``Cluster``) of :attr:`props`' Kubernetes version and admin, with the CSI
        driver of the stack's file system (``fsx_csi_driver`` or ``efs_csi_driver``), its API
        endpoint private unless :attr:`props`' ``public_endpoint_cidrs`` admits CIDR blocks to a public one. A stack in
        which something needs a public endpoint names it in ``public_endpoint_for``: without CIDR blocks set, its public
        endpoint then admits every address (:data:`OPEN_TO_ALL`), with the warning ``trainium-eks:publicEndpointOpen``
        that says why and which setting restricts it."""
        cidrs = list(self.props.public_endpoint_cidrs or [])
        if public_endpoint_for and not cidrs:
            cidrs = [OPEN_TO_ALL]
            setting = self.setting_names.get("public_endpoint_cidrs", "public_endpoint_cidrs")
            Annotations.of(self).add_warning_v2(
                "trainium-eks:publicEndpointOpen",
                f"The cluster's API endpoint is public to every address because {public_endpoint_for} needs a public "
                f"endpoint and {setting} is not set. Requests still need IAM credentials of an access entry. Set "
                f"{setting} to your CIDR blocks to restrict it, or to {OPEN_TO_ALL} to keep it open without this "
                "warning.",
            )
        self.cluster = TrainingCluster(
            self,
            "Cluster",
            vpc=vpc,
            kubernetes_version=self.props.kubernetes_version,
            admin_role_arn=self.props.admin_role_arn or None,
            fsx_csi_driver=fsx_csi_driver,
            efs_csi_driver=efs_csi_driver,
            public_endpoint_cidrs=cidrs,
            invocation_alarm=self.props.kubectl_invocation_alarm,
            network_policy_mode=self.props.network_policy_mode,
            setting_names=self.setting_names,
        )
        return self.cluster

    def build_node_group(self, id_: str, *, subnet: ec2.ISubnet, prefix: str = "", **props: Any) -> TrainingNodes:
        """The training nodes ``id_`` of the cluster in ``subnet`` (of :attr:`props`' AZ), as :attr:`props`'
        ``provisioning`` says: a :class:`TrainingNodePool` (Karpenter, built with the first pool as
        :attr:`karpenter`, id ``Karpenter``) or a :class:`TrainingNodeGroup` with the cluster's node role, joined after
        the VPC CNI add-on. Their settings are named as the stack names ``<prefix>instance_type`` and
        ``<prefix>node_count``; ``props`` go to the pool or group (``instance_type``, ``node_count``, ...). The
        construct id is the same either way, so the node security group and placement group keep their logical IDs
        when a stack switches."""
        names = self.node_group_names(prefix)
        if self.props.provisioning is NodeProvisioning.KARPENTER:
            if self.karpenter is None:
                self.karpenter = KarpenterController(
                    self,
                    "Karpenter",
                    cluster=self.cluster.cluster,
                    after=[
                        *self.cluster.system_workloads_after,
                        self.cluster.addons["vpc-cni"],
                        self.cluster.addons["eks-pod-identity-agent"],
                    ],
                )
            return TrainingNodePool(
                self,
                id_,
                cluster=self.cluster.cluster,
                subnet=subnet,
                controller=self.karpenter,
                availability_zone_id=self.props.availability_zone_id,
                idle_timeout=self.props.node_idle_timeout,
                setting_names=names,
                **props,
            )
        group = TrainingNodeGroup(
            self,
            id_,
            cluster=self.cluster.cluster,
            subnet=subnet,
            availability_zone_id=self.props.availability_zone_id,
            node_role=self.cluster.node_role,
            setting_names=names,
            **props,
        )
        group.nodegroup.node.add_dependency(self.cluster.addons["vpc-cni"])
        return group

    def build_pod_identity(
        self, *, data_bucket_name: Optional[str] = None, read_prefix: str = "", write_prefix: Optional[str] = None
    ) -> TrainingPodIdentity:
        """The jobs' service account and role (:class:`TrainingPodIdentity`, id ``TrainingIdentity``), allowed to read
        ``data_bucket_name`` below ``read_prefix`` and ``write_prefix``, and to write below ``write_prefix``, when
        given; only through the S3 endpoint of the stack's own :class:`TrainingNetwork`, when it built one."""
        self.data_bucket = (
            s3.Bucket.from_bucket_name(self, "DataBucket", data_bucket_name) if data_bucket_name else None
        )
        self.training_identity = TrainingPodIdentity(
            self,
            "TrainingIdentity",
            cluster=self.cluster.cluster,
            data_bucket=self.data_bucket,
            data_read_prefix=read_prefix,
            data_write_prefix=write_prefix,
            data_bucket_endpoint=self.network.s3_endpoint if self.network is not None else None,
        )
        return self.training_identity

    def build_in_cluster(
        self,
        *,
        volume: Union[LustreVolumeSource, EfsVolumeSource],
        job_prerequisites: Sequence[IConstruct] = (),
    ) -> None:
        """The in-cluster add-ons on the shared ``volume`` (:class:`ClusterAddons`, id ``Addons``: the device plugins
        the stack's node groups need, Volcano and its queue, ...), the image repository of :attr:`props`' image
        (:class:`TrainingImageRepository`, id ``Images``), the jobs (:class:`JobSequence`, id ``Jobs``, after the
        add-ons' prerequisites and ``job_prerequisites``) and the dashboard (id ``Dashboard``)."""
        self.addons = ClusterAddons(
            self,
            "Addons",
            cluster=self.cluster.cluster,
            volume=volume,
            namespace=self.training_identity.namespace,
            service_account=self.training_identity.service_account,
            after_nodes=self.cluster.system_workloads_after,
        )
        self.images = TrainingImageRepository(
            self, "Images", image_directory=self.props.image_directory, build_args=self.props.image_build_args
        )
        self.jobs = JobSequence(
            self,
            "Jobs",
            cluster=self.cluster.cluster,
            prerequisites=[*self.addons.job_prerequisites, *job_prerequisites],
            access_prerequisites=self.addons.training_namespace.of_kind("Namespace"),
        )
        self.dashboard = TrainingDashboard(self, "Dashboard", cluster_name=self.cluster.cluster.cluster_name)

    def record_costs(self, *lines: CostLine) -> None:
        """Record what the stack costs: the cluster's control plane and system nodes, the network's NAT gateways (when
        the stack built the network) and ``lines`` (storage, node groups)."""
        network = [self.network.cost_line] if self.network is not None else []
        self.cost_lines.extend([*self.cluster.cost_lines, *network, *lines])

    def build_outputs(self, **outputs: str) -> None:
        """The outputs every stack has (cluster name and the ``aws eks update-kubeconfig`` command, dashboard, image
        repository, cost per hour; the invocation alarm's topic when there is one) and ``outputs`` (id -> value);
        then, with :attr:`props`' ``preflight``, the :class:`Preflight` (id ``Preflight``, :attr:`preflight`), last,
        since it reads what the stack launches and comes before every other resource."""
        for id_, value in outputs.items():
            CfnOutput(self, id_, value=value)
        cluster_name = self.cluster.cluster.cluster_name
        CfnOutput(self, "ClusterName", value=cluster_name)
        CfnOutput(
            self,
            "UpdateKubeconfigCommand",
            value=f"aws eks update-kubeconfig --name {cluster_name} --region {self.region}",
            description="Run it with adminRoleArn's credentials: EKS makes only that role and the CloudFormation role "
            "that created the cluster cluster-admin. kubectl then reaches the API from inside the VPC, or from the "
            "CIDR blocks of publicEndpointCidrs",
        )
        CfnOutput(self, "DashboardName", value=self.dashboard.dashboard.dashboard_name)
        CfnOutput(self, "ImageRepositoryUri", value=self.images.repository.repository_uri)
        if self.cluster.invocation_alarm is not None:
            CfnOutput(
                self,
                "KubectlInvocationAlarmTopic",
                value=self.cluster.invocation_alarm.topic.topic_arn,
                description="Subscribe to it (aws sns subscribe --topic-arn <arn> --protocol email --notification-"
                "endpoint <you>): it tells of invocations of the kubectl provider's functions by others",
            )
        add_cost_outputs(self, self.cost_lines)
        self.preflight: Optional[Preflight] = Preflight(self, "Preflight") if self.props.preflight else None
