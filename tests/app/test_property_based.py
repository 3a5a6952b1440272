"""Property-based tests: any value, of any JSON type, at any context key or construct prop, is either accepted and
gives a consistent stack, or refused with the library's own ConfigurationError; never another exception."""

from __future__ import annotations

import functools
import inspect
import json
from typing import Any, Callable, Dict

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import app as default_app
from tests.support.apps import TRAINIUM_EKS, build_default_app, build_default_stack, new_app
from trainium_eks.constructs.cluster import ADMIN_PRINCIPAL_ARN, TrainingCluster, public_endpoint_cidr_problem
from trainium_eks.constructs.cluster_addons import ClusterAddons
from trainium_eks.constructs.dns_firewall import DnsFirewall
from trainium_eks.constructs.efs_storage import EfsStorage
from trainium_eks.constructs.hybrid_workflow import HybridTrainingWorkflow
from trainium_eks.constructs.image_repository import TrainingImageRepository
from trainium_eks.constructs.job_sequence import JobSequence
from trainium_eks.constructs.karpenter_controller import KarpenterController
from trainium_eks.constructs.kubectl_handler_guard import KubectlHandlerGuard
from trainium_eks.constructs.kubectl_invocation_alarm import KubectlInvocationAlarm
from trainium_eks.constructs.kubeflow_trainer import KubeflowTrainer
from trainium_eks.constructs.lustre_storage import LustreStorage
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.constructs.preflight import Preflight
from trainium_eks.constructs.training_dashboard import TrainingDashboard
from trainium_eks.constructs.training_node_group import TrainingNodeGroup
from trainium_eks.constructs.training_node_pool import TrainingNodePool
from trainium_eks.constructs.training_pod_identity import TrainingPodIdentity
from trainium_eks.core.conventions import EfsVolumeSource, LustreVolumeSource, Taint
from trainium_eks.core.validation import ConfigurationError, bucket_name_problem
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import INSTANCE_CATALOG, Accelerator
from trainium_eks.facts.dns_domains import domain_pattern_problem
from trainium_eks.facts.regions import AZ_IDS_BY_REGION, partition_of
from trainium_eks.manifests.access.job_release_access import JobReleaseAccessChart, JobReleaseCreatorChart
from trainium_eks.manifests.access.system_network_policy import SystemNetworkPolicyChart
from trainium_eks.manifests.access.training_namespace import TrainingNamespaceChart
from trainium_eks.manifests.access.training_network_policy import TrainingNetworkPolicyChart
from trainium_eks.manifests.access.workflow_access import WorkflowAccessChart
from trainium_eks.manifests.addons.efa_device_plugin import EfaDevicePluginChart
from trainium_eks.manifests.addons.etcd import EtcdChart
from trainium_eks.manifests.addons.neuron_device_plugin import NeuronDevicePluginChart
from trainium_eks.manifests.addons.nvidia_device_plugin import NvidiaDevicePluginChart
from trainium_eks.manifests.addons.tensorboard import TensorBoardChart
from trainium_eks.manifests.addons.training_runtime import TrainingRuntimeChart
from trainium_eks.manifests.addons.volcano_queue import VolcanoQueueChart
from trainium_eks.manifests.jobs.dataset_staging import DatasetStagingChart
from trainium_eks.manifests.jobs.distributed_workload import DistributedWorkload
from trainium_eks.manifests.jobs.job_release import JobReleaseChart
from trainium_eks.manifests.jobs.pytorch_job import PyTorchJobChart
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.train_job import TrainJobChart
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart
from trainium_eks.manifests.storage.efs_volume import EfsVolumeChart
from trainium_eks.manifests.storage.lustre_volume import LustreVolumeChart
from trainium_eks.stacks.app_context import KNOWN_KEYS, STACK_KEYS, STACKS

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=4,
)
"""Any JSON value: what cdk.json can hold."""

