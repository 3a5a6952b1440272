"""ClusterStackProps: the props every stack of the library takes, with one meaning, one default and one check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from aws_cdk import Duration
from aws_cdk import aws_ec2 as ec2

from trainium_eks.constructs.cluster import DEFAULT_NETWORK_POLICY_MODE, NETWORK_POLICY_MODES, check_cluster_settings
from trainium_eks.constructs.dns_firewall import DnsFirewallMode, check_domains
from trainium_eks.constructs.node_provisioning import NodeProvisioning
from trainium_eks.constructs.training_node_pool import DEFAULT_IDLE_TIMEOUT, check_idle_timeout
from trainium_eks.core.validation import (
    Problems,
    check_bool,
    check_image_directory,
    check_implements,
    check_string_map,
    coerce_enum,
)
from trainium_eks.facts import versions
from trainium_eks.facts.regions import NODE_AZ_ID_BY_REGION

DEFAULT_AZ_ID = NODE_AZ_ID_BY_REGION["us-west-2"]
"""AZ ID of every stack's node subnet by default: the Trainium AZ of us-west-2
(:data:`~trainium_eks.facts.regions.NODE_AZ_ID_BY_REGION`), so that a Trainium group fits in any of the stacks. The
catalog does not know which us-west-2 AZs offer the m and g types: synth warns for those."""


@dataclass(frozen=True)
class ClusterStackProps:
    """The props every stack of the library takes (``TrainiumEksStack``, ``KubeflowTrainingStack``,
    ``ComposerTrainingStack``), besides its own; each stack passes them to
    :class:`~trainium_eks.stacks.training_cluster_stack.TrainingClusterStack`, which checks them once.

    :param availability_zone_id: AZ ID of the stack's node groups (and of a file system in one AZ). Default:
        :data:`DEFAULT_AZ_ID`.
    :param kubernetes_version: Default: :data:`trainium_eks.facts.versions.DEFAULT_KUBERNETES_VERSION`.
    :param admin_role_arn: IAM role (or user) given cluster-admin through an EKS access entry. Default: none.
    :param vpc: An existing VPC, with ``node_subnet``. Default: a new
        :class:`~trainium_eks.constructs.network.TrainingNetwork`.
    :param node_subnet: The subnet of the stack's node groups in ``vpc``; it must lie in ``availability_zone_id``.
        Default: the new network's node subnet.
    :param image_directory: A directory with the training image's Dockerfile, built at deploy time. Default: none
        (then no seed run).
    :param image_build_args: Its Docker build arguments. Default: none.
    :param seed_jobs: With ``image_directory``, run the stack's seed workload (each stack says which). Default: true.
    :param provisioning: How the training nodes are provisioned (:class:`NodeProvisioning`). Default:
        ``NodeProvisioning.KARPENTER`` (launched for pending jobs, removed once idle).
    :param idle_timeout: With Karpenter, how long a training node stays without pods before it is removed.
        Default: :data:`~trainium_eks.constructs.training_node_pool.DEFAULT_IDLE_TIMEOUT` (10 minutes).
    :param preflight: Check quotas, offerings, capacity and addresses first in the deploy
        (:class:`~trainium_eks.constructs.preflight.Preflight`, before every other resource). Default: true.
    :param public_endpoint_cidrs: IPv4 CIDR blocks admitted to the cluster's public API endpoint (such as your own
        address as ``198.51.100.7/32``). Without any, the endpoint is private only (kubectl works from inside the VPC:
        the nodes, the kubectl provider, a VPN or a peered network), unless something in the stack needs a public one:
        the hybrid workflow of ``KubeflowTrainingStack`` (Step Functions' ``eks:call`` reaches public endpoints only),
        whose endpoint then admits every address, with a synth warning. Default: none.
    :param dns_firewall: The DNS firewall of the stack's own network (:class:`~trainium_eks.constructs.dns_firewall.
        DnsFirewall`), as a :class:`~trainium_eks.constructs.dns_firewall.DnsFirewallMode`: ``BLOCK`` answers only the
        domains the library's stacks need and ``NXDOMAIN`` for every other, ``ALERT`` answers all and records the
        others, ``OFF`` builds none. A stack given ``vpc`` builds none either way (the VPC's DNS is its owner's).
        Default: ``BLOCK``.
    :param dns_allowed_domains: Domains the DNS firewall answers besides its defaults (``example.com``,
        ``*.example.com``): the registry of your own images, your data sets' hosts. Default: none.
    :param kubectl_invocation_alarm: Notify whenever the kubectl provider's functions are invoked other than by their
        own provider and CloudFormation (``TrainingCluster``'s ``invocation_alarm``; a CloudTrail trail of the stack's
        own, of the 5 an account may have per region). Default: false.
    :param network_policy_mode: How the VPC CNI's network policy agent treats a new pod until its NetworkPolicies are
        programmed (``TrainingCluster``'s ``network_policy_mode``): ``"strict"`` denies it, ``"standard"`` allows it.
        Default: ``"strict"``.
    :param setting_names: Names of the settings in error messages (the default app passes its context keys).
        Default: the prop names.
    """

    availability_zone_id: str = DEFAULT_AZ_ID
    kubernetes_version: str = versions.DEFAULT_KUBERNETES_VERSION
    admin_role_arn: Optional[str] = None
    vpc: Optional[ec2.IVpc] = None
    node_subnet: Optional[ec2.ISubnet] = None
    image_directory: Optional[str] = None
    image_build_args: Optional[Mapping[str, str]] = None
    seed_jobs: bool = True
    provisioning: NodeProvisioning = NodeProvisioning.KARPENTER
    idle_timeout: Optional[Duration] = None
    preflight: bool = True
    public_endpoint_cidrs: Optional[Sequence[str]] = None
    dns_firewall: DnsFirewallMode = DnsFirewallMode.BLOCK
    dns_allowed_domains: Sequence[str] = ()
    kubectl_invocation_alarm: bool = False
    network_policy_mode: str = DEFAULT_NETWORK_POLICY_MODE
    setting_names: Optional[Mapping[str, str]] = None

    def check(self, problems: Problems, *, region: str) -> None:
        """Record in ``problems`` what is wrong with these props: the cluster's settings in ``region``,
        ``seed_jobs``, the image's directory and build arguments, and ``vpc`` with ``node_subnet`` (both or
        neither). The AZ is checked with each node group, which knows what it must offer."""
        check_cluster_settings(
            problems,
            kubernetes_version=self.kubernetes_version,
            admin_role_arn=self.admin_role_arn,
            region=region,
            public_endpoint_cidrs=self.public_endpoint_cidrs,
        )
        check_bool(problems, "seed_jobs", self.seed_jobs)
        check_bool(problems, "preflight", self.preflight)
        check_bool(problems, "kubectl_invocation_alarm", self.kubectl_invocation_alarm)
        if self.network_policy_mode not in NETWORK_POLICY_MODES:
            problems.add("network_policy_mode", self.network_policy_mode, " or ".join(NETWORK_POLICY_MODES))
        coerce_enum(problems, "dns_firewall", self.dns_firewall, DnsFirewallMode)
        check_domains(problems, "dns_allowed_domains", self.dns_allowed_domains)
        provisioning = coerce_enum(problems, "provisioning", self.provisioning, NodeProvisioning)
        if self.idle_timeout is not None:
            if provisioning is NodeProvisioning.NODE_GROUP:
                problems.add(
                    "idle_timeout",
                    f"{self.idle_timeout.to_seconds():g} s" if isinstance(self.idle_timeout, Duration) else None,
                    "no idle timeout with provisioning node-group (a managed node group's nodes stand; scale it "
                    "with the node count), or provisioning karpenter",
                )
            else:
                check_idle_timeout(problems, self.idle_timeout)
        if self.image_build_args is not None:
            check_string_map(problems, "image_build_args", self.image_build_args)
        if self.image_directory is not None:
            check_image_directory(problems, "image_directory", self.image_directory)
        if self.vpc is not None:
            check_implements(problems, "vpc", self.vpc, ec2.IVpc, "an ec2.IVpc")
        if self.node_subnet is not None:
            check_implements(problems, "node_subnet", self.node_subnet, ec2.ISubnet, "an ec2.ISubnet")
        if (self.vpc is None) != (self.node_subnet is None):
            problems.add("node_subnet", self.node_subnet, "give both vpc and node_subnet, or neither")

    @property
    def node_idle_timeout(self) -> Duration:
        """The idle timeout of the stack's node pools: :attr:`idle_timeout` or the default."""
        return self.idle_timeout or DEFAULT_IDLE_TIMEOUT

    @property
    def runs_seed_jobs(self) -> bool:
        """Whether the stack runs its seed workload: ``seed_jobs`` and an image to run it with."""
        return self.seed_jobs is True and self.image_directory is not None
