"""TrainingStack: the whole seed system of the design in one stack."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3 as s3
from constructs import Construct

from trainium_eks import versions
from trainium_eks.bert_phase1 import BertPhase1Jobs, add_bert_phase1_jobs
from trainium_eks.constructs.accelerated_node_group import (
    DEFAULT_INSTANCE_TYPE,
    DEFAULT_NODE_COUNT,
    AcceleratedNodeGroup,
    check_node_group_settings,
    check_offering,
)
from trainium_eks.constructs.cluster import TrainingCluster, check_cluster_settings
from trainium_eks.constructs.cluster_addons import ClusterAddons
from trainium_eks.constructs.efa_layout import EfaLayout
from trainium_eks.constructs.image_repository import TrainingImageRepository
from trainium_eks.constructs.job_sequence import JobSequence
from trainium_eks.constructs.lustre_storage import (
    DEFAULT_STORAGE_CAPACITY_GIB,
    LustreStorage,
    check_lustre_settings,
)
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.constructs.node_capacity import NodeCapacity
from trainium_eks.constructs.training_dashboard import TrainingDashboard
from trainium_eks.constructs.training_pod_identity import TrainingPodIdentity
from trainium_eks.template_limits import check_template_sizes
from trainium_eks.validation import (
    Problems,
    bucket_name_problem,
    check_bool,
    check_image_directory,
    check_implements,
    check_stack_props,
    check_string_map,
    coerce_enum,
)

DEFAULT_ACCELERATED_AZ_ID = "usw2-az4"
"""The tutorial's Trainium AZ in us-west-2 (aws-neuron-eks-samples scripts/determine_eks_azs.sh)."""