NEAR_VALID: Dict[str, st.SearchStrategy] = {
    "instanceType": st.sampled_from(sorted(INSTANCE_CATALOG) + ["trn1.32XLARGE", " trn1.32xlarge", "trn3.48xlarge"]),
    "nodeCount": st.integers(-2, 460) | st.integers(-2, 460).map(str) | st.just("4.0"),
    "trainiumAzId": st.sampled_from([az for ids in AZ_IDS_BY_REGION.values() for az in ids] + ["usw2-az9", ""]),
    "region": st.sampled_from(sorted(AZ_IDS_BY_REGION) + ["US-WEST-2", "us-west-2 ", "eu-mars-1"]),
    "account": st.text("0123456789", min_size=10, max_size=13),
    "kubernetesVersion": st.sampled_from(list(versions.KUBERNETES_VERSIONS) + ["1.33", "1.37", "v1.36", "1.36.0"]),
    "lustreStorageGiB": st.integers(0, 10**10) | st.sampled_from([1200, 2400, 4800, 3600, "2400"]),
    "dataBucketName": st.text("abcxyz019.-", min_size=1, max_size=70) | st.sampled_from(["xn--a1b", "a..b", "1.2.3.4"]),
    "dataBucketPrefix": st.text("ab/.*? -", max_size=12) | st.sampled_from(["", "datasets/", "datasets", "/d/"]),
    "dataExportPrefix": st.text("ab/.*? -", max_size=12) | st.sampled_from(["", "runs/", "runs", "/runs/"]),
    "adminRoleArn": st.sampled_from(
        [
            "arn:aws:iam::123456789012:role/Admin",
            "arn:aws-cn:iam::123456789012:role/Admin",
            "arn:aws:iam::123456789012:user/alice",
            "arn:aws:sts::123456789012:assumed-role/Admin/me",
            "arn:aws:iam::123456789012:role/Admin\n",
        ]
    ),
    "kubeflowAzId": st.sampled_from([az for ids in AZ_IDS_BY_REGION.values() for az in ids] + ["usw2-az9", ""]),
    "kubeflowCpuNodes": st.integers(-2, 460) | st.integers(-2, 460).map(str),
    "kubeflowAcceleratedType": st.sampled_from(sorted(INSTANCE_CATALOG) + ["", "g5.XLARGE"]),
    "kubeflowAcceleratedNodes": st.integers(-2, 460) | st.integers(-2, 460).map(str),
    "composerInstanceType": st.sampled_from(sorted(INSTANCE_CATALOG) + ["g7.xlarge"]),
    "composerNodeCount": st.integers(-2, 460) | st.integers(-2, 460).map(str),
    "composerAzId": st.sampled_from([az for ids in AZ_IDS_BY_REGION.values() for az in ids] + ["use1-az0"]),
    "stacks": st.lists(st.sampled_from([*STACKS, "trainiumeks", ""]), max_size=3).map(",".join),
    "provisioning": st.sampled_from(["karpenter", "node-group", "Karpenter", "nodegroup", ""]),
    "idleMinutes": st.integers(-2, 1500) | st.integers(-2, 1500).map(str) | st.just(""),
    "preflight": st.sampled_from([True, False, "true", "false", "True", "no", ""]),
    "publicEndpointCidrs": st.sampled_from(
        [
            "",
            "203.0.113.0/24",
            "198.51.100.7/32,203.0.113.0/24",
            "0.0.0.0/0",
            "203.0.113.5/24",
            "203.0.113.0/33",
            "10.0.0.0/8, 192.0.2.0/24",
            "198.51.100.7",
            "2001:db8::/32",
            "203.0.113.0/24,203.0.113.0/24",
            ",",
        ]
    )
    | st.lists(st.sampled_from(["203.0.113.0/24", "192.0.2.1/32", "192.0.2.1/24", " 192.0.2.0/24"]), max_size=3),
    "dnsFirewall": st.sampled_from(["block", "alert", "off", "Block", "deny", ""]),
    "kubectlInvocationAlarm": st.sampled_from([True, False, "true", "false", "True", "yes", ""]),
    "networkPolicyMode": st.sampled_from(["strict", "standard", "Strict", "default", ""]),
    "dnsAllowedDomains": st.text("ab.*-_ ,", max_size=16)
    | st.lists(st.sampled_from(["example.com", "*.example.com", "*", "EXAMPLE.org", "a..b", ""]), max_size=3),
}

