"""TrainingCluster: the EKS control plane, its system node group and managed add-ons."""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from aws_cdk import Annotations, CfnCondition, RemovalPolicy, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct, IConstruct

from trainium_eks.constructs.applied_chart import AppliedChart
from trainium_eks.constructs.kubectl_handler_guard import KubectlHandlerGuard
from trainium_eks.constructs.kubectl_invocation_alarm import KubectlInvocationAlarm
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.constructs.node_launch_template import DEFAULT_ROOT_VOLUME_GIB, NodeLaunchTemplate
from trainium_eks.constructs.node_role import NodeRole
from trainium_eks.constructs.pod_identity_role import PodIdentityRole
from trainium_eks.core.conventions import SYSTEM_NODE_LABELS
from trainium_eks.core.cost import CostLine, nodes_usd_per_hour, priced, stack_region
from trainium_eks.core.nag import acknowledge, managed_policy_findings, token_finding
from trainium_eks.core.validation import (
    Problems,
    check_bool,
    check_implements,
    check_instance,
    check_integer,
    check_string_map,
    implements,
    is_concrete,
    nearest,
)
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import INSTANCE_CATALOG, MAX_NODES_PER_MANAGED_NODE_GROUP
from trainium_eks.facts.pricing import eks_control_plane_usd_per_hour
from trainium_eks.facts.regions import partition_of
from trainium_eks.manifests.access.system_network_policy import SystemNetworkPolicyChart
from trainium_eks.manifests.jobs.topology import NodeGroupTopology

DEFAULT_SYSTEM_INSTANCE_TYPE = "m7i.xlarge"
"""Instance type of the system node group (CoreDNS, Volcano, etcd, TensorBoard, add-on controllers)."""

DEFAULT_SYSTEM_NODE_COUNT = 2
"""Nodes of the system node group: two, in two AZs, so that CoreDNS and the webhooks survive a node loss."""

DEFAULT_CLUSTER_LOGGING = (
    eks.ClusterLoggingTypes.API,
    eks.ClusterLoggingTypes.AUDIT,
    eks.ClusterLoggingTypes.AUTHENTICATOR,
)
"""Control-plane log types sent to CloudWatch Logs."""

CLOUDWATCH_AGENT_SERVICE_ACCOUNT = "cloudwatch-agent"
"""Service account of the CloudWatch agent (namespace amazon-cloudwatch), bound to its role by Pod Identity."""

NETWORK_POLICY_MODES = ("strict", "standard")
"""The VPC CNI network policy agent's modes (``NETWORK_POLICY_ENFORCING_MODE``: EKS user guide,
cni-network-policy-configure.html, Step 1)."""

DEFAULT_NETWORK_POLICY_MODE = "strict"
"""A new pod is denied until its NetworkPolicies are programmed: a training image's code cannot use the window in
which standard mode lets every packet pass."""

CLOUDWATCH_AGENT_NAMESPACE = "amazon-cloudwatch"
"""Namespace of the amazon-cloudwatch-observability add-on (CloudWatch user guide,
install-CloudWatch-Observability-EKS-addon.html)."""

CLOUDWATCH_AGENT_POLICY = "CloudWatchAgentServerPolicy"

EFS_CSI_CONTROLLER_SERVICE_ACCOUNT = "efs-csi-controller-sa"
"""Service account of the EFS CSI controller in kube-system, bound to its role by EKS Pod Identity."""

EFS_CSI_DRIVER_POLICY = "service-role/AmazonEFSCSIDriverPolicy"

FSX_CSI_CONTROLLER_SERVICE_ACCOUNT = "fsx-csi-controller-sa"
"""Service account of the FSx CSI controller in kube-system, bound to its role by EKS Pod Identity."""

VPC_CNI_SERVICE_ACCOUNT = "aws-node"
"""Service account of the VPC CNI's DaemonSet (kube-system/aws-node), bound by the vpc-cni add-on's Pod Identity
association to a role with ``AmazonEKS_CNI_Policy``. Source: Amazon EKS user guide, cni-iam-role.html ("Creates and is
configured to use a Kubernetes service account named aws-node"; "The Amazon VPC CNI plugin also supports Amazon EKS Pod
Identities") and add-ons-iam.html ("Pod Identity Support Reference": Amazon VPC CNI, from v1.15.5-eksbuild.1, below
the library's minimum)."""

VPC_CNI_POLICY = "AmazonEKS_CNI_Policy"
"""The VPC CNI's permissions for an IPv4 cluster (cni-iam-role.html); the library's clusters are IPv4."""