class TrainingStack(Stack):
    """The seed system in one stack: network, EKS cluster, accelerated node group, FSx for Lustre, ECR, IAM, the
    in-cluster add-ons (:class:`ClusterAddons`), a CloudWatch dashboard, and the jobs (:attr:`jobs`, a
    :class:`JobSequence`; with ``image_directory``, the BERT phase-1 run).

    Every setting is checked before anything is built, and all problems are reported in one error.

    :param instance_type: Accelerated instance type. Default: ``trn1.32xlarge``.
    :param node_count: Accelerated nodes. Default: 2.
    :param accelerated_az_id: AZ ID of the accelerated nodes and the file system. Default: ``usw2-az4``.
    :param kubernetes_version: Default: :data:`trainium_eks.versions.DEFAULT_KUBERNETES_VERSION`.
    :param lustre_storage_gib: Default: 1200.
    :param data_bucket_name: An existing S3 bucket linked to the file system and readable by training pods.
        Default: none.
    :param admin_role_arn: IAM role given cluster-admin. Default: none.
    :param efa_layout: Default: ``EfaLayout.IP_OPTIMIZED``.
    :param capacity: Default: on demand.
    :param vpc: An existing VPC, with ``accelerated_subnet``. Default: a new :class:`TrainingNetwork`.
    :param accelerated_subnet: The subnet of the accelerated nodes in ``vpc``; it must lie in ``accelerated_az_id``.
    :param image_directory: A directory with a training Dockerfile, built at deploy time. Default: none.
    :param image_build_args: Its Docker build arguments. Default: none.
    :param seed_jobs: With ``image_directory`` (``images/bert-pretrain``), run the seed workload: stage the BERT
        phase-1 dataset, pre-compile, train (:mod:`trainium_eks.bert_phase1`). Default: true. Add your own jobs to
        :attr:`jobs`.
    :param setting_names: Names of the settings in error messages (the default app passes its context keys).
    :param stack_props: Passed to ``Stack`` (``env``, ``description``, ...).
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        instance_type: str = DEFAULT_INSTANCE_TYPE,
        node_count: int = DEFAULT_NODE_COUNT,
        accelerated_az_id: str = DEFAULT_ACCELERATED_AZ_ID,
        kubernetes_version: str = versions.DEFAULT_KUBERNETES_VERSION,
        lustre_storage_gib: int = DEFAULT_STORAGE_CAPACITY_GIB,
        data_bucket_name: Optional[str] = None,
        admin_role_arn: Optional[str] = None,
        efa_layout: EfaLayout = EfaLayout.IP_OPTIMIZED,
        capacity: Optional[NodeCapacity] = None,
        vpc: Optional[ec2.IVpc] = None,
        accelerated_subnet: Optional[ec2.ISubnet] = None,
        image_directory: Optional[str] = None,
        image_build_args: Optional[Mapping[str, str]] = None,
        seed_jobs: bool = True,
        setting_names: Optional[Mapping[str, str]] = None,
        **stack_props: Any,
    ) -> None:
        check_stack_props(id_, stack_props)
        super().__init__(scope, id_, **stack_props)
        check_template_sizes(self)
        setting_names = dict(setting_names or {})
        # The constructs call this stack's lustre_storage_gib and accelerated_az_id otherwise.
        setting_names.setdefault("storage_capacity_gib", setting_names.get("lustre_storage_gib", "lustre_storage_gib"))
        setting_names.setdefault("availability_zone_id", setting_names.get("accelerated_az_id", "accelerated_az_id"))
        problems = Problems(self.node.path, setting_names=setting_names)
        instance = check_node_group_settings(
            problems, instance_type=instance_type, node_count=node_count, capacity=capacity
        )
        check_cluster_settings(
            problems, kubernetes_version=kubernetes_version, admin_role_arn=admin_role_arn, region=self.region
        )
        check_lustre_settings(problems, storage_capacity_gib=lustre_storage_gib)
        if instance is not None:
            check_offering(problems, self, instance, accelerated_az_id, warn=False)
        coerce_enum(problems, "efa_layout", efa_layout, EfaLayout)
        check_bool(problems, "seed_jobs", seed_jobs)
        if image_build_args is not None:
            check_string_map(problems, "image_build_args", image_build_args)
        if image_directory is not None:
            check_image_directory(problems, "image_directory", image_directory)
        if vpc is not None:
            check_implements(problems, "vpc", vpc, ec2.IVpc, "an ec2.IVpc")
        if accelerated_subnet is not None:
            check_implements(problems, "accelerated_subnet", accelerated_subnet, ec2.ISubnet, "an ec2.ISubnet")
        if data_bucket_name is not None and bucket_name_problem(data_bucket_name):
            problems.add(
                "data_bucket_name",
                data_bucket_name,
                f"the name of an existing S3 bucket: {bucket_name_problem(data_bucket_name)}",
            )
        if (vpc is None) != (accelerated_subnet is None):
            problems.add("accelerated_subnet", accelerated_subnet, "give both vpc and accelerated_subnet, or neither")
        problems.raise_if_any()

        if vpc is None:
            self.network: Optional[TrainingNetwork] = TrainingNetwork(
                self, "Network", accelerated_az_id=accelerated_az_id
            )
            vpc, accelerated_subnet = self.network.vpc, self.network.accelerated_subnet
        else:
            self.network = None
        assert accelerated_subnet is not None

        self.cluster = TrainingCluster(
            self,
            "Cluster",
            vpc=vpc,
            kubernetes_version=kubernetes_version,
            admin_role_arn=admin_role_arn or None,
            setting_names=setting_names,
        )
        self.accelerated_nodes = AcceleratedNodeGroup(
            self,
            "AcceleratedNodes",
            cluster=self.cluster.cluster,
            subnet=accelerated_subnet,
            availability_zone_id=accelerated_az_id,
            instance_type=instance_type,
            node_count=node_count,
            efa_layout=efa_layout,
            capacity=capacity,
            node_role=self.cluster.node_role,
            setting_names=setting_names,
        )
        self.accelerated_nodes.nodegroup.node.add_dependency(self.cluster.addons["vpc-cni"])

        data_bucket = s3.Bucket.from_bucket_name(self, "DataBucket", data_bucket_name) if data_bucket_name else None
        self.training_identity = TrainingPodIdentity(
            self, "TrainingIdentity", cluster=self.cluster.cluster, data_bucket=data_bucket
        )
        self.storage = LustreStorage(
            self,
            "Storage",
            vpc=vpc,
            subnet=accelerated_subnet,
            client_security_groups=[
                self.accelerated_nodes.security_group,
                self.cluster.cluster.cluster_security_group,
            ],
            storage_capacity_gib=lustre_storage_gib,
            data_bucket=data_bucket,
            setting_names=setting_names,
        )
        self.storage.grant_csi_driver(self.cluster.fsx_csi_driver_role)
        self.addons = ClusterAddons(
            self,
            "Addons",
            cluster=self.cluster.cluster,
            volume=self.storage.volume_source,
            namespace=self.training_identity.namespace,
            service_account=self.training_identity.service_account,
        )
        self.images = TrainingImageRepository(
            self, "Images", image_directory=image_directory, build_args=image_build_args
        )

        self.accelerated_nodes.add_shared_volume(self.addons.volume_chart.claim_name)
        self.jobs = JobSequence(
            self,
            "Jobs",
            cluster=self.cluster.cluster,
            prerequisites=self.addons.job_prerequisites,
        )
        self.seed_jobs: Optional[BertPhase1Jobs] = None
        if seed_jobs and self.images.image_uri:
            self.seed_jobs = add_bert_phase1_jobs(
                self.jobs, image=self.images.image_uri, node_group=self.accelerated_nodes.topology
            )

        self.dashboard = TrainingDashboard(self, "Dashboard", cluster_name=self.cluster.cluster.cluster_name)

        CfnOutput(self, "FileSystemId", value=self.storage.file_system_id)
        CfnOutput(self, "DashboardName", value=self.dashboard.dashboard.dashboard_name)
        CfnOutput(self, "ImageRepositoryUri", value=self.images.repository.repository_uri)
        price = self.accelerated_nodes.instance.on_demand_usd_per_hour
        if price is not None:
            CfnOutput(
                self,
                "AcceleratedNodesUsdPerHour",
                value=f"{price * node_count:.2f}",
                description=f"{node_count} x {instance_type} on demand (US East price, catalog)",
            )