STACK_OF_KEY = {key: stack for stack, keys in STACK_KEYS.items() for key in keys.values()}
"""The stack a context key configures; shared keys are checked on the TrainiumEks stack."""

ALLOWED_ACCELERATORS = {
    "accelerated_nodes": (Accelerator.NEURON, Accelerator.NVIDIA),
    "cpu_nodes": (Accelerator.NONE,),
    "gpu_nodes": (Accelerator.NVIDIA, Accelerator.NONE),
}


def build_for(key: str, value: Any) -> Dict[str, Any]:
    """The stacks of the default app that ``key=value`` configures, by name."""
    if key == "stacks":
        return default_app.build_app(new_app(stacks=value))
    name = STACK_OF_KEY.get(key, TRAINIUM_EKS)
    _, stack = build_default_stack(name, **{key: value})
    return {name: stack}


def check_accepted_settings(stacks: Dict[str, Any], key: str, value: Any) -> None:
    """Stacks built from an accepted value carry only values the library allows."""
    if key == "stacks":
        wanted = {name.strip() for name in (value or "").split(",")} - {""}
        assert set(stacks) == (wanted or set(STACKS))
    for name, stack in stacks.items():
        for attribute, allowed in ALLOWED_ACCELERATORS.items():
            nodes = getattr(stack, attribute, None)
            if nodes is None:
                continue
            if name == TRAINIUM_EKS:
                allowed = (Accelerator.NEURON,)
            assert nodes.instance.accelerator in allowed
            assert 1 <= nodes.node_count <= 450
            assert (
                nodes.node_count == 1 or nodes.instance.efa_supported or nodes.instance.accelerator is Accelerator.NONE
            )
        assert stack.cluster.kubernetes_version in versions.KUBERNETES_VERSIONS
        assert stack.region in AZ_IDS_BY_REGION
        if key == "dataBucketName" and value:
            assert bucket_name_problem(value) is None
        if key in ("dataBucketPrefix", "dataExportPrefix") and value:
            assert isinstance(value, str) and value.endswith("/") and not value.startswith("/")
            assert value == value.strip() and not {"*", "?"} & set(value)
            assert key != "dataExportPrefix", "an export prefix needs a data bucket"
        if key == "account" and value:
            assert isinstance(value, str) and len(value) == 12 and value.isdigit()
        if key == "adminRoleArn" and value:
            match = ADMIN_PRINCIPAL_ARN.fullmatch(value)
            assert match is not None and match.group("partition") == partition_of(stack.region)
        if key == "idleMinutes" and value not in ("", None):
            nodes = stack.accelerated_nodes
            assert 1 <= nodes.idle_timeout.to_minutes() <= 24 * 60
        if key == "preflight":
            assert value in (None, True, False, "true", "false"), "unset (null) is the default"
            assert (stack.preflight is not None) is (value in (None, True, "true"))
        if key == "publicEndpointCidrs":
            cidrs = stack.cluster.public_endpoint_cidrs
            assert all(public_endpoint_cidr_problem(cidr) is None for cidr in cidrs)
            assert len(set(cidrs)) == len(cidrs)
            config = stack.cluster.cluster.node.default_child.resources_vpc_config
            assert bool(config.endpoint_public_access) is bool(cidrs)
            assert list(config.public_access_cidrs or []) == cidrs
        if key == "provisioning":
            assert stack.props.provisioning.value == (value or "karpenter"), "unset (null) is the default"
        if key == "kubectlInvocationAlarm":
            assert (stack.cluster.invocation_alarm is not None) is (value in (True, "true"))
        if key == "networkPolicyMode":
            assert stack.cluster.network_policy_mode == (value or "strict"), "unset (null) is the default"
        if key == "dnsFirewall":
            mode = value or "block"
            assert (stack.dns_firewall is None) is (mode == "off")
            assert stack.dns_firewall is None or stack.dns_firewall.mode.value == mode
        if key == "dnsAllowedDomains" and value:
            assert all(domain_pattern_problem(domain) is None for domain in stack.dns_firewall.domains)
            assert len(set(stack.dns_firewall.domains)) == len(stack.dns_firewall.domains)
        if key == "lustreStorageGiB":
            assert (
                stack.storage.volume_source.storage_gib in (1200, 2400)
                or stack.storage.volume_source.storage_gib % 2400 == 0
            )