PUBLIC_ENDPOINT_CIDRS_HELP = (
    "IPv4 CIDR blocks, separated by commas, such as 203.0.113.0/24 or your own address as 198.51.100.7/32 "
    "(`curl https://checkip.amazonaws.com`), host bits zero; 0.0.0.0/0 admits every address"
)
"""What the public endpoint's CIDR setting takes (the form of ``publicAccessCidrs`` in EKS's ``VpcConfigRequest``)."""

ADMIN_PRINCIPAL_ARN = re.compile(
    r"arn:(?P<partition>aws|aws-cn|aws-us-gov):iam::[0-9]{12}:(role|user)/[\w+=,.@/-]{1,512}"
)
"""An IAM role (its path included) or user ARN: what an EKS access entry can name (never an STS session)."""

NO_ADMIN_WARNING = (
    "No admin_role_arn: CloudFormation creates the cluster as the CDK bootstrap's execution role, the only principal "
    "EKS makes cluster admin, so after `cdk deploy` kubectl fails with Unauthorized for everyone else. Name your IAM "
    "role: in the default app run `python -m trainium_eks admin-role --save` (it writes adminRoleArn into "
    "cdk.context.json from your AWS credentials) or deploy with "
    '`make deploy STACK=<stack> ARGS="-c adminRoleArn=arn:aws:iam::<account>:role/<role>"`; '
    "in your own stack pass admin_role_arn, or add an eks.AccessEntry to the cluster."
)


