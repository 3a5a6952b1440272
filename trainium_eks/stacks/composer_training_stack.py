"""ComposerTrainingStack: GPU nodes that schedule, Composer speed-up recipes, and what training costs."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from trainium_eks.constructs.efs_storage import EfsStorage
from trainium_eks.core.validation import check_instance
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import Accelerator
from trainium_eks.stacks.training_cluster_stack import DEFAULT_AZ_ID, EXPECTED_EFS_GB, NodeTypes, TrainingClusterStack
from trainium_eks.workloads.composer_recipe import ComposerRecipe
from trainium_eks.workloads.composer_resnet import DEFAULT_RECIPE, ComposerComparisonJobs, add_composer_jobs

DEFAULT_INSTANCE_TYPE = "g5.xlarge"
"""One NVIDIA A10G (24 GB), 4 vCPUs: the cheapest GPU of the catalog that trains the CIFAR-10 ResNet in minutes per
run; g6.xlarge (L4) is cheaper per hour and slower."""

DEFAULT_NODE_COUNT = 1

NODE_TYPES = NodeTypes(
    (Accelerator.NVIDIA, Accelerator.NONE),
    "Composer's Neuron support is experimental and untested upstream, so the ComposerTraining stack runs on GPU (or "
    "CPU) nodes",
)


class ComposerTrainingStack(TrainingClusterStack):
    """Composer training on EKS GPU nodes: the network and cluster of :class:`TrainingClusterStack`, a GPU node group
    (:class:`TrainingNodeGroup`: the NVIDIA AMI, the GPU taint, EFA interfaces on EFA types), the NVIDIA device
    plugin (so that pods get ``nvidia.com/gpu``), a shared :class:`EfsStorage` volume, the in-cluster add-ons, and,
    with ``image_directory`` (``images/composer-resnet``), two runs of a CIFAR-10 ResNet with Composer's launcher on
    the same nodes, one after the other: the baseline, then ``recipe`` (:mod:`trainium_eks.workloads.composer_resnet`).

    Every setting is checked before anything is built, and all problems are reported in one error: a Trainium type
    is refused (Composer's Neuron support is experimental and untested upstream).

    :param instance_type: An NVIDIA GPU (or CPU) type of the catalog. Default: :data:`DEFAULT_INSTANCE_TYPE`.
    :param node_count: Default: 1 (types without EFA run one node only).
    :param availability_zone_id: AZ ID of the nodes. Default:
        :data:`~trainium_eks.stacks.training_cluster_stack.DEFAULT_AZ_ID`.
    :param recipe: The Composer recipe of the second run. Default:
        :data:`~trainium_eks.workloads.composer_resnet.DEFAULT_RECIPE`.
    :param kubernetes_version: Default: :data:`trainium_eks.facts.versions.DEFAULT_KUBERNETES_VERSION`.
    :param admin_role_arn: IAM role given cluster-admin. Default: none.
    :param vpc: An existing VPC, with ``node_subnet``. Default: a new :class:`TrainingNetwork`.
    :param node_subnet: The subnet of the GPU nodes in ``vpc``, in ``availability_zone_id``.
    :param image_directory: The training image's directory, built at deploy time. Default: none.
    :param image_build_args: Its Docker build arguments. Default: none.
    :param seed_jobs: With ``image_directory``, run the baseline and the recipe. Default: true.
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
        availability_zone_id: str = DEFAULT_AZ_ID,
        recipe: ComposerRecipe = DEFAULT_RECIPE,
        kubernetes_version: str = versions.DEFAULT_KUBERNETES_VERSION,
        admin_role_arn: Optional[str] = None,
        vpc: Optional[ec2.IVpc] = None,
        node_subnet: Optional[ec2.ISubnet] = None,
        image_directory: Optional[str] = None,
        image_build_args: Optional[Mapping[str, str]] = None,
        seed_jobs: bool = True,
        setting_names: Optional[Mapping[str, str]] = None,
        **stack_props: Any,
    ) -> None:
        super().__init__(scope, id_, setting_names=setting_names, **stack_props)
        problems = self.problems()
        instance = self.check_node_group(
            problems,
            instance_type=instance_type,
            node_count=node_count,
            availability_zone_id=availability_zone_id,
            types=NODE_TYPES,
        )
        check_instance(problems, "recipe", recipe, ComposerRecipe, "a ComposerRecipe")
        self.check_system_props(
            problems,
            kubernetes_version=kubernetes_version,
            admin_role_arn=admin_role_arn,
            seed_jobs=seed_jobs,
            image_directory=image_directory,
            image_build_args=image_build_args,
            vpc=vpc,
            subnet=node_subnet,
            subnet_name="node_subnet",
        )
        problems.raise_if_any()
        assert instance is not None

        vpc, node_subnet = self.build_network(node_az_id=availability_zone_id, vpc=vpc, subnet=node_subnet)
        self.build_cluster(
            vpc=vpc, kubernetes_version=kubernetes_version, admin_role_arn=admin_role_arn, efs_csi_driver=True
        )
        self.gpu_nodes = self.build_node_group(
            "GpuNodes",
            subnet=node_subnet,
            availability_zone_id=availability_zone_id,
            instance_type=instance_type,
            node_count=node_count,
        )
        self.build_pod_identity()
        self.storage = EfsStorage(
            self,
            "Storage",
            vpc=vpc,
            client_security_groups=[self.gpu_nodes.security_group, self.cluster.cluster.cluster_security_group],
        )
        self.build_in_cluster(
            volume=self.storage.volume_source,
            image_directory=image_directory,
            image_build_args=image_build_args,
        )
        self.gpu_nodes.add_shared_volume(self.addons.volume_chart.claim_name)
        self.seed_jobs: Optional[ComposerComparisonJobs] = None
        if seed_jobs and self.images.image_uri:
            self.seed_jobs = add_composer_jobs(
                self.jobs, image=self.images.image_uri, node_group=self.gpu_nodes.topology, recipe=recipe
            )

        self.record_costs(
            self.storage.cost_line(EXPECTED_EFS_GB),
            self.gpu_nodes.cost_line,
        )
        self.build_outputs(FileSystemId=self.storage.file_system_id)