@pytest.mark.parametrize("key", KNOWN_KEYS)
@SETTINGS
@given(data=st.data())
def test_any_value_of_any_context_key_is_accepted_consistently_or_refused_by_the_library(key, data):
    value = data.draw(JSON | NEAR_VALID[key])
    try:
        stacks = build_for(key, value)
    except ConfigurationError as error:
        assert error.problems, "the error lists its problems"
        return
    check_accepted_settings(stacks, key, value)


@SETTINGS
@given(key=st.text(min_size=1, max_size=20).filter(lambda k: ":" not in k and not k.startswith("@")), value=JSON)
def test_an_unknown_context_key_is_always_refused(key, value):
    if key in KNOWN_KEYS or key == "cli-telemetry" or value is None:  # a null context value is an unset key
        return
    with pytest.raises(ConfigurationError) as raised:
        build_default_app(**{key: value})
    assert any(problem.startswith(f"{key}=") for problem in raised.value.problems)


# --- Construct and chart props ------------------------------------------------------------------------------------

ODD = st.sampled_from([object(), b"bytes", ("a",), 3.5, -1, True, "", " x", lambda: 0, float("inf"), float("nan")])
"""Values a caller might pass by mistake that no JSON holds."""

TOPOLOGY = NodeGroupTopology(
    "trn1.32xlarge", 2, 4, 8, (Taint("aws.amazon.com/neuron", "true", "NoSchedule"),), frozenset({"fsx-claim"})
)
VOLUME = LustreVolumeSource("fs-0123456789abcdef0", "fs.example", "abcdefgh", 1200)
EFS_VOLUME = EfsVolumeSource("fs-0123456789abcdef1")
CPU_TOPOLOGY = NodeGroupTopology("m5.xlarge", 2, 2, 0, (), frozenset({"efs-sc-claim"}))
HELD_JOB = VolcanoJobChart(
    name="held", image="example.com/i:1", node_group=TOPOLOGY, script="/t.py", wait_for=["job/data-0123456789"]
)
RUN_TEMPLATE = TrainJobChart(
    name="run",
    image="example.com/i:1",
    node_group=CPU_TOPOLOGY,
    script="/opt/cifar10/launch.py",
    launcher="direct",
    volumes={"efs-sc-claim": "/data"},
)


class Scene:
    """A stack with an imported cluster (cheap to build) and a network, shared by the examples of one test; each
    example builds its construct under a new id."""

    def __init__(self) -> None:
        self.stack = cdk.Stack(new_app(), "Props", env=cdk.Environment(region="us-west-2", account="123456789012"))
        self.network = TrainingNetwork(self.stack, "Network", node_az_id="usw2-az4")
        provider = eks.KubectlProvider.from_kubectl_provider_attributes(
            self.stack,
            "Kubectl",
            service_token="arn:aws:lambda:us-west-2:123456789012:function:kubectl",
            role=iam.Role.from_role_arn(self.stack, "KubectlRole", "arn:aws:iam::123456789012:role/kubectl"),
        )
        self.cluster = eks.Cluster.from_cluster_attributes(
            self.stack,
            "Cluster",
            cluster_name="existing",
            vpc=self.network.vpc,
            cluster_security_group_id="sg-0123456789abcdef0",
            cluster_endpoint="https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com",
            cluster_certificate_authority_data="Y2VydGlmaWNhdGU=",
            kubectl_provider=provider,
        )
        self.count = 0

    @functools.cached_property
    def karpenter(self) -> KarpenterController:
        """Karpenter on the scene's cluster (for the node pools)."""
        return KarpenterController(self.stack, "Karpenter", cluster=self.cluster)

    @functools.cached_property
    def kubectl_provider(self) -> eks.KubectlProvider:
        """A kubectl provider built in the scene, with its handler and provider framework (for the guard)."""
        layer = lambda_.LayerVersion.from_layer_version_arn(
            self.stack, "KubectlLayer", "arn:aws:lambda:us-west-2:123456789012:layer:kubectl:1"
        )
        return eks.KubectlProvider(self.stack, "BuiltKubectl", cluster=self.cluster, kubectl_layer=layer)

    @functools.cached_property
    def efs(self) -> EfsStorage:
        """A file system in the scene's VPC (for the workflow)."""
        return EfsStorage(self.stack, "SharedEfs", vpc=self.network.vpc)

    @functools.cached_property
    def repository(self) -> ecr.IRepository:
        """An existing image repository (for the workflow)."""
        return ecr.Repository.from_repository_name(self.stack, "Repository", "train")

    def next_id(self, name: str) -> str:
        self.count += 1
        return f"{name}{self.count}"