class TrainingCluster(Construct):
    """An EKS cluster ready for distributed training: control plane, system node group and managed add-ons.

    - ``aws_eks_v2`` cluster (native ``AWS::EKS::Cluster``), API-mode access entries, control-plane logging
      (:data:`DEFAULT_CLUSTER_LOGGING`), Kubernetes secrets envelope-encrypted with a KMS key that rotates yearly.
    - A kubectl provider with the kubectl layer that matches the Kubernetes version (in-cluster charts need it).
    - A small on-demand system node group (:data:`DEFAULT_SYSTEM_NODE_COUNT` x
      :data:`DEFAULT_SYSTEM_INSTANCE_TYPE`, AL2023, IMDSv2, encrypted gp3 root volume, node auto repair) in the
      private subnets, labelled ``trainium-eks/node-role=system``, for CoreDNS and the add-ons.
    - The API endpoint private only unless ``public_endpoint_cidrs`` admits CIDR blocks to a public one.
    - Managed add-ons at the versions of :mod:`trainium_eks.facts.versions`: vpc-cni (a version that supports EFA-only
      interfaces; NetworkPolicies enforced, by default in strict mode: ``network_policy_mode``;
      ``kube-system/aws-node`` bound by Pod Identity to a role with ``AmazonEKS_CNI_Policy``, which the
      node role does not carry; the add-on and the Pod Identity agent exist before the system nodes join), coredns,
      kube-proxy, eks-pod-identity-agent and eks-node-monitoring-agent (node health for auto repair); unless disabled,
      amazon-cloudwatch-observability (Container Insights: Neuron and EFA metrics, container logs; its agent's role
      bound by Pod Identity); and only when asked for, the CSI driver of the file system the cluster mounts:
      aws-fsx-csi-driver (its controller role bound by Pod Identity, allowed only to describe file systems until a
      file system grants more) or aws-efs-csi-driver.

    :param vpc: The VPC. Required.
    :param subnets: Subnets of the control-plane interfaces and the system nodes, in at least two AZs.
        Default: the VPC's private subnets.
    :param kubernetes_version: Kubernetes minor version, one of :data:`trainium_eks.facts.versions.KUBERNETES_VERSIONS`.
        Default: :data:`trainium_eks.facts.versions.DEFAULT_KUBERNETES_VERSION`.
    :param admin_role_arn: An IAM role (with its path) or user given cluster-admin through an access entry
        (``AmazonEKSClusterAdminPolicy``, cluster scope). Default: none, and a synth warning: only the CDK
        bootstrap's CloudFormation execution role, which creates the cluster, is then cluster admin.
    :param endpoint_access: Who can reach the Kubernetes API (an ``eks.EndpointAccess``); give it or
        ``public_endpoint_cidrs``, not both. Default: from ``public_endpoint_cidrs``.
    :param public_endpoint_cidrs: IPv4 CIDR blocks admitted to a public API endpoint: with any, the endpoint is public
        and private, the public one restricted to them (``EndpointAccess.PUBLIC_AND_PRIVATE.only_from``); without, the
        endpoint is private only (reachable from the VPC: nodes, the kubectl provider, which aws-cdk-lib places in the
        private subnets whenever private access is on, and whatever the user connects to the VPC). Default: none
        (private).
    :param system_instance_type: Default: :data:`DEFAULT_SYSTEM_INSTANCE_TYPE`.
    :param system_node_count: Default: :data:`DEFAULT_SYSTEM_NODE_COUNT`.
    :param node_role: Role of the system nodes. Default: a new :class:`NodeRole`.
    :param secrets_key: KMS key for Kubernetes secrets. Default: a new key with yearly rotation.
    :param cluster_logging: Default: :data:`DEFAULT_CLUSTER_LOGGING`.
    :param addon_versions: Add-on versions to pin, by add-on name (``{"vpc-cni": "v1.21.1-eksbuild.1"}``).
        Default: the versions of :data:`trainium_eks.facts.versions.ADDONS` (EKS's default for the Kubernetes version).
    :param fsx_csi_driver: Install the aws-fsx-csi-driver add-on (a controller and a privileged node plugin on every
        node), its controller's role bound by EKS Pod Identity, for clusters that mount FSx for Lustre
        (``LustreStorage``: pass :attr:`fsx_csi_driver_role` to its ``grant_csi_driver``). Default: false.
    :param efs_csi_driver: Install the aws-efs-csi-driver add-on, its controller's role (``AmazonEFSCSIDriverPolicy``)
        bound by EKS Pod Identity, for clusters that mount Amazon EFS (``EfsStorage``). Default: false.
    :param container_insights: Install the amazon-cloudwatch-observability add-on (CloudWatch Container Insights with
        enhanced observability: Neuron and EFA metrics, container logs), its agent's role bound by Pod Identity.
        Default: true.
    :param network_policy_mode: How the VPC CNI's network policy agent treats a new pod until its policies are
        programmed: ``"strict"``, denied (the add-on's ``NETWORK_POLICY_ENFORCING_MODE``), so that no pod's first
        packets pass before its NetworkPolicies apply; ``"standard"``, allowed. In strict mode a pod that no
        NetworkPolicy selects has no network at all: the cluster applies
        :class:`~trainium_eks.manifests.SystemNetworkPolicyChart` (allow all) to ``kube-system`` and, with
        ``container_insights``, to ``amazon-cloudwatch`` (in both modes: a switch back to standard stays safe); the
        library's constructs do the same for the namespaces they install into (Volcano's, Kubeflow's) and the
        training namespace has its own policies; a namespace of your own needs a policy too
        (:meth:`allow_all_traffic`). Default: ``"strict"``.
    :param invocation_alarm: Notify on an SNS topic whenever the kubectl provider's handler or onEvent function is
        invoked by another principal than its own provider or CloudFormation (:class:`KubectlInvocationAlarm`: a
        CloudTrail trail of their Lambda data events and two EventBridge rules). Default: false.
    :param setting_names: Names of the settings in error messages. Default: the parameter names.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        vpc: ec2.IVpc,
        subnets: Optional[Sequence[ec2.ISubnet]] = None,
        kubernetes_version: str = versions.DEFAULT_KUBERNETES_VERSION,
        admin_role_arn: Optional[str] = None,
        endpoint_access: Optional[eks.EndpointAccess] = None,
        public_endpoint_cidrs: Optional[Sequence[str]] = None,
        system_instance_type: str = DEFAULT_SYSTEM_INSTANCE_TYPE,
        system_node_count: int = DEFAULT_SYSTEM_NODE_COUNT,
        node_role: Optional[iam.IRole] = None,
        secrets_key: Optional[kms.IKey] = None,
        cluster_logging: Sequence[eks.ClusterLoggingTypes] = DEFAULT_CLUSTER_LOGGING,
        addon_versions: Optional[Mapping[str, str]] = None,
        fsx_csi_driver: bool = False,
        efs_csi_driver: bool = False,
        container_insights: bool = True,
        network_policy_mode: str = DEFAULT_NETWORK_POLICY_MODE,
        invocation_alarm: bool = False,
        setting_names: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path, setting_names=setting_names)
        check_cluster_settings(
            problems,
            kubernetes_version=kubernetes_version,
            admin_role_arn=admin_role_arn,
            region=Stack.of(self).region,
            system_instance_type=system_instance_type,
            system_node_count=system_node_count,
            addon_versions=addon_versions,
            public_endpoint_cidrs=public_endpoint_cidrs,
        )
        check_implements(problems, "vpc", vpc, ec2.IVpc, "an ec2.IVpc")
        if subnets is not None and (
            not isinstance(subnets, (list, tuple)) or not all(implements(s, ec2.ISubnet) for s in subnets)
        ):
            problems.add("subnets", subnets, "a list of ec2.ISubnet in at least two AZs")
        if endpoint_access is not None:
            check_instance(problems, "endpoint_access", endpoint_access, eks.EndpointAccess, "an eks.EndpointAccess")
            if public_endpoint_cidrs:
                problems.add(
                    "public_endpoint_cidrs",
                    list(public_endpoint_cidrs),
                    "none with endpoint_access (give one of them: endpoint_access decides on its own)",
                )
        if node_role is not None:
            check_implements(problems, "node_role", node_role, iam.IRole, "an iam.IRole")
        if secrets_key is not None:
            check_implements(problems, "secrets_key", secrets_key, kms.IKey, "a kms.IKey")
        if not isinstance(cluster_logging, (list, tuple)) or not all(
            isinstance(kind, eks.ClusterLoggingTypes) for kind in cluster_logging
        ):
            problems.add("cluster_logging", cluster_logging, "a list of eks.ClusterLoggingTypes")
        check_bool(problems, "fsx_csi_driver", fsx_csi_driver)
        check_bool(problems, "efs_csi_driver", efs_csi_driver)
        check_bool(problems, "container_insights", container_insights)
        check_bool(problems, "invocation_alarm", invocation_alarm)
        if network_policy_mode not in NETWORK_POLICY_MODES:
            problems.add("network_policy_mode", network_policy_mode, " or ".join(NETWORK_POLICY_MODES))
        problems.raise_if_any()
        self.network_policy_mode = network_policy_mode
        self._open_namespaces: Dict[str, AppliedChart] = {}
        self.kubernetes_version = kubernetes_version
        self._addon_versions = dict(addon_versions or {})
        self.public_endpoint_cidrs: List[str] = list(public_endpoint_cidrs or [])
        """The CIDR blocks admitted to the public endpoint; empty when it is private only (or ``endpoint_access``
        decided)."""
        chosen_here = endpoint_access is None
        if endpoint_access is None:
            endpoint_access = (
                eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*self.public_endpoint_cidrs)
                if self.public_endpoint_cidrs
                else eks.EndpointAccess.PRIVATE
            )
        self.endpoint_access = endpoint_access
        control_plane_subnets = list(subnets) if subnets else list(vpc.private_subnets)
        if chosen_here and not control_plane_subnets:
            problems.add(
                "vpc",
                vpc.vpc_id,
                "a VPC with private subnets (or pass subnets): a private endpoint, and a public one restricted to "
                "public_endpoint_cidrs, are reached through them, and aws-eks-v2 refuses either without any; for a "
                "VPC without private subnets pass endpoint_access=eks.EndpointAccess.PUBLIC_AND_PRIVATE",
            )
            problems.raise_if_any()

        self.secrets_key = secrets_key or kms.Key(
            self,
            "SecretsKey",
            description="Envelope encryption of Kubernetes secrets",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.cluster = eks.Cluster(
            self,
            "Cluster",
            version=eks.KubernetesVersion.of(kubernetes_version),
            vpc=vpc,
            vpc_subnets=[ec2.SubnetSelection(subnets=control_plane_subnets)],
            endpoint_access=endpoint_access,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            cluster_logging=list(cluster_logging),
            secrets_encryption_key=self.secrets_key,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=versions.kubectl_layer(self, "KubectlLayer", kubernetes_version),
            ),
        )
        self._acknowledge_cluster_internals()
        self.kubectl_handler_guard = KubectlHandlerGuard(
            self, "KubectlHandlerGuard", provider=self.cluster.node.find_child("KubectlProvider")
        )
        """Denies the invocation of the kubectl handler to every principal but its provider framework."""
        self.invocation_alarm: Optional[KubectlInvocationAlarm] = (
            KubectlInvocationAlarm(
                self, "KubectlInvocationAlarm", provider=self.cluster.node.find_child("KubectlProvider")
            )
            if invocation_alarm
            else None
        )
        """With ``invocation_alarm``, the notification of invocations of the kubectl provider's functions by others."""
        if isinstance(vpc.node.scope, TrainingNetwork):
            Annotations.of(self.cluster).acknowledge_warning(
                "@aws-cdk/aws-eks:clusterMustManuallyTagSubnet",
                "TrainingNetwork tags its public subnets kubernetes.io/role/elb=1 and its private subnets "
                "kubernetes.io/role/internal-elb=1 itself.",
            )
        if not admin_role_arn:
            Annotations.of(self).add_warning_v2("trainium-eks:noClusterAdmin", NO_ADMIN_WARNING)
        else:
            eks.AccessEntry(
                self,
                "AdminAccess",
                cluster=self.cluster,
                principal=admin_role_arn,
                access_policies=[
                    eks.AccessPolicy.from_access_policy_name(
                        "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER
                    )
                ],
            )

        own_node_role = node_role is None
        self.node_role: iam.IRole = node_role or NodeRole(self, "NodeRole").role
        self.system_instance_type = system_instance_type
        self.system_node_count = system_node_count
        system_template = NodeLaunchTemplate(
            self,
            "SystemLaunchTemplate",
            instance_type=system_instance_type,
            security_group_ids=[self.cluster.cluster_security_group_id],
        )
        self.system_nodegroup = eks.Nodegroup(
            self,
            "SystemNodegroup",
            cluster=self.cluster,
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
            launch_template_spec=system_template.spec,
            subnets=ec2.SubnetSelection(subnets=control_plane_subnets),
            min_size=system_node_count,
            desired_size=system_node_count,
            max_size=system_node_count * 2,
            node_role=self.node_role,
            labels=dict(SYSTEM_NODE_LABELS),
            enable_node_auto_repair=True,
        )
        region = stack_region(self)
        extended = kubernetes_version in versions.EXTENDED_SUPPORT_FROM
        self.control_plane_usd_per_hour: Optional[float] = priced(
            self,
            "the EKS control plane",
            eks_control_plane_usd_per_hour(region, extended_support=extended) if region else None,
        )
        """USD per hour of the control plane (extended support for the versions of
        :data:`~trainium_eks.facts.versions.EXTENDED_SUPPORT_FROM`), or None where the library has no verified price."""
        self.system_nodes_usd_per_hour: Optional[float] = priced(
            self,
            f"{system_node_count} x {system_instance_type}",
            nodes_usd_per_hour(region, system_instance_type, system_node_count, DEFAULT_ROOT_VOLUME_GIB),
        )
        """On-demand USD per hour of the system nodes and their root volumes, or None without a verified price."""
        self._cost_quantities = (
            f"Kubernetes {kubernetes_version}, {'extended' if extended else 'standard'} support",
            f"{system_node_count} x {system_instance_type}, {DEFAULT_ROOT_VOLUME_GIB} GiB gp3 each",
        )

        self.addons: Dict[str, eks.CfnAddon] = {}
        self.vpc_cni_role = self._add_vpc_cni()
        self.system_workloads_after: List[IConstruct] = [self.system_nodegroup, self.allow_all_traffic("kube-system")]
        """What every workload of the system nodes is created after: the nodes, and kube-system's allow-all policy
        (CoreDNS, the CSI controllers and Karpenter run there). The vpc-cni add-on is not among those that wait for it:
        that would put the kubectl provider before the system nodes, 2 minutes on the deploy's critical path. The
        add-ons that start pods before this policy runs only pods on the host network, which no policy governs:
        aws-node, kube-proxy, the Pod Identity agent and the node monitoring agent (aws/eks-node-monitoring-agent
        ``charts/eks-node-monitoring-agent/templates/daemonset.yaml``: ``hostNetwork: true``)."""
        for name in ("kube-proxy", "eks-pod-identity-agent", "eks-node-monitoring-agent"):
            self._addon(name)
        # aws-node takes its credentials from the Pod Identity agent (host network, so it runs before the CNI does):
        # both add-ons, and the association, exist before any node joins, as eksctl orders them (pkg/actions/addon/
        # tasks.go: the agent first; known_addons.go: vpc-cni and the agent CreateBeforeNodeGroup). On an update, the
        # node role drops the CNI policy only after the add-on has moved aws-node to its own role.
        self.system_nodegroup.node.add_dependency(self.addons["vpc-cni"], self.addons["eks-pod-identity-agent"])
        if own_node_role:
            self.node_role.node.add_dependency(self.addons["vpc-cni"])
        self._addon("coredns").node.add_dependency(*self.system_workloads_after)
        self.fsx_csi_driver_role: Optional[iam.IRole] = self._add_fsx_csi_driver() if fsx_csi_driver else None
        """The FSx CSI controller's role (``LustreStorage.grant_csi_driver`` grants it a file system), or None without
        the driver."""
        if efs_csi_driver:
            self._add_efs_csi_driver()
        if container_insights:
            self._add_container_insights()

    def system_topology(self, shared_claims: Sequence[str] = ()) -> NodeGroupTopology:
        """The system nodes as a job sees them (no taint, no device, no EFA), reaching ``shared_claims``: for a job
        that should not take a training node, such as a dataset copy."""
        return NodeGroupTopology(
            instance_type=self.system_instance_type,
            node_count=self.system_node_count,
            max_nodes=self.system_node_count * 2,
            efa_interfaces=0,
            shared_claims=frozenset(shared_claims),
        )

    @property
    def cost_lines(self) -> List[CostLine]:
        """The control plane and the system nodes as lines of the stack's idle cost."""
        control_plane, system_nodes = self._cost_quantities
        return [
            CostLine("EKS control plane", control_plane, self.control_plane_usd_per_hour, idle=True),
            CostLine("System nodes", system_nodes, self.system_nodes_usd_per_hour, idle=True),
        ]

    def _add_vpc_cni(self) -> iam.IRole:
        """The vpc-cni add-on, ``kube-system/aws-node`` bound by the add-on's Pod Identity association to a role of its
        own with :data:`VPC_CNI_POLICY` (the node role does not carry it: create-node-role.html recommends exactly
        that)."""
        return self._addon_with_pod_identity(
            "vpc-cni",
            role_id="VpcCniRole",
            namespace="kube-system",
            service_account=VPC_CNI_SERVICE_ACCOUNT,
            description="Amazon VPC CNI (kube-system/aws-node): network interfaces and IP addresses of the nodes",
            policy=VPC_CNI_POLICY,
            reason="The VPC CNI needs AmazonEKS_CNI_Policy for an IPv4 cluster (EKS user guide, cni-iam-role.html), "
            "which AWS keeps current with the CNI; only kube-system/aws-node of this cluster can assume the role.",
            configuration=versions.vpc_cni_configuration(strict=self.network_policy_mode == "strict"),
        )[1]

    def _add_fsx_csi_driver(self) -> iam.IRole:
        """The FSx CSI driver add-on, its controller bound by Pod Identity to a role that may only describe file
        systems until a file system grants more (``LustreStorage.grant_csi_driver``); return that role."""
        role = PodIdentityRole(
            self,
            "FsxCsiDriverRole",
            cluster=self.cluster,
            namespace="kube-system",
            service_account=FSX_CSI_CONTROLLER_SERVICE_ACCOUNT,
            description="FSx CSI driver controller (kube-system/fsx-csi-controller-sa)",
        ).role
        role.add_to_principal_policy(iam.PolicyStatement(actions=["fsx:DescribeFileSystems"], resources=["*"]))
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "fsx:DescribeFileSystems does not support resource-level permissions (Service Authorization Reference, "
            "Amazon FSx); actions on a file system are granted per file system by LustreStorage.grant_csi_driver.",
            "Resource::*",
        )
        addon = self._addon(
            "aws-fsx-csi-driver",
            pod_identity_associations=[
                eks.CfnAddon.PodIdentityAssociationProperty(
                    role_arn=role.role_arn, service_account=FSX_CSI_CONTROLLER_SERVICE_ACCOUNT
                )
            ],
        )
        # Add-ons that run Deployments become ACTIVE only once nodes can run them.
        addon.node.add_dependency(self.addons["eks-pod-identity-agent"], *self.system_workloads_after)
        return role

    def _add_efs_csi_driver(self) -> None:
        """The Amazon EFS CSI driver add-on (static volumes and access points), its controller bound by Pod Identity."""
        addon, _ = self._addon_with_pod_identity(
            "aws-efs-csi-driver",
            role_id="EfsCsiDriverRole",
            namespace="kube-system",
            service_account=EFS_CSI_CONTROLLER_SERVICE_ACCOUNT,
            description="EFS CSI driver controller (kube-system/efs-csi-controller-sa)",
            policy=EFS_CSI_DRIVER_POLICY,
            reason="The EFS CSI driver controller needs AmazonEFSCSIDriverPolicy (EKS user guide, "
            "add-ons-aws-efs-csi-driver.html): describe file systems and mount targets, create and delete the access "
            "points of dynamically provisioned volumes (tagged by the driver).",
        )
        addon.node.add_dependency(self.addons["eks-pod-identity-agent"], *self.system_workloads_after)

    def _add_container_insights(self) -> None:
        """CloudWatch Container Insights with enhanced observability: NeuronCore utilisation, Neuron device memory
        and EFA traffic per node, pod and container, and container logs, through the managed add-on."""
        addon, _ = self._addon_with_pod_identity(
            "amazon-cloudwatch-observability",
            role_id="CloudWatchAgentRole",
            namespace=CLOUDWATCH_AGENT_NAMESPACE,
            service_account=CLOUDWATCH_AGENT_SERVICE_ACCOUNT,
            description="CloudWatch agent (amazon-cloudwatch/cloudwatch-agent)",
            policy=CLOUDWATCH_AGENT_POLICY,
            reason="The CloudWatch agent of Container Insights needs CloudWatchAgentServerPolicy (CloudWatch user "
            "guide, install-CloudWatch-Observability-EKS-addon.html): put metrics and log events, describe EC2 tags "
            "and volumes.",
        )
        addon.node.add_dependency(self.addons["eks-pod-identity-agent"], *self.system_workloads_after)
        # the namespace and its policy before the add-on's pods
        addon.node.add_dependency(self.allow_all_traffic(CLOUDWATCH_AGENT_NAMESPACE, create_namespace=True))

    def _addon_with_pod_identity(
        self,
        name: str,
        *,
        role_id: str,
        namespace: str,
        service_account: str,
        description: str,
        policy: str,
        reason: str,
        configuration: Optional[Mapping] = None,
    ) -> Tuple[eks.CfnAddon, iam.IRole]:
        """The add-on ``name`` (with ``configuration``, default its pin's) with a Pod Identity association of
        ``namespace/service_account`` to a role of its own (id ``role_id``) holding the AWS managed ``policy``,
        acknowledged (AwsSolutions-IAM4) with ``reason``."""
        role = PodIdentityRole(
            self,
            role_id,
            cluster=self.cluster,
            namespace=namespace,
            service_account=service_account,
            description=description,
        ).role
        role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(policy))
        acknowledge(role, "AwsSolutions-IAM4", reason, *managed_policy_findings([policy]))
        addon = self._addon(
            name,
            configuration=configuration,
            pod_identity_associations=[
                eks.CfnAddon.PodIdentityAssociationProperty(role_arn=role.role_arn, service_account=service_account)
            ],
        )
        return addon, role

    def _acknowledge_cluster_internals(self) -> None:
        """Acknowledge the findings on resources aws-cdk-lib creates inside ``eks.Cluster`` (not configurable)."""
        acknowledge(
            self.cluster,
            "AwsSolutions-IAM4",
            "The EKS cluster service role needs the AWS managed AmazonEKSClusterPolicy (EKS user guide, "
            "cluster-iam-role.html); aws-cdk-lib attaches it.",
            *managed_policy_findings(["AmazonEKSClusterPolicy"]),
        )
        provider = self.cluster.node.find_child("KubectlProvider")
        has_ecr_public = next(child for child in provider.node.find_all() if isinstance(child, CfnCondition))
        ecr_public = {
            "Fn::If": [
                Stack.of(self).get_logical_id(has_ecr_public),
                {
                    "Fn::Join": [
                        "",
                        [
                            "arn:",
                            {"Ref": "AWS::Partition"},
                            ":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly",
                        ],
                    ]
                },
                {"Ref": "AWS::NoValue"},
            ]
        }
        acknowledge(
            provider,
            "AwsSolutions-IAM4",
            "The kubectl provider Lambda functions of aws-cdk-lib need the Lambda basic and VPC execution roles (logs, "
            "network interfaces in the private subnets) and ECR read-only access (Helm charts from OCI registries).",
            *managed_policy_findings(
                [
                    "service-role/AWSLambdaBasicExecutionRole",
                    "service-role/AWSLambdaVPCAccessExecutionRole",
                    "AmazonEC2ContainerRegistryReadOnly",
                ]
            ),
            token_finding("Policy", ecr_public),
        )
        handler_arn = Stack.of(self).get_logical_id(provider.node.find_child("Handler").node.default_child)
        acknowledge(
            provider,
            "AwsSolutions-IAM5",
            "The custom-resource provider framework of aws-cdk-lib invokes any version of its own kubectl handler "
            "function (<handler arn>:*), nothing else.",
            f"Resource::<{handler_arn}.Arn>:*",
        )
        acknowledge(
            provider,
            "AwsSolutions-L1",
            "aws-cdk-lib pins the kubectl handler's Python runtime to the one its kubectl/helm layer is built for.",
        )

    def allow_all_traffic(self, namespace: str, *, create_namespace: bool = False) -> AppliedChart:
        """Apply :class:`~trainium_eks.manifests.SystemNetworkPolicyChart` to ``namespace`` and return it (once per
        namespace: a later call returns the first chart, whatever its ``create_namespace``); make the workloads of
        the namespace depend on it. Applied in both modes: in standard mode it changes nothing (a pod no policy
        selects is open there already), and a stack that switches from strict to standard keeps it, so no pod of the
        namespace is denied while the agents on its nodes change mode.

        :param namespace: Required.
        :param create_namespace: Create the namespace first (for an add-on or Helm release installed after). Default:
            false.
        """
        if namespace not in self._open_namespaces:
            self._open_namespaces[namespace] = AppliedChart(
                self,
                f"AllowAllTraffic-{namespace}",
                cluster=self.cluster,
                chart=SystemNetworkPolicyChart(namespace=namespace, create_namespace=create_namespace),
            )
        return self._open_namespaces[namespace]

    def _addon(self, name: str, *, configuration: Optional[Mapping] = None, **extra) -> eks.CfnAddon:
        """The managed add-on ``name``, configured as :data:`~trainium_eks.facts.versions.ADDONS` says unless
        ``configuration`` is given."""
        if configuration is None:
            configuration = versions.ADDONS[name].configuration
        addon = eks.CfnAddon(
            self,
            "Addon-" + name,
            addon_name=name,
            cluster_name=self.cluster.cluster_name,
            addon_version=self._addon_versions.get(name, versions.ADDONS[name].version),
            resolve_conflicts="OVERWRITE",
            configuration_values=_json_or_none(configuration),
            **extra,
        )
        self.addons[name] = addon
        return addon


