"""Every public construct composed with the constructs it accepts, in the ways the README and the docstrings allow,
with the optional part it takes present and absent: each composition synthesizes, or stops with one
``ConfigurationError`` that names what is missing and how to get it; never another exception (a traceback from
inside a construct or jsii).

One app per case. A ``TrainingCluster`` is built only where the case is about it (its driver's role, its node role,
a stack of its own); elsewhere an imported cluster (``tests.support.clusters.imported_cluster``) stands in for it,
as cheap to synthesize as the constructs under test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Optional

import aws_cdk as cdk
import cdk8s
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3

from tests.support.apps import REPO, new_app
from tests.support.clusters import ENV, imported_cluster
from trainium_eks.constructs import (
    ClusterAddons,
    EfaLayout,
    EfsStorage,
    HybridTrainingWorkflow,
    JobSequence,
    KarpenterController,
    KubeflowTrainer,
    LustreStorage,
    NodeCapacity,
    NodeRole,
    Preflight,
    TrainingCluster,
    TrainingDashboard,
    TrainingImageRepository,
    TrainingNetwork,
    TrainingNodeGroup,
    TrainingNodePool,
    TrainingPodIdentity,
)
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.train_job import TrainJobChart
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart

AZ_ID = "usw2-az4"
ADMIN = "arn:aws:iam::123456789012:role/Admin"
ENDPOINT = "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com"
CPU_NODES = NodeGroupTopology("m5.xlarge", 2, 2, 0, (), frozenset({"efs-sc-claim"}))


@dataclass(frozen=True)
class Case:
    """A composition: ``build`` composes constructs in an app; ``refused`` is None when the app synthesizes, else a
    phrase of the one ``ConfigurationError`` it stops with (what is missing, or how to get it)."""

    id: str
    build: Callable[[cdk.App], None]
    refused: Optional[str] = None


def training_cluster(app: cdk.App, stack_name: str = "Cluster", **props):
    """A stack with a ``TrainingNetwork`` and a ``TrainingCluster`` built with ``props``."""
    stack = cdk.Stack(app, stack_name, env=ENV)
    network = TrainingNetwork(stack, "Network", node_az_id=AZ_ID)
    cluster = TrainingCluster(stack, "Cluster", vpc=network.vpc, admin_role_arn=ADMIN, **props)
    return stack, network, cluster


def existing_cluster(app: cdk.App, **overrides):
    """A stack with a network and a cluster imported by its attributes (``overrides`` replace them)."""
    stack = cdk.Stack(app, "OnExisting", env=ENV)
    network, cluster = imported_cluster(stack, **overrides)
    return stack, network, cluster


def lustre(stack, network) -> LustreStorage:
    """A Lustre file system in the network's node subnet."""
    return LustreStorage(stack, "Lustre", vpc=network.vpc, subnet=network.node_subnet)


def node_group(stack, network, cluster, **props) -> TrainingNodeGroup:
    """A Trainium node group of ``cluster`` (an ``eks.ICluster``) in the network's node subnet."""
    return TrainingNodeGroup(
        stack, "Trn", cluster=cluster, subnet=network.node_subnet, availability_zone_id=AZ_ID, **props
    )


def node_pool(stack, network, cluster, controller, id_: str = "TrnPool") -> TrainingNodePool:
    """A Trainium node pool of ``cluster`` launched by ``controller``."""
    return TrainingNodePool(
        stack, id_, cluster=cluster, subnet=network.node_subnet, controller=controller, availability_zone_id=AZ_ID
    )


def train_job(image: Optional[str] = "123456789012.dkr.ecr.us-west-2.amazonaws.com/cifar10:1") -> TrainJobChart:
    """The hybrid workflow's TrainJob template on CPU nodes that mount the EFS claim."""
    return TrainJobChart(
        name="cifar10-ddp", image=image, node_group=CPU_NODES, script="/opt/cifar10/launch.py", launcher="direct"
    )