SCENES: Dict[str, Scene] = {}


def scene(case: str) -> Scene:
    if case not in SCENES:
        SCENES.clear()  # one scene alive at a time
        SCENES[case] = Scene()
    return SCENES[case]


def construct_factories(case: str) -> Dict[str, Callable[..., Any]]:
    """Factories of the constructs, building in the scene of ``case`` with everything else valid."""
    s = scene(case)
    return {
        "TrainingNodeGroup": lambda **p: TrainingNodeGroup(
            s.stack,
            s.next_id("Nodes"),
            **{"cluster": s.cluster, "subnet": s.network.node_subnet, **p},
        ),
        "TrainingNodePool": lambda **p: TrainingNodePool(
            s.stack,
            s.next_id("Pool"),
            **{"cluster": s.cluster, "subnet": s.network.node_subnet, "controller": s.karpenter, **p},
        ),
        "KarpenterController": lambda **p: KarpenterController(
            s.stack, s.next_id("Karpenter"), **{"cluster": s.cluster, **p}
        ),
        "DnsFirewall": lambda **p: DnsFirewall(s.stack, s.next_id("Dns"), **{"vpc": s.network.vpc, **p}),
        "KubectlHandlerGuard": lambda **p: KubectlHandlerGuard(
            s.stack, s.next_id("Guard"), **{"provider": s.kubectl_provider, **p}
        ),
        "KubectlInvocationAlarm": lambda **p: KubectlInvocationAlarm(
            s.stack, s.next_id("Alarm"), **{"provider": s.kubectl_provider, **p}
        ),
        "LustreStorage": lambda **p: LustreStorage(
            s.stack,
            s.next_id("Storage"),
            **{"vpc": s.network.vpc, "subnet": s.network.node_subnet, **p},
        ),
        "TrainingNetwork": lambda **p: TrainingNetwork(s.stack, s.next_id("Net"), **{"node_az_id": "usw2-az4", **p}),
        "ClusterAddons": lambda **p: ClusterAddons(
            s.stack, s.next_id("Addons"), **{"cluster": s.cluster, "volume": VOLUME, **p}
        ),
        "TrainingPodIdentity": lambda **p: TrainingPodIdentity(
            s.stack, s.next_id("Identity"), **{"cluster": s.cluster, **p}
        ),
        "TrainingDashboard": lambda **p: TrainingDashboard(
            s.stack, s.next_id("Dashboard"), **{"cluster_name": "existing", **p}
        ),
        "TrainingImageRepository": lambda **p: TrainingImageRepository(s.stack, s.next_id("Images"), **p),
        "TrainingCluster": lambda **p: TrainingCluster(s.stack, s.next_id("Eks"), **{"vpc": s.network.vpc, **p}),
        "JobSequence": lambda **p: JobSequence(s.stack, s.next_id("Jobs"), **{"cluster": s.cluster, **p}),
        "Preflight": lambda **p: Preflight(s.stack, s.next_id("Preflight"), **p),
        "EfsStorage": lambda **p: EfsStorage(s.stack, s.next_id("Efs"), **{"vpc": s.network.vpc, **p}),
        "KubeflowTrainer": lambda **p: KubeflowTrainer(s.stack, s.next_id("Trainer"), **{"cluster": s.cluster, **p}),
        "HybridTrainingWorkflow": lambda **p: HybridTrainingWorkflow(
            s.stack,
            s.next_id("Workflow"),
            **{
                "cluster": s.cluster,
                "endpoint_access": eks.EndpointAccess.PUBLIC_AND_PRIVATE,
                "train_job": RUN_TEMPLATE,
                "image_repository": s.repository,
                "image_uri": "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:1",
                "efs": s.efs,
                "vpc": s.network.vpc,
                "subnets": list(s.network.vpc.private_subnets),
                **p,
            },
        ),
    }


