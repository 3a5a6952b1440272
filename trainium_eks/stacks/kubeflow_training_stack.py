"""KubeflowTrainingStack: Kubeflow Trainer on EKS with a shared EFS volume, the CIFAR-10 DDP run, and the choice of
running one training spec on EKS or on SageMaker at run time."""

from __future__ import annotations

from typing import Any, List, Optional

from constructs import Construct

from trainium_eks.constructs.efs_storage import EfsStorage
from trainium_eks.constructs.hybrid_workflow import HybridTrainingWorkflow
from trainium_eks.constructs.kubeflow_trainer import KubeflowTrainer
from trainium_eks.core.validation import check_bool
from trainium_eks.facts.catalog import Accelerator
from trainium_eks.manifests.jobs.dataset_staging import DatasetStagingChart
from trainium_eks.stacks.training_cluster_stack import EXPECTED_EFS_GB, NodeTypes, TrainingClusterStack, TrainingNodes
from trainium_eks.workloads.cifar10_dataset import cifar10_staging
from trainium_eks.workloads.cifar10_ddp import Cifar10Jobs, add_cifar10_jobs, run_template

DEFAULT_CPU_INSTANCE_TYPE = "m5.xlarge"
DEFAULT_CPU_NODE_COUNT = 6
"""The seed's Kubeflow workshop cluster: 6 x m5.xlarge, where the CIFAR-10 DDP job runs one process per node."""

DEFAULT_ACCELERATED_NODE_COUNT = 1

CPU_NODE_TYPES = NodeTypes(
    (Accelerator.NONE,),
    "the CPU group runs the CIFAR-10 job with gloo; add accelerated nodes with accelerated_instance_type",
)
ACCELERATED_NODE_TYPES = NodeTypes(
    (Accelerator.NEURON, Accelerator.NVIDIA),
    "the CPU nodes are a group of their own; this optional group is accelerated (Trainium or GPU)",
)


HYBRID_WORKFLOW_ENDPOINT_REASON = (
    "the hybrid workflow's Kubernetes branch (Step Functions' eks:call, which supports only Kubernetes APIs with "
    "public endpoint access, from AWS addresses that connect-eks.html does not list)"
)
"""Why the stack's API endpoint is public when it has the hybrid workflow. Source: Step Functions developer guide,
connect-eks.html ("The Step Functions EKS integration supports only Kubernetes APIs with public endpoint access")."""


