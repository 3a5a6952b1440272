"""TrainiumEksStack: the whole seed system of the design in one stack."""

from __future__ import annotations

from typing import Any, Optional

from constructs import Construct

from trainium_eks.constructs.efa_layout import EfaLayout
from trainium_eks.constructs.lustre_storage import (
    DEFAULT_STORAGE_CAPACITY_GIB,
    LustreStorage,
    check_bucket_prefixes,
    check_lustre_settings,
)
from trainium_eks.constructs.node_capacity import NodeCapacity
from trainium_eks.constructs.training_node_group import (
    DEFAULT_INSTANCE_TYPE,
    DEFAULT_NODE_COUNT,
)
from trainium_eks.core.validation import bucket_name_problem, coerce_enum
from trainium_eks.facts.catalog import Accelerator
from trainium_eks.moved import renamed_props
from trainium_eks.stacks.training_cluster_stack import NodeTypes, TrainingClusterStack
from trainium_eks.workloads.bert_phase1 import BertPhase1Jobs, add_bert_phase1_jobs

SEED_NODE_TYPES = NodeTypes(
    (Accelerator.NEURON,),
    "the seed jobs pre-compile and train BERT with the Neuron SDK, so they need a Trainium type (GPU and CPU types "
    "belong to the KubeflowTraining and ComposerTraining stacks, or to this stack with seed_jobs=False)",
)
"""The node types of the seed run (``seed_jobs`` with ``image_directory``); without it, any type of the catalog."""


RENAMED_PROPS = {"accelerated_az_id": "availability_zone_id", "accelerated_subnet": "node_subnet"}
"""Props renamed in 0.2 (to the names the other stacks use): old -> new; the old names still work and warn."""