CHART_FACTORIES: Dict[str, Callable[..., Any]] = {
    "VolcanoJobChart": lambda **p: VolcanoJobChart(
        **{"name": "job", "image": "example.com/i:1", "node_group": TOPOLOGY, "script": "/t.py", **p}
    ),
    "DatasetStagingChart": lambda **p: DatasetStagingChart(
        **{"name": "data", "source": "s3://bucket/d.tar", "directory": "d", "image": "i:1", "node_group": TOPOLOGY, **p}
    ),
    "NeuronDevicePluginChart": lambda **p: NeuronDevicePluginChart(**p),
    "EfaDevicePluginChart": lambda **p: EfaDevicePluginChart(**{"registry": "r.example", **p}),
    "EtcdChart": lambda **p: EtcdChart(**p),
    "TensorBoardChart": lambda **p: TensorBoardChart(**p),
    "TrainingNamespaceChart": lambda **p: TrainingNamespaceChart(**p),
    "TrainingNetworkPolicyChart": lambda **p: TrainingNetworkPolicyChart(**p),
    "SystemNetworkPolicyChart": lambda **p: SystemNetworkPolicyChart(**{"namespace": "kube-system", **p}),
    "LustreVolumeChart": lambda **p: LustreVolumeChart(**{"volume": VOLUME, **p}),
    "VolcanoQueueChart": lambda **p: VolcanoQueueChart(**p),
    "TrainJobChart": lambda **p: TrainJobChart(
        **{"name": "job", "image": "example.com/i:1", "node_group": TOPOLOGY, "script": "/t.py", **p}
    ),
    "PyTorchJobChart": lambda **p: PyTorchJobChart(
        **{"name": "job", "image": "example.com/i:1", "node_group": TOPOLOGY, "script": "/t.py", **p}
    ),
    "TrainingRuntimeChart": lambda **p: TrainingRuntimeChart(**p),
    "EfsVolumeChart": lambda **p: EfsVolumeChart(**{"volume": EFS_VOLUME, **p}),
    "NvidiaDevicePluginChart": lambda **p: NvidiaDevicePluginChart(**p),
    "WorkflowAccessChart": lambda **p: WorkflowAccessChart(**p),
    "JobReleaseChart": lambda **p: JobReleaseChart(
        **{"job": HELD_JOB.manifest, "wait_for": list(HELD_JOB.wait_for), **p}
    ),
    "JobReleaseAccessChart": lambda **p: JobReleaseAccessChart(**{"namespace": "training", **p}),
    "JobReleaseCreatorChart": lambda **p: JobReleaseCreatorChart(**{"namespace": "training", "kind": "vcjob", **p}),
}