def hybrid_workflow(stack, network, cluster, **props) -> HybridTrainingWorkflow:
    """The hybrid workflow on ``cluster`` with a public endpoint, an EfsStorage and an ECR repository of the stack;
    ``props`` override its settings."""
    arguments = dict(
        cluster=cluster,
        endpoint_access=eks.EndpointAccess.PUBLIC_AND_PRIVATE,
        train_job=train_job(),
        vpc=network.vpc,
        subnets=list(network.vpc.private_subnets),
    )
    arguments.update(props)
    if "image_repository" not in props:
        arguments["image_repository"] = TrainingImageRepository(stack, "Images").repository
    if "efs" not in props:
        arguments["efs"] = EfsStorage(stack, "Efs", vpc=network.vpc)
    return HybridTrainingWorkflow(stack, "Workflow", **arguments)


def eval_chart(name: str = "eval") -> cdk8s.Chart:
    """A chart of the user's, holding one batch/v1 Job named ``name``."""
    chart = cdk8s.Chart(cdk8s.App(), "Eval")
    cdk8s.ApiObject(
        chart, "Job", api_version="batch/v1", kind="Job", metadata={"name": name, "namespace": "training"}
    ).add_json_patch(
        cdk8s.JsonPatch.add(
            "/spec",
            {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "eval", "image": "example.com/eval:1", "command": ["true"]}],
                    }
                }
            },
        )
    )
    return chart


# --- TrainingCluster and the parts it may have ------------------------------------------------------------------


def everything_on_a_training_cluster(app):
    """The README's constructs on one TrainingCluster with every optional part: the FSx CSI driver's role, its node
    role given, Karpenter and a pool before the add-ons, a node group with a Capacity Block, both file systems, the
    Trainer after Volcano, jobs after both, the pod identity, the dashboard, the image and the preflight."""
    stack = cdk.Stack(app, "Training", env=ENV)
    network = TrainingNetwork(stack, "Network", node_az_id=AZ_ID)
    training = TrainingCluster(
        stack,
        "Cluster",
        vpc=network.vpc,
        admin_role_arn=ADMIN,
        node_role=NodeRole(stack, "NodeRole").role,
        fsx_csi_driver=True,
        efs_csi_driver=True,
    )
    cluster = training.cluster
    karpenter = KarpenterController(stack, "Karpenter", cluster=cluster, after=[training.system_nodegroup])
    pool = node_pool(stack, network, cluster, karpenter)
    nodes = node_group(
        stack,
        network,
        cluster,
        node_role=training.node_role,
        capacity=NodeCapacity.capacity_block("cr-0123456789abcdef0"),
        efa_layout=EfaLayout.IP_OPTIMIZED,
    )
    storage = lustre(stack, network)
    storage.allow_clients(nodes.security_group, pool.security_group, cluster.cluster_security_group)
    storage.grant_csi_driver(training.fsx_csi_driver_role)
    EfsStorage(stack, "Efs", vpc=network.vpc, client_security_groups=[cluster.cluster_security_group])
    addons = ClusterAddons(
        stack, "Addons", cluster=cluster, volume=storage.volume_source, after_nodes=[training.system_nodegroup]
    )
    nodes.add_shared_volume(addons.volume_chart.claim_name)
    pool.add_shared_volume(addons.volume_chart.claim_name)
    trainer = KubeflowTrainer(stack, "Trainer", cluster=cluster, after=[addons.volcano])
    identity = TrainingPodIdentity(stack, "Identity", cluster=cluster, data_bucket=s3.Bucket(stack, "Data"))
    jobs = JobSequence(stack, "Jobs", cluster=cluster, prerequisites=addons.job_prerequisites)
    jobs.add_prerequisites(*trainer.job_prerequisites)
    images = TrainingImageRepository(stack, "Images", image_directory=str(REPO / "images" / "cifar10-ddp"))
    train = VolcanoJobChart(
        name="train",
        image=images.image_uri,
        node_group=nodes.topology,
        script="/opt/train.py",
        namespace=identity.namespace,
        resolve=jobs.resolve,
    )
    jobs.add("Train", train)
    jobs.add("Eval", eval_chart(), wait_for=[train])
    addons.add_chart("Settings", cdk8s.Chart(cdk8s.App(), "Settings"))
    TrainingDashboard(stack, "Dashboard", cluster_name=cluster.cluster_name)
    Preflight(stack, "Preflight")