def check_cluster_settings(
    problems: Problems,
    *,
    kubernetes_version: str,
    admin_role_arn: Optional[str],
    region: Optional[str] = None,
    system_instance_type: str = DEFAULT_SYSTEM_INSTANCE_TYPE,
    system_node_count: int = DEFAULT_SYSTEM_NODE_COUNT,
    addon_versions: Optional[Mapping[str, str]] = None,
    public_endpoint_cidrs: Optional[Sequence[str]] = None,
) -> None:
    """Record every problem of the cluster settings in ``problems``."""
    if public_endpoint_cidrs is not None:
        check_public_endpoint_cidrs(problems, "public_endpoint_cidrs", public_endpoint_cidrs)
    if addon_versions is not None and check_string_map(problems, "addon_versions", addon_versions):
        for name, version in addon_versions.items():
            reason = versions.check_addon_version(name, version)
            if reason:
                problems.add(f"addon_versions[{name!r}]", version, reason)
    if not isinstance(kubernetes_version, str) or kubernetes_version not in versions.KUBERNETES_VERSIONS:
        problems.add(
            "kubernetes_version",
            kubernetes_version,
            f"one of {', '.join(versions.KUBERNETES_VERSIONS)} "
            "(supported by both EKS and aws-cdk-lib, with a kubectl layer)"
            + nearest(kubernetes_version, versions.KUBERNETES_VERSIONS),
        )
    if admin_role_arn is not None and is_concrete(admin_role_arn):
        match = ADMIN_PRINCIPAL_ARN.fullmatch(admin_role_arn) if isinstance(admin_role_arn, str) else None
        if match is None:
            problems.add(
                "admin_role_arn",
                admin_role_arn,
                "an IAM role ARN with its path, such as arn:aws:iam::123456789012:role/Admin, or an IAM user ARN (an "
                "assumed-role session ARN is not a role: `python -m trainium_eks admin-role` turns yours into one)",
            )
        elif region and is_concrete(region) and match.group("partition") != partition_of(region):
            problems.add(
                "admin_role_arn",
                admin_role_arn,
                f"an ARN of partition {partition_of(region)}, the partition of region {region}",
            )
    if not isinstance(system_instance_type, str) or system_instance_type not in INSTANCE_CATALOG:
        problems.add("system_instance_type", system_instance_type, f"one of {', '.join(INSTANCE_CATALOG)}")
    check_integer(problems, "system_node_count", system_node_count, minimum=1, maximum=MAX_NODES_PER_MANAGED_NODE_GROUP)