PROPS = {
    "TrainingNodeGroup": [
        "instance_type",
        "node_count",
        "min_size",
        "max_size",
        "efa_layout",
        "capacity",
        "root_volume_size_gib",
        "labels",
        "taints",
        "availability_zone_id",
        "subnet",
        "cluster",
        "node_role",
        "placement_group",
    ],
    "TrainingNodePool": [
        "instance_type",
        "node_count",
        "max_nodes",
        "idle_timeout",
        "efa_layout",
        "capacity",
        "root_volume_size_gib",
        "labels",
        "taints",
        "availability_zone_id",
        "subnet",
        "cluster",
        "controller",
        "placement_group",
    ],
    "KarpenterController": ["cluster", "after", "node_repair"],
    "KubectlHandlerGuard": ["provider"],
    "KubectlInvocationAlarm": ["provider", "topic", "trail"],
    "DnsFirewall": ["vpc", "allowed_domains", "extra_domains", "mode", "subnets", "priority"],
    "LustreStorage": [
        "storage_capacity_gib",
        "throughput_per_tib",
        "deployment_type",
        "bucket_path",
        "data_bucket_prefix",
        "export_prefix",
        "export_path",
        "automatic_backup_retention",
        "client_security_groups",
        "kms_key",
        "data_bucket",
        "vpc",
        "subnet",
    ],
    "TrainingNetwork": ["node_az_id", "availability_zone_ids", "cidr", "flow_log_retention"],
    "ClusterAddons": [
        "namespace",
        "service_account",
        "queue",
        "volume",
        "cluster",
        "node_instance_types",
        "nvidia_device_plugin",
        "after_nodes",
        "kubernetes_api_addresses",
    ],
    "TrainingPodIdentity": [
        "namespace",
        "service_account",
        "data_bucket",
        "data_read_prefix",
        "data_write_prefix",
        "data_bucket_endpoint",
        "cluster",
    ],
    "TrainingDashboard": ["cluster_name", "period"],
    "Preflight": ["timeout", "log_retention"],
    "TrainingImageRepository": ["repository_name", "image_directory", "build_args", "existing_repository"],
    "TrainingCluster": [
        "kubernetes_version",
        "admin_role_arn",
        "system_instance_type",
        "system_node_count",
        "addon_versions",
        "container_insights",
        "subnets",
        "endpoint_access",
        "public_endpoint_cidrs",
        "cluster_logging",
        "secrets_key",
        "node_role",
        "vpc",
        "fsx_csi_driver",
        "efs_csi_driver",
        "invocation_alarm",
        "network_policy_mode",
    ],
    "JobSequence": ["cluster", "prerequisites", "access_prerequisites", "release_timeout"],
    "VolcanoJobChart": [
        "name",
        "image",
        "node_group",
        "script",
        "module",
        "command",
        "args",
        "nodes",
        "processes_per_node",
        "neuron_devices",
        "efa_interfaces",
        "rendezvous",
        "launcher",
        "cache_set",
        "precompile",
        "volumes",
        "env",
        "wait_for",
        "namespace",
        "queue",
        "service_account",
        "max_retries",
        "resource_fraction",
        "internet_egress",
        "progress",
        "graceful_stop",
        "deadline_seconds",
    ],
    "DatasetStagingChart": [
        "name",
        "source",
        "sha256",
        "region",
        "directory",
        "image",
        "node_group",
        "claim",
        "unsigned",
        "namespace",
        "service_account",
        "backoff_limit",
        "deadline_seconds",
    ],
    "NeuronDevicePluginChart": ["image", "instance_types"],
    "EfaDevicePluginChart": ["registry", "image", "instance_types"],
    "EtcdChart": ["namespace", "image"],
    "TensorBoardChart": ["namespace", "claim_name", "log_dir", "image"],
    "TrainingNamespaceChart": ["namespace", "service_account"],
    "TrainingNetworkPolicyChart": ["namespace", "kubernetes_api_addresses"],
    "SystemNetworkPolicyChart": ["namespace", "create_namespace"],
    "LustreVolumeChart": ["volume", "namespace", "volume_name", "claim_name"],
    "VolcanoQueueChart": ["name", "weight"],
    "EfsStorage": ["vpc", "subnets", "client_security_groups", "kms_key", "transition_to_ia", "require_tls"],
    "KubeflowTrainer": ["cluster", "runtime_name", "volcano", "after"],
    "HybridTrainingWorkflow": [
        "train_job",
        "efs",
        "subnets",
        "image_uri",
        "data_directory",
        "data_job",
        "image_accelerators",
        "sagemaker_instance_type",
        "sagemaker_instance_count",
        "sagemaker_max_instance_count",
        "sagemaker_instance_types",
        "volume_size_gib",
        "max_runtime",
        "poll_interval",
        "output_prefix",
        "default_runtime",
        "namespace",
        "network_isolation",
        "kubernetes_group",
        "cluster",
        "endpoint_access",
        "image_repository",
        "vpc",
        "output_bucket",
        "server_access_logs_bucket",
        "inter_container_encryption",
        "apply_after",
        "jobs",
    ],
    "TrainJobChart": [
        "name",
        "runtime",
        "namespace",
        "queue",
        "nodes",
        "processes_per_node",
        "launcher",
        "args",
        "env",
        "wait_for",
        "deadline_seconds",
    ],
    "PyTorchJobChart": [
        "name",
        "namespace",
        "queue",
        "min_nodes",
        "nodes",
        "processes_per_node",
        "args",
        "env",
        "wait_for",
        "deadline_seconds",
    ],
    "TrainingRuntimeChart": ["name", "volcano", "queue", "max_restarts"],
    "EfsVolumeChart": ["volume", "namespace", "storage_class_name", "volume_name", "claim_name"],
    "NvidiaDevicePluginChart": ["image", "instance_types", "fail_on_init_error"],
    "WorkflowAccessChart": ["group", "namespace", "name"],
    "JobReleaseChart": ["job", "wait_for", "timeout_seconds"],
    "JobReleaseAccessChart": ["namespace"],
    "JobReleaseCreatorChart": ["namespace", "kind"],
}