def grant_csi_driver_of_a_cluster_without_it(app):
    stack, network, training = training_cluster(app, fsx_csi_driver=False)
    lustre(stack, network).grant_csi_driver(training.fsx_csi_driver_role)


def grant_csi_driver_to_storage_of_a_later_stack(app):
    _, network, training = training_cluster(app, fsx_csi_driver=True)
    lustre(cdk.Stack(app, "Storage", env=ENV), network).grant_csi_driver(training.fsx_csi_driver_role)


def grant_csi_driver_to_storage_of_an_earlier_stack(app):
    storage_stack = cdk.Stack(app, "Storage", env=ENV)
    network = TrainingNetwork(storage_stack, "Network", node_az_id=AZ_ID)
    storage = lustre(storage_stack, network)
    training = TrainingCluster(
        cdk.Stack(app, "Cluster", env=ENV), "Cluster", vpc=network.vpc, admin_role_arn=ADMIN, fsx_csi_driver=True
    )
    storage.grant_csi_driver(training.fsx_csi_driver_role)


def cluster_on_a_vpc_without_private_subnets(app):
    stack = cdk.Stack(app, "Cluster", env=ENV)
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["us-west-2a"], public_subnet_ids=["subnet-1"]
    )
    TrainingCluster(stack, "Cluster", vpc=vpc, admin_role_arn=ADMIN)


def training_cluster_given_where_its_eks_cluster_goes(construct: str) -> Callable[[cdk.App], None]:
    """``construct`` given the TrainingCluster itself instead of its ``.cluster``."""

    def build(app):
        stack = cdk.Stack(app, "Cluster", env=ENV)
        network = TrainingNetwork(stack, "Network", node_az_id=AZ_ID)
        training = TrainingCluster(stack, "Cluster", vpc=network.vpc, admin_role_arn=ADMIN)
        {
            "TrainingNodeGroup": lambda: node_group(stack, network, training),
            "ClusterAddons": lambda: ClusterAddons(
                stack, "Addons", cluster=training, volume=lustre(stack, network).volume_source
            ),
            "TrainingPodIdentity": lambda: TrainingPodIdentity(stack, "Identity", cluster=training),
            "KarpenterController": lambda: KarpenterController(stack, "Karpenter", cluster=training),
            "JobSequence": lambda: JobSequence(stack, "Jobs", cluster=training),
            "KubeflowTrainer": lambda: KubeflowTrainer(stack, "Trainer", cluster=training),
            "TrainingDashboard": lambda: TrainingDashboard(stack, "Dashboard", cluster_name=training),
        }[construct]()

    return build


# --- Imported clusters and the attributes they may lack ----------------------------------------------------------


def on_existing(construct: str, **missing) -> Callable[[cdk.App], None]:
    """``construct`` on an imported cluster (without the attributes ``missing`` sets to None)."""

    def build(app):
        stack, network, cluster = existing_cluster(app, **missing)
        {
            "TrainingNodeGroup": lambda: node_group(stack, network, cluster),
            "KarpenterController": lambda: KarpenterController(stack, "Karpenter", cluster=cluster),
            "ClusterAddons": lambda: ClusterAddons(
                stack, "Addons", cluster=cluster, volume=lustre(stack, network).volume_source
            ),
            "JobSequence": lambda: JobSequence(stack, "Jobs", cluster=cluster).add("Eval", eval_chart()),
            "KubeflowTrainer": lambda: KubeflowTrainer(stack, "Trainer", cluster=cluster),
            "TrainingPodIdentity": lambda: TrainingPodIdentity(stack, "Identity", cluster=cluster),
            "TrainingDashboard": lambda: TrainingDashboard(stack, "Dashboard", cluster_name=cluster.cluster_name),
        }[construct]()

    return build