class TrainiumEksStack(TrainingClusterStack):
    """The seed system in one stack: network, EKS cluster, accelerated nodes (a Karpenter
    :class:`~trainium_eks.constructs.TrainingNodePool` by default, a :class:`~trainium_eks.constructs.TrainingNodeGroup`
    with ``provisioning=NodeProvisioning.NODE_GROUP``), FSx for Lustre, ECR, IAM, the in-cluster add-ons
    (:class:`~trainium_eks.constructs.ClusterAddons`), a CloudWatch dashboard, and the jobs (:attr:`jobs`, a
    :class:`~trainium_eks.constructs.JobSequence`; with ``image_directory``, the BERT phase-1 run).

    Every setting is checked before anything is built, and all problems are reported in one error.

    The seed workload (``seed_jobs``, with ``image_directory`` ``images/bert-pretrain``): stage the BERT phase-1
    dataset, pre-compile, train (:mod:`trainium_eks.workloads.bert_phase1`). Add your own jobs to :attr:`jobs`.

    :param instance_type: Accelerated instance type. Default: ``trn1.32xlarge``.
    :param node_count: Accelerated nodes. Default: 2.
    :param lustre_storage_gib: Default: 1200.
    :param data_bucket_name: An existing S3 bucket (versioning on, recommended) whose ``data_bucket_prefix`` the file
        system imports at ``/bucket`` and training pods may read; nothing is exported to it unless
        ``data_export_prefix`` is set. Default: none.
    :param data_bucket_prefix: The prefix of the data bucket to import and read. Default: the whole bucket.
    :param data_export_prefix: A prefix of the data bucket, outside ``data_bucket_prefix``, that the file system
        imports at ``/export`` and exports new and changed files below ``/export`` to, and that training pods may
        write. Default: none (nothing written in the cluster reaches the bucket).
    :param efa_layout: Default: ``EfaLayout.IP_OPTIMIZED``.
    :param capacity: Default: on demand.
    :param props: :class:`~trainium_eks.stacks.cluster_stack_props.ClusterStackProps` and ``Stack``'s (``env``, ...).
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        instance_type: str = DEFAULT_INSTANCE_TYPE,
        node_count: int = DEFAULT_NODE_COUNT,
        lustre_storage_gib: int = DEFAULT_STORAGE_CAPACITY_GIB,
        data_bucket_name: Optional[str] = None,
        data_bucket_prefix: str = "",
        data_export_prefix: Optional[str] = None,
        efa_layout: EfaLayout = EfaLayout.IP_OPTIMIZED,
        capacity: Optional[NodeCapacity] = None,
        **props: Any,
    ) -> None:
        renamed = {old: props.pop(old) for old in tuple(props) if old in RENAMED_PROPS}
        props.update(renamed_props("TrainiumEksStack", renamed, RENAMED_PROPS))
        setting_names = dict(props.pop("setting_names", None) or {})
        # The constructs call this stack's lustre_storage_gib otherwise.
        setting_names.setdefault("storage_capacity_gib", setting_names.get("lustre_storage_gib", "lustre_storage_gib"))
        super().__init__(scope, id_, setting_names=setting_names, **props)
        problems = self.setting_problems
        shared = self.props
        self.check_node_group(
            problems,
            instance_type=instance_type,
            node_count=node_count,
            availability_zone_id=shared.availability_zone_id,
            types=SEED_NODE_TYPES if shared.runs_seed_jobs else None,
            capacity=capacity,
        )
        check_lustre_settings(problems, storage_capacity_gib=lustre_storage_gib)
        coerce_enum(problems, "efa_layout", efa_layout, EfaLayout)
        if data_bucket_name is not None and bucket_name_problem(data_bucket_name):
            problems.add(
                "data_bucket_name",
                data_bucket_name,
                f"the name of an existing S3 bucket: {bucket_name_problem(data_bucket_name)}",
            )
        check_bucket_prefixes(
            problems.renamed({"data_bucket_prefix": "data_bucket_prefix", "export_prefix": "data_export_prefix"}),
            data_bucket_prefix=data_bucket_prefix,
            export_prefix=data_export_prefix,
            has_bucket=data_bucket_name is not None,
        )
        problems.raise_if_any()

        vpc, node_subnet = self.build_network()
        self.build_cluster(vpc=vpc, fsx_csi_driver=True)
        self.accelerated_nodes = self.build_node_group(
            "AcceleratedNodes",
            subnet=node_subnet,
            instance_type=instance_type,
            node_count=node_count,
            efa_layout=efa_layout,
            capacity=capacity,
        )

        self.build_pod_identity(
            data_bucket_name=data_bucket_name, read_prefix=data_bucket_prefix, write_prefix=data_export_prefix
        )
        self.storage = LustreStorage(
            self,
            "Storage",
            vpc=vpc,
            subnet=node_subnet,
            client_security_groups=[
                self.accelerated_nodes.security_group,
                self.cluster.cluster.cluster_security_group,
            ],
            storage_capacity_gib=lustre_storage_gib,
            data_bucket=self.data_bucket,
            data_bucket_prefix=data_bucket_prefix,
            export_prefix=data_export_prefix,
            setting_names=setting_names,
        )
        self.storage.grant_csi_driver(self.cluster.fsx_csi_driver_role)
        self.build_in_cluster(volume=self.storage.volume_source)
        self.accelerated_nodes.add_shared_volume(self.addons.volume_chart.claim_name)
        self.seed_jobs: Optional[BertPhase1Jobs] = None
        if shared.seed_jobs and self.images.image_uri:
            claim = self.addons.volume_chart.claim_name
            self.seed_jobs = add_bert_phase1_jobs(
                self.jobs,
                image=self.images.image_uri,
                node_group=self.accelerated_nodes.topology,
                staging_nodes=self.cluster.system_topology([claim]),
            )

        self.record_costs(
            self.storage.cost_line,
            self.accelerated_nodes.cost_line,
        )
        self.build_outputs(FileSystemId=self.storage.file_system_id)