CASES = [(name, prop) for name, props in PROPS.items() for prop in props]


def render(built: Any) -> None:
    """Render what was built: a chart's manifests, which must be plain JSON (no object, function, NaN or infinity
    reaches a manifest), or a construct's stack template."""
    if hasattr(built, "manifests") and callable(built.manifests):
        json.dumps(built.manifests(), allow_nan=False)
    else:
        cdk.assertions.Template.from_stack(cdk.Stack.of(built))


@pytest.mark.parametrize("factory,prop", CASES, ids=[f"{n}.{p}" for n, p in CASES])
@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(value=JSON | ODD)
def test_any_value_of_any_prop_is_accepted_or_refused_by_the_library(factory, prop, value):
    if factory in CHART_FACTORIES:
        build = CHART_FACTORIES[factory]
    else:
        build = construct_factories(f"{factory}.{prop}")[factory]
    try:
        built = build(**{prop: value})
    except ConfigurationError as error:
        assert error.problems
        return
    SCENES.clear()  # rendering synthesizes the scene's app: the next example needs a new one
    render(built)


WORKLOAD_PROPS = frozenset(inspect.signature(DistributedWorkload.__init__).parameters) - {"self", "problems"}
"""Props of every distributed job chart, fuzzed once through ``VolcanoJobChart``."""


@pytest.mark.parametrize("name", sorted(PROPS))
def test_the_property_tests_fuzz_every_prop(name):
    signature = inspect.signature(globals()[name].__init__).parameters.values()
    props = {p.name for p in signature if p.kind == p.KEYWORD_ONLY} - {"setting_names", "resolve"}
    forwards_workload_props = name.endswith("Chart") and any(p.kind == p.VAR_KEYWORD for p in signature)
    if forwards_workload_props and name != "VolcanoJobChart":
        props |= {"namespace", "wait_for"} & set(WORKLOAD_PROPS)
    elif name == "VolcanoJobChart":
        props |= WORKLOAD_PROPS - {"name"}
    assert props - set(PROPS[name]) == set(), f"add the props of {name} to PROPS"


def test_the_property_tests_cover_every_public_construct_and_chart():
    from trainium_eks import constructs as constructs_package

    covered = set(CHART_FACTORIES) | set(construct_factories("coverage"))
    values = {
        "EfaLayout",
        "NodeCapacity",
        "NodeProvisioning",
        "DnsFirewallMode",
        "LustreVolumeSource",
        "EfsVolumeSource",
        "NodeRole",
    }
    public = set(constructs_package.__all__) - values
    assert public - covered == set(), "add the construct to the factories and PROPS"
    assert set(PROPS) == covered