# --- Node groups, pools and their controller ---------------------------------------------------------------------


def pool_with_its_controller(app):
    stack, network, cluster = existing_cluster(app)
    node_pool(stack, network, cluster, KarpenterController(stack, "Karpenter", cluster=cluster))


def pool_without_a_controller(app):
    stack, network, cluster = existing_cluster(app)
    node_pool(stack, network, cluster, None)  # TrainingClusterStack.karpenter of a stack with node groups


def pool_in_a_later_stack_than_its_controller(app):
    stack, network, training = training_cluster(app)
    controller = KarpenterController(stack, "Karpenter", cluster=training.cluster, after=[training.system_nodegroup])
    node_pool(cdk.Stack(app, "Nodes", env=ENV), network, training.cluster, controller)


def pool_built_after_the_cluster_addons(app):
    stack, network, cluster = existing_cluster(app)
    controller = KarpenterController(stack, "Karpenter", cluster=cluster)
    ClusterAddons(stack, "Addons", cluster=cluster, volume=lustre(stack, network).volume_source)
    node_pool(stack, network, cluster, controller)


def shared_volume(claim: str, nodes: str) -> Callable[[cdk.App], None]:
    """A node group or pool given the add-ons' claim (``claim="addons"``) or none (``claim="none"``), then a job."""

    def build(app):
        stack, network, cluster = existing_cluster(app)
        if nodes == "pool":
            group = node_pool(stack, network, cluster, KarpenterController(stack, "Karpenter", cluster=cluster))
        else:
            group = node_group(stack, network, cluster)
        addons = ClusterAddons(stack, "Addons", cluster=cluster, volume=lustre(stack, network).volume_source)
        group.add_shared_volume(addons.volume_chart.claim_name if claim == "addons" else None)
        jobs = JobSequence(stack, "Jobs", cluster=cluster, prerequisites=addons.job_prerequisites)
        jobs.add("Train", VolcanoJobChart(name="t", image="example.com/t:1", node_group=group.topology, script="/t"))

    return build


# --- Storage -----------------------------------------------------------------------------------------------------


def storage_of_node_groups_in_a_later_stack(app):
    _, network, training = training_cluster(app)
    later = cdk.Stack(app, "Training", env=ENV)
    nodes = node_group(later, network, training.cluster, node_role=training.node_role)
    lustre(later, network).allow_clients(nodes.security_group, training.cluster.cluster_security_group)
    EfsStorage(later, "Efs", vpc=network.vpc).allow_clients(nodes.security_group)


def efs_on_a_vpc_without_private_subnets(app):
    stack = cdk.Stack(app, "Storage", env=ENV)
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["us-west-2a"], public_subnet_ids=["subnet-1"]
    )
    EfsStorage(stack, "Efs", vpc=vpc)


def addons_with(volume: str) -> Callable[[cdk.App], None]:
    """ClusterAddons given a Lustre or EFS volume source, or none."""

    def build(app):
        stack, network, cluster = existing_cluster(app)
        source = {
            "lustre": lambda: lustre(stack, network).volume_source,
            "efs": lambda: EfsStorage(stack, "Efs", vpc=network.vpc).volume_source,
            "none": lambda: None,
        }[volume]()
        ClusterAddons(stack, "Addons", cluster=cluster, volume=source)

    return build