def public_endpoint_cidr_problem(cidr: object) -> Optional[str]:
    """Why ``cidr`` is not a CIDR block EKS admits to a public endpoint, or None when it is one."""
    if not isinstance(cidr, str) or not cidr or cidr != cidr.strip() or "/" not in cidr:
        return "not an IPv4 CIDR block (address/prefix length)"
    try:
        ipaddress.IPv4Network(cidr, strict=True)
    except ipaddress.AddressValueError:
        return "not an IPv4 address before the '/'"
    except ipaddress.NetmaskValueError:
        return "not a prefix length of 0 to 32 after the '/'"
    except ValueError:
        return f"host bits set (the block is {ipaddress.IPv4Network(cidr, strict=False)})"
    return None


def check_public_endpoint_cidrs(problems: Problems, setting: str, value: object) -> bool:
    """``value`` is a list of IPv4 CIDR blocks without repeats (tokens pass); one problem names every bad one."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        problems.add(setting, value, f"a list of {PUBLIC_ENDPOINT_CIDRS_HELP}")
        return False
    bad = [
        f"{cidr!r}: {reason}"
        for cidr in value
        if not (isinstance(cidr, str) and Token.is_unresolved(cidr))
        for reason in [public_endpoint_cidr_problem(cidr)]
        if reason
    ]
    repeated = sorted({cidr for cidr in value if isinstance(cidr, str) and list(value).count(cidr) > 1})
    if repeated:
        bad.append(f"repeated: {', '.join(repeated)}")
    if bad:
        problems.add(setting, ",".join(map(str, value)), f"{PUBLIC_ENDPOINT_CIDRS_HELP} ({'; '.join(bad)})")
        return False
    return True


def _json_or_none(configuration: Optional[Mapping]) -> Optional[str]:
    return json.dumps(configuration, sort_keys=True) if configuration else None