class KubeflowTrainingStack(TrainingClusterStack):
    """Kubeflow training on EKS: the network and cluster of :class:`TrainingClusterStack`, CPU nodes (the seed's
    6 x m5.xlarge: a Karpenter :class:`~trainium_eks.constructs.TrainingNodePool` by default, a
    :class:`~trainium_eks.constructs.TrainingNodeGroup` with ``provisioning=NodeProvisioning.NODE_GROUP``), optional
    accelerated nodes (Trainium or GPU),
    a shared :class:`EfsStorage` volume (StorageClass ``efs-sc``, volume ``efs-pv``, claim ``efs-sc-claim``), the
    in-cluster add-ons (Volcano, TensorBoard, the device plugins the node groups need), Kubeflow Trainer v2
    (:class:`KubeflowTrainer`) and, with ``image_directory`` (``images/cifar10-ddp``), the CIFAR-10 run: stage the
    dataset onto EFS, then train as a TrainJob on the CPU group (:mod:`trainium_eks.workloads.cifar10_ddp`).

    Every setting is checked before anything is built, and all problems are reported in one error.

    The seed workload (``seed_jobs``, with ``image_directory`` ``images/cifar10-ddp``) is the CIFAR-10 run; the data
    is staged whenever the seed run or the hybrid workflow needs it.

    :param cpu_instance_type: A CPU type of the catalog. Default: ``m5.xlarge``.
    :param cpu_node_count: Default: 6.
    :param accelerated_instance_type: A Trainium or GPU type of the catalog for a second group, or None. Default: none.
    :param accelerated_node_count: Nodes of that group. Default: 1.
    :param hybrid_workflow: With ``image_directory``, the Step Functions workflow that runs the CIFAR-10 training on
        the cluster or on SageMaker, chosen per run (:class:`HybridTrainingWorkflow`; stack output
        ``HybridStateMachineArn``, started by ``python -m trainium_eks run``). It needs the cluster's public API
        endpoint: with the workflow, the endpoint is public and private, the public one open to every address unless
        ``public_endpoint_cidrs`` restricts it (then the workflow's Kubernetes branch cannot connect; synth warns).
        Without it, the endpoint is private unless ``public_endpoint_cidrs`` is set. Default: true.
    :param props: :class:`~trainium_eks.stacks.cluster_stack_props.ClusterStackProps` and ``Stack``'s (``env``, ...).
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cpu_instance_type: str = DEFAULT_CPU_INSTANCE_TYPE,
        cpu_node_count: int = DEFAULT_CPU_NODE_COUNT,
        accelerated_instance_type: Optional[str] = None,
        accelerated_node_count: int = DEFAULT_ACCELERATED_NODE_COUNT,
        hybrid_workflow: bool = True,
        **props: Any,
    ) -> None:
        super().__init__(scope, id_, **props)
        problems = self.setting_problems
        shared = self.props
        cpu = self.check_node_group(
            problems,
            instance_type=cpu_instance_type,
            node_count=cpu_node_count,
            availability_zone_id=shared.availability_zone_id,
            types=CPU_NODE_TYPES,
            prefix="cpu_",
        )
        accelerated = None
        if accelerated_instance_type is not None:
            accelerated = self.check_node_group(
                problems,
                instance_type=accelerated_instance_type,
                node_count=accelerated_node_count,
                availability_zone_id=shared.availability_zone_id,
                types=ACCELERATED_NODE_TYPES,
                prefix="accelerated_",
            )
        check_bool(problems, "hybrid_workflow", hybrid_workflow)
        problems.raise_if_any()
        assert cpu is not None

        # The workflow needs the image: SageMaker runs the one the stack builds.
        with_workflow = hybrid_workflow and shared.image_directory is not None
        vpc, node_subnet = self.build_network()
        self.build_cluster(
            vpc=vpc,
            efs_csi_driver=True,
            public_endpoint_for=HYBRID_WORKFLOW_ENDPOINT_REASON if with_workflow else None,
        )
        self.cpu_nodes = self.build_node_group(
            "CpuNodes",
            subnet=node_subnet,
            prefix="cpu_",
            instance_type=cpu_instance_type,
            node_count=cpu_node_count,
        )
        self.accelerated_nodes: Optional[TrainingNodes] = None
        if accelerated is not None and accelerated_instance_type is not None:
            self.accelerated_nodes = self.build_node_group(
                "AcceleratedNodes",
                subnet=node_subnet,
                prefix="accelerated_",
                instance_type=accelerated_instance_type,
                node_count=accelerated_node_count,
            )
        groups: List[TrainingNodes] = [g for g in (self.cpu_nodes, self.accelerated_nodes) if g is not None]

        self.build_pod_identity()
        self.storage = EfsStorage(
            self,
            "Storage",
            vpc=vpc,
            # A client's rule is named by its position (EfsStorage.allow_clients): the clients that every setting has
            # come first, the workflow's SageMaker jobs next (third, when there is a workflow), and the accelerated
            # nodes' rule has a name of its own, so that adding or removing either renames no other client's rule.
            client_security_groups=[self.cpu_nodes.security_group, self.cluster.cluster.cluster_security_group],
            # SageMaker mounts the file system for the hybrid workflow's jobs, and whether that mount uses TLS is not
            # documented: the policy admits mounts through the mount targets, TLS or not (the EFS CSI driver still
            # mounts with TLS, its default).
            require_tls=not with_workflow,
        )
        if self.accelerated_nodes is not None:
            self.storage.allow_clients(self.accelerated_nodes.security_group, name="AcceleratedNodes")
        self.build_in_cluster(
            volume=self.storage.volume_source,
        )
        self.trainer = KubeflowTrainer(
            self, "KubeflowTrainer", cluster=self.cluster.cluster, after=[self.addons.volcano]
        )
        self.jobs.add_prerequisites(*self.trainer.job_prerequisites)
        for group in groups:
            group.add_shared_volume(self.addons.volume_chart.claim_name)
        self.seed_jobs: Optional[Cifar10Jobs] = None
        self.data_staging: Optional[DatasetStagingChart] = None
        """The job that stages CIFAR-10 onto EFS: for the seed run, and for the hybrid workflow's runs, which read the
        same data on either runtime (so it exists with ``seed_jobs=False`` too, when the workflow does)."""
        if (shared.seed_jobs or with_workflow) and self.images.image_uri:
            self.data_staging = cifar10_staging(self.jobs, node_group=self.cpu_nodes.topology)
            self.jobs.add("Staging", self.data_staging)
        if shared.seed_jobs and self.data_staging is not None:
            self.seed_jobs = add_cifar10_jobs(
                self.jobs, image=self.images.image_uri, node_group=self.cpu_nodes.topology, staging=self.data_staging
            )
        self.hybrid_workflow: Optional[HybridTrainingWorkflow] = None
        if with_workflow and self.images.image_asset is not None:
            self.hybrid_workflow = HybridTrainingWorkflow(
                self,
                "HybridWorkflow",
                cluster=self.cluster,
                train_job=run_template(image=self.images.image_asset.image_uri, node_group=self.cpu_nodes.topology),
                image_repository=self.images.image_asset,
                efs=self.storage,
                vpc=vpc,
                subnets=list(vpc.private_subnets),
                data_job=self.data_staging.job_name if self.data_staging is not None else None,
                apply_after=self.addons.training_namespace.of_kind("Namespace"),
                jobs=self.jobs,
            )

        self.record_costs(
            self.storage.cost_line(EXPECTED_EFS_GB),
            *(group.cost_line for group in groups),
        )
        outputs = {"FileSystemId": self.storage.file_system_id}
        if self.hybrid_workflow is not None:
            outputs["HybridStateMachineArn"] = self.hybrid_workflow.state_machine.state_machine_arn
        self.build_outputs(**outputs)
