"""ComposerTrainingStack: GPU nodes that schedule, Composer speed-up recipes, and what training costs."""

from __future__ import annotations

from typing import Any, Optional

from constructs import Construct

from trainium_eks.constructs.efs_storage import EfsStorage
from trainium_eks.core.validation import check_instance
from trainium_eks.facts.catalog import Accelerator, default_az_id
from trainium_eks.stacks.training_cluster_stack import EXPECTED_EFS_GB, NodeTypes, TrainingClusterStack
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
    """Composer training on EKS GPU nodes: the network and cluster of :class:`TrainingClusterStack`, GPU nodes
    (a Karpenter :class:`~trainium_eks.constructs.TrainingNodePool` by default, a
    :class:`~trainium_eks.constructs.TrainingNodeGroup` with ``provisioning=NodeProvisioning.NODE_GROUP``: the NVIDIA
    AMI, the GPU taint, EFA interfaces on EFA types), the
    NVIDIA device plugin (so that pods get ``nvidia.com/gpu``), a shared :class:`EfsStorage` volume, the in-cluster
    add-ons, and, with ``image_directory`` (``images/composer-resnet``), two runs of a CIFAR-10 ResNet with Composer's
    launcher on the same nodes, one after the other: the baseline, then ``recipe``
    (:mod:`trainium_eks.workloads.composer_resnet`).

    Every setting is checked before anything is built, and all problems are reported in one error: a Trainium type
    is refused (Composer's Neuron support is experimental and untested upstream). The seed workload (``seed_jobs``,
    with ``image_directory`` ``images/composer-resnet``) is the baseline and the recipe.

    :param instance_type: An NVIDIA GPU (or CPU) type of the catalog. Default: :data:`DEFAULT_INSTANCE_TYPE`.
    :param node_count: Default: 1 (types without EFA run one node only).
    :param recipe: The Composer recipe of the second run. Default:
        :data:`~trainium_eks.workloads.composer_resnet.DEFAULT_RECIPE`.
    :param props: :class:`~trainium_eks.stacks.cluster_stack_props.ClusterStackProps` and ``Stack``'s (``env``, ...).
        Without ``availability_zone_id``: the first AZ ID of the stack's region (us-west-2 when the environment has
        none) that offers :data:`DEFAULT_INSTANCE_TYPE` (:func:`~trainium_eks.facts.catalog.default_az_id`; in
        us-west-2 usw2-az3, since usw2-az4 does not offer g5), or another if it does not offer ``instance_type``.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        instance_type: str = DEFAULT_INSTANCE_TYPE,
        node_count: int = DEFAULT_NODE_COUNT,
        recipe: ComposerRecipe = DEFAULT_RECIPE,
        **props: Any,
    ) -> None:
        if "availability_zone_id" not in props:
            env = props.get("env")
            region = getattr(env, "region", None) if env is not None else None
            where = region if isinstance(region, str) else "us-west-2"
            found = default_az_id(where, [instance_type], default_az_id(where, [DEFAULT_INSTANCE_TYPE]))
            if found is not None:
                props["availability_zone_id"] = found
        super().__init__(scope, id_, **props)
        problems = self.setting_problems
        instance = self.check_node_group(
            problems,
            instance_type=instance_type,
            node_count=node_count,
            availability_zone_id=self.props.availability_zone_id,
            types=NODE_TYPES,
        )
        check_instance(problems, "recipe", recipe, ComposerRecipe, "a ComposerRecipe")
        problems.raise_if_any()
        assert instance is not None

        vpc, node_subnet = self.build_network()
        self.build_cluster(vpc=vpc, efs_csi_driver=True)
        self.gpu_nodes = self.build_node_group(
            "GpuNodes",
            subnet=node_subnet,
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
        self.build_in_cluster(volume=self.storage.volume_source)
        self.gpu_nodes.add_shared_volume(self.addons.volume_chart.claim_name)
        self.seed_jobs: Optional[ComposerComparisonJobs] = None
        if self.props.seed_jobs and self.images.image_uri:
            self.seed_jobs = add_composer_jobs(
                self.jobs, image=self.images.image_uri, node_group=self.gpu_nodes.topology, recipe=recipe
            )

        self.record_costs(
            self.storage.cost_line(EXPECTED_EFS_GB),
            self.gpu_nodes.cost_line,
        )
        self.build_outputs(FileSystemId=self.storage.file_system_id)