def addons_given_a_chart_named_by(name: str) -> Callable[[cdk.App], None]:
    """``ClusterAddons.add_chart`` of a ConfigMap named ``name``, or (``name="file-system-id"``) after the file
    system's ID, a token until deploy."""

    def build(app):
        stack, network, cluster = existing_cluster(app)
        storage = lustre(stack, network)
        addons = ClusterAddons(stack, "Addons", cluster=cluster, volume=storage.volume_source)
        chart = cdk8s.Chart(cdk8s.App(), "Settings")
        config_name = storage.file_system_id if name == "file-system-id" else name
        cdk8s.ApiObject(
            chart, "Config", api_version="v1", kind="ConfigMap", metadata={"name": config_name, "namespace": "training"}
        )
        addons.add_chart("Settings", chart)

    return build


# --- Jobs, the Trainer, the image --------------------------------------------------------------------------------


def jobs_after_the_addons_and_the_trainer(app):
    stack, network, cluster = existing_cluster(app)
    addons = ClusterAddons(stack, "Addons", cluster=cluster, volume=lustre(stack, network).volume_source)
    trainer = KubeflowTrainer(stack, "Trainer", cluster=cluster, after=[addons.volcano])
    jobs = JobSequence(
        stack, "Jobs", cluster=cluster, prerequisites=[*addons.job_prerequisites, *trainer.job_prerequisites]
    )
    train = TrainJobChart(
        name="train", image="example.com/t:1", node_group=CPU_NODES, script="/t", resolve=jobs.resolve
    )
    jobs.add("Train", train)
    jobs.add("Report", eval_chart(), wait_for=[train])


def job_waiting_for_a_missing_job(app):
    stack, _, cluster = existing_cluster(app)
    JobSequence(stack, "Jobs", cluster=cluster).add("Eval", eval_chart(), wait_for=[None])  # seed_jobs of no seed


def job_on_the_image_of(repository: str) -> Callable[[cdk.App], None]:
    """A job on ``TrainingImageRepository.image_uri`` of a repository with an image directory, or without one
    (``image_uri`` None), or on ``image_uri_for_tag``."""

    def build(app):
        stack, network, cluster = existing_cluster(app)
        directory = str(REPO / "images" / "cifar10-ddp") if repository == "image_directory" else None
        images = TrainingImageRepository(stack, "Images", image_directory=directory)
        image = images.image_uri_for_tag("v1") if repository == "tag" else images.image_uri
        jobs = JobSequence(stack, "Jobs", cluster=cluster)
        group = node_group(stack, network, cluster)
        jobs.add("Train", VolcanoJobChart(name="t", image=image, node_group=group.topology, script="/t"))

    return build


# --- The hybrid workflow -----------------------------------------------------------------------------------------


def hybrid_on(variant: str) -> Callable[[cdk.App], None]:
    """The hybrid workflow with each thing it takes from another construct present, or one of them absent."""

    def build(app):
        with_endpoint = variant != "imported-without-endpoint"
        endpoint = dict(cluster_endpoint=ENDPOINT, cluster_certificate_authority_data="Q0VS") if with_endpoint else {}
        stack, network, cluster = existing_cluster(app, **endpoint)
        props = {
            "repository": lambda: dict(
                image_repository=TrainingImageRepository(stack, "Images").repository,
                apply_after=ClusterAddons(
                    stack, "Addons", cluster=cluster, volume=lustre(stack, network).volume_source
                ).training_namespace.of_kind("Namespace"),
            ),
            "image-asset-without-image-directory": lambda: dict(
                image_repository=TrainingImageRepository(stack, "Images").image_asset
            ),
            "lustre-instead-of-efs": lambda: dict(efs=lustre(stack, network)),
            "private-endpoint": lambda: dict(endpoint_access=eks.EndpointAccess.PRIVATE),
            "imported-without-endpoint": lambda: dict(endpoint_access=None),
        }[variant]()
        hybrid_workflow(stack, network, cluster, **props)

    return build


def hybrid_with_the_file_system_of_an_earlier_stack(app):
    stack, network, cluster = existing_cluster(app, cluster_endpoint=ENDPOINT, cluster_certificate_authority_data="Q")
    efs = EfsStorage(stack, "Efs", vpc=network.vpc)
    hybrid_workflow(cdk.Stack(app, "Workflow", env=ENV), network, cluster, efs=efs)


def preflight_of_an_existing_cluster(app):
    stack, network, cluster = existing_cluster(app)
    node_group(stack, network, cluster)
    node_pool(stack, network, cluster, KarpenterController(stack, "Karpenter", cluster=cluster))
    lustre(stack, network)
    EfsStorage(stack, "Efs", vpc=network.vpc)
    Preflight(stack, "Preflight")


CLUSTER_HINT = "a TrainingCluster's .cluster"
MISSING_IMPORT = "import it with eks.Cluster.from_cluster_attributes"

CASES = [
    Case("everything-on-a-training-cluster", everything_on_a_training_cluster),
    Case("lustre.grant_csi_driver-without-the-driver", grant_csi_driver_of_a_cluster_without_it, "fsx_csi_driver=True"),
    Case("lustre.grant_csi_driver-storage-in-a-later-stack", grant_csi_driver_to_storage_of_a_later_stack),
    Case("lustre.grant_csi_driver-storage-in-an-earlier-stack", grant_csi_driver_to_storage_of_an_earlier_stack),
    Case("cluster-vpc-without-private-subnets", cluster_on_a_vpc_without_private_subnets, "a VPC with private subnets"),
    *(
        Case(
            f"{name}-given-the-training-cluster",
            training_cluster_given_where_its_eks_cluster_goes(name),
            ".cluster.cluster_name" if name == "TrainingDashboard" else CLUSTER_HINT,
        )
        for name in (
            "TrainingNodeGroup",
            "ClusterAddons",
            "TrainingPodIdentity",
            "KarpenterController",
            "JobSequence",
            "KubeflowTrainer",
            "TrainingDashboard",
        )
    ),
    *(
        Case(f"{name}-on-an-existing-cluster", on_existing(name))
        for name in (
            "TrainingNodeGroup",
            "KarpenterController",
            "ClusterAddons",
            "JobSequence",
            "KubeflowTrainer",
            "TrainingPodIdentity",
            "TrainingDashboard",
        )
    ),
    Case("TrainingNodeGroup-on-an-existing-cluster-without-vpc", on_existing("TrainingNodeGroup", vpc=None), "vpc="),
    Case(
        "TrainingNodeGroup-on-an-existing-cluster-without-cluster-security-group",
        on_existing("TrainingNodeGroup", cluster_security_group_id=None),
        "cluster_security_group_id=",
    ),
    *(
        Case(f"{name}-on-an-existing-cluster-without-kubectl-provider", on_existing(name, kubectl_provider=None), hint)
        for name, hint in (
            ("KarpenterController", "kubectl_provider="),
            ("ClusterAddons", "kubectl_provider="),
            ("JobSequence", "kubectl_provider="),
            ("KubeflowTrainer", "kubectl_provider="),
        )
    ),
    Case("TrainingNodePool-with-its-controller", pool_with_its_controller),
    Case("TrainingNodePool-without-a-controller", pool_without_a_controller, "KarpenterController(scope, id"),
    Case("TrainingNodePool-in-a-later-stack-than-its-controller", pool_in_a_later_stack_than_its_controller),
    Case(
        "TrainingNodePool-after-ClusterAddons",
        pool_built_after_the_cluster_addons,
        "TrainingNodePools first, then its ClusterAddons",
    ),
    Case("TrainingNodeGroup.add_shared_volume-of-the-addons-claim", shared_volume("addons", "group")),
    Case(
        "TrainingNodeGroup.add_shared_volume-without-a-claim",
        shared_volume("none", "group"),
        "ClusterAddons.volume_chart.claim_name",
    ),
    Case("TrainingNodePool.add_shared_volume-of-the-addons-claim", shared_volume("addons", "pool")),
    Case(
        "TrainingNodePool.add_shared_volume-without-a-claim",
        shared_volume("none", "pool"),
        "ClusterAddons.volume_chart.claim_name",
    ),
    Case("storage-of-node-groups-in-a-later-stack", storage_of_node_groups_in_a_later_stack),
    Case("EfsStorage-vpc-without-private-subnets", efs_on_a_vpc_without_private_subnets, "a VPC with private subnets"),
    Case("ClusterAddons-lustre-volume", addons_with("lustre")),
    Case("ClusterAddons-efs-volume", addons_with("efs")),
    Case("ClusterAddons-without-a-volume", addons_with("none"), "a LustreVolumeSource (LustreStorage)"),
    Case("ClusterAddons.add_chart-named", addons_given_a_chart_named_by("settings")),
    Case(
        "ClusterAddons.add_chart-named-by-a-file-system-id",
        addons_given_a_chart_named_by("file-system-id"),
        "literal metadata.name",
    ),
    Case("JobSequence-after-ClusterAddons-and-KubeflowTrainer", jobs_after_the_addons_and_the_trainer),
    Case("JobSequence.add-waiting-for-no-job", job_waiting_for_a_missing_job, "wait_for=[None]"),
    Case("job-on-TrainingImageRepository.image_uri", job_on_the_image_of("image_directory")),
    Case("job-on-TrainingImageRepository.image_uri_for_tag", job_on_the_image_of("tag")),
    Case(
        "job-on-TrainingImageRepository.image_uri-without-image-directory",
        job_on_the_image_of("none"),
        "image=None: a container image reference",
    ),
    Case("HybridTrainingWorkflow-repository", hybrid_on("repository")),
    Case(
        "HybridTrainingWorkflow-image-asset-without-image-directory",
        hybrid_on("image-asset-without-image-directory"),
        "image_repository=None: an ecr.IRepository or the ecr_assets.DockerImageAsset",
    ),
    Case("HybridTrainingWorkflow-lustre-instead-of-efs", hybrid_on("lustre-instead-of-efs"), "an EfsStorage"),
    Case("HybridTrainingWorkflow-private-endpoint", hybrid_on("private-endpoint"), "a public API endpoint"),
    Case(
        "HybridTrainingWorkflow-imported-without-endpoint",
        hybrid_on("imported-without-endpoint"),
        "cluster_endpoint=",
    ),
    Case("HybridTrainingWorkflow-efs-of-an-earlier-stack", hybrid_with_the_file_system_of_an_earlier_stack),
    Case("Preflight-of-an-existing-cluster", preflight_of_an_existing_cluster),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_composition_synthesizes_or_says_what_is_missing(case: Case):
    app = new_app()
    if case.refused is None:
        case.build(app)
        assert app.synth().stacks
        return
    with pytest.raises(ConfigurationError) as raised:
        case.build(app)
    assert type(raised.value) is ConfigurationError
    assert any(case.refused in problem for problem in raised.value.problems), raised.value


def test_the_cases_have_distinct_ids():
    assert len({case.id for case in CASES}) == len(CASES)


def test_a_grant_to_the_csi_driver_of_an_earlier_stack_lives_in_the_storage_stack():
    """The cluster's stack never refers to the file system of a later stack: the grant is a policy of the storage's
    stack, attached to the driver's role (by reference to the cluster's stack)."""
    app = new_app()
    grant_csi_driver_to_storage_of_a_later_stack(app)
    templates = {artifact.stack_name: artifact.template for artifact in app.synth().stacks}
    grants = [
        resource["Properties"]
        for resource in templates["Storage"]["Resources"].values()
        if resource["Type"] == "AWS::IAM::Policy"
    ]
    (grant,) = grants
    (statement,) = grant["PolicyDocument"]["Statement"]
    assert statement["Action"] == "fsx:UpdateFileSystem"
    assert "FsxCsiDriverRole" in json.dumps(grant["Roles"]), "the role of the cluster stack, by reference"
    assert "fsx:UpdateFileSystem" not in json.dumps(templates["Cluster"])
