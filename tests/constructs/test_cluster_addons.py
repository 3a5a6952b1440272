"""ClusterAddons inside the default stack: manifests, Volcano's Helm release, ordering, lifecycle."""

import json
import subprocess
import sys

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import assertions

from tests.support.apps import (
    KUBEFLOW_TRAINING,
    SHARED,
    TRAINIUM_EKS,
    build_default_app,
    default_template,
    new_app,
    resources_of,
    stack_template,
)
from tests.support.k8s_validation import validate_objects
from tests.support.manifests import applied_list, held_job
from trainium_eks.constructs.cluster import TrainingCluster
from trainium_eks.constructs.cluster_addons import (
    KUBECTL_HANDLER_TIMEOUT,
    SCALE_FROM_ZERO_SCHEDULER_CONF,
    ClusterAddons,
    helm_timeout,
)
from trainium_eks.constructs.karpenter_controller import KarpenterController
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.constructs.training_node_group import TrainingNodeGroup
from trainium_eks.constructs.training_node_pool import TrainingNodePool
from trainium_eks.core.conventions import LustreVolumeSource
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.facts import versions
from trainium_eks.manifests.jobs.job_release import HELD_JOB_LABEL

LUSTRE = LustreVolumeSource("fs-0123456789abcdef0", "fs.example", "abcdefgh", 1200)
MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
HELM = "Custom::AWSCDK-EKS-HelmChart"
CHARTS = (
    "NeuronDevicePlugin",
    "EfaDevicePlugin",
    "NvidiaDevicePlugin",
    "TrainingNamespace",
    "NetworkPolicies",
    "SharedVolume",
    "TensorBoard",
    "VolcanoQueue",
    "VolcanoNamespaceNetwork",
)


def manifests_by_id(template):
    return {k: v for k, v in resources_of(template, MANIFEST).items() if k.startswith("Addons")}


def chart_of(logical_id):
    return next(chart for chart in CHARTS if logical_id.startswith("Addons" + chart))


def logical_id(template, prefix):
    (found,) = [k for k in template.to_json()["Resources"] if k.startswith(prefix)]
    return found


def objects(resource):
    return applied_list(resource)


def test_every_object_of_every_chart_is_its_own_resource_keyed_by_its_identity(template):
    found = {}
    for key, resource in manifests_by_id(template).items():
        (obj,) = objects(resource)
        found.setdefault(chart_of(key), []).append(obj["kind"])
        name = obj["metadata"]["name"].replace("-", "").replace(".", "")
        assert key.startswith(f"Addons{chart_of(key)}{obj['kind']}"), key
        assert name in key, f"{key}: the object's name is part of its logical ID"
    assert {chart: sorted(kinds) for chart, kinds in found.items()} == {
        "NeuronDevicePlugin": ["ClusterRole", "ClusterRoleBinding", "DaemonSet", "NetworkPolicy", "ServiceAccount"],
        "EfaDevicePlugin": ["DaemonSet"],
        "TrainingNamespace": ["Namespace", "ServiceAccount"],
        "NetworkPolicies": ["NetworkPolicy"] * 3,
        "SharedVolume": ["PersistentVolume", "PersistentVolumeClaim"],
        "TensorBoard": ["Deployment", "NetworkPolicy", "Service"],
        "VolcanoQueue": ["Queue"],
        "VolcanoNamespaceNetwork": ["Namespace", "NetworkPolicy"],
    }


def test_nothing_relies_on_prune_and_every_object_is_applied_with_overwrite(template):
    for key, resource in resources_of(template, MANIFEST).items():
        assert "PruneLabel" not in resource["Properties"], f"{key}: the kubectl handler's prune skips many kinds"
        assert resource["Properties"]["Overwrite"] is True, f"{key}: kubectl apply, never create"
        (obj,) = objects(resource)
        assert not any(label.startswith("aws.cdk.eks/prune-") for label in obj["metadata"].get("labels", {}))


def test_only_the_namespace_volume_and_claim_are_retained(template):
    retained = set()
    for resource in manifests_by_id(template).values():
        if resource.get("DeletionPolicy") == "Retain":
            (obj,) = objects(resource)
            retained.add(obj["kind"])
        else:
            assert resource.get("DeletionPolicy", "Delete") == "Delete"
    assert retained == {"Namespace", "PersistentVolume", "PersistentVolumeClaim"}


def test_shared_volume_takes_the_file_system_attributes_from_the_stack(template):
    volume = manifests_by_id(template)[logical_id(template, "AddonsSharedVolumePersistentVolumefsxpv")]
    parts = volume["Properties"]["Manifest"]["Fn::Join"][1]
    tokens = [p for p in parts if not isinstance(p, str)]
    file_system = logical_id(template, "StorageFileSystem")
    assert tokens.count({"Ref": file_system}) == 2, "volumeHandle and the DNS name <id>.fsx.<region>.<suffix>"
    assert {"Fn::GetAtt": [file_system, "LustreMountName"]} in tokens


def test_volcano_is_installed_from_its_pinned_chart_on_the_system_nodes(template):
    (helm,) = [r for r in resources_of(template, HELM).values() if r["Properties"]["Release"] == "volcano"]
    props = helm["Properties"]
    assert (props["Repository"], props["Chart"], props["Version"]) == (
        versions.VOLCANO.repository,
        versions.VOLCANO.chart,
        versions.VOLCANO.version,
    )
    assert props["Namespace"] == "volcano-system" and props["Release"] == "volcano"
    assert props["Wait"] is True
    assert json.loads(props["Values"]) == {
        "basic": {"image_pull_policy": "IfNotPresent"},
        "custom": {
            "default_ns": {"trainium-eks/node-role": "system"},
            "scheduler_config_override": SCALE_FROM_ZERO_SCHEDULER_CONF,
        },
    }


def test_with_standing_nodes_only_volcano_keeps_its_charts_scheduler_configuration():
    template = default_template(provisioning="node-group")
    (helm,) = [r for r in resources_of(template, HELM).values() if r["Properties"]["Release"] == "volcano"]
    assert json.loads(helm["Properties"]["Values"])["custom"] == {"default_ns": {"trainium-eks/node-role": "system"}}


def test_the_scale_from_zero_configuration_is_the_charts_without_enqueue():
    """volcano-sh/volcano v1.15.1 installer/helm/chart/volcano/config/volcano-scheduler.conf: actions "enqueue,
    allocate, backfill"; tier 1 priority, gang (enablePreemptable false), conformance; tier 2 overcommit, drf
    (enablePreemptable false), predicates, proportion, nodeorder, binpack."""
    conf = yaml.safe_load(SCALE_FROM_ZERO_SCHEDULER_CONF)
    assert [a.strip() for a in conf["actions"].split(",")] == ["allocate", "backfill"]
    assert [[p["name"] for p in tier["plugins"]] for tier in conf["tiers"]] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"],
    ]


def test_a_pool_added_after_the_addons_is_refused_rather_than_left_unscheduled():
    app = new_app()
    stack = cdk.Stack(app, "Late", env=cdk.Environment(region="us-west-2"))
    network = TrainingNetwork(stack, "Network", node_az_id="usw2-az4")
    cluster = TrainingCluster(stack, "Cluster", vpc=network.vpc)
    ClusterAddons(stack, "Addons", cluster=cluster.cluster, volume=LUSTRE)
    controller = KarpenterController(stack, "Karpenter", cluster=cluster.cluster)
    with pytest.raises(ConfigurationError, match="TrainingNodePools first, then its ClusterAddons"):
        TrainingNodePool(stack, "Trn", cluster=cluster.cluster, subnet=network.node_subnet, controller=controller)


def lambda_timeout_seconds(template, function_prefix):
    (function,) = [
        v for k, v in resources_of(template, "AWS::Lambda::Function").items() if k.startswith(function_prefix)
    ]
    return function["Properties"]["Timeout"]


PINS_BY_CHART = {
    pin.chart: pin for pin in (versions.VOLCANO, versions.KUBEFLOW_TRAINER, versions.KARPENTER, versions.KARPENTER_CRD)
}


@pytest.mark.parametrize("stack", [TRAINIUM_EKS, KUBEFLOW_TRAINING])
def test_every_helm_command_ends_clearly_before_the_kubectl_handler_lambda_is_killed(stack):
    """Helm gives the wait and each hook phase the whole --timeout: their sum stays within the budget."""
    template = stack_template(stack)
    handler = lambda_timeout_seconds(template, "ClusterKubectlProviderHandler")
    assert handler == KUBECTL_HANDLER_TIMEOUT.to_seconds() == 900, "aws-eks-v2 runs helm in a 15-minute Lambda"
    releases = resources_of(template, HELM)
    assert releases
    for key, helm in releases.items():
        pin = PINS_BY_CHART[helm["Properties"]["Chart"]]
        timeout = helm["Properties"]["Timeout"]
        assert timeout.endswith("s"), timeout
        assert int(timeout[:-1]) * (1 + pin.hook_phases) <= handler - 240, f"{key}: leave minutes to report"


def test_volcanos_hook_and_wait_share_the_budget():
    assert helm_timeout(versions.VOLCANO).to_seconds() == 330, "a pre-install hook and the wait: 11 min / 2"
    assert helm_timeout(versions.KUBEFLOW_TRAINER).to_seconds() == 660


def depends_on(template, prefix):
    resource = template.to_json()["Resources"][logical_id(template, prefix)]
    return set(resource.get("DependsOn", []))


def test_ordering_is_expressed_as_stack_dependencies(template):
    namespace = logical_id(template, "AddonsTrainingNamespaceNamespace")
    account = logical_id(template, "AddonsTrainingNamespaceServiceAccount")
    claim = logical_id(template, "AddonsSharedVolumePersistentVolumeClaim")
    volcano = logical_id(template, "AddonsVolcano3")
    serving = logical_id(template, "AddonsVolcanoAdmissionServing")
    assert volcano in depends_on(template, "AddonsVolcanoAdmissionServing"), "CRDs and webhook first"
    assert serving in depends_on(template, "AddonsVolcanoQueueQueue"), "the webhook serving before the Queue"
    assert namespace in depends_on(template, "AddonsTrainingNamespaceServiceAccount")
    assert namespace in depends_on(template, "AddonsSharedVolumePersistentVolumeClaim")
    assert {namespace, logical_id(template, "AddonsTensorBoardService")} <= depends_on(
        template, "AddonsTensorBoardDeployment"
    ), "in a chart, services and accounts before the workload"
    assert logical_id(template, "AddonsNeuronDevicePluginServiceAccount") in depends_on(
        template, "AddonsNeuronDevicePluginDaemonSet"
    )
    queue_open = logical_id(template, "AddonsVolcanoQueueOpen")
    assert logical_id(template, "AddonsVolcanoQueueQueue") in depends_on(template, "AddonsVolcanoQueueOpen")
    for job in (
        "JobsStagingJob",
        "JobsPrecompileFabricCheckJob",
        "JobsPrecompileJob",
        "JobsTrainingFabricCheckJob",
        "JobsTrainingJob",
    ):
        assert {namespace, account, claim, queue_open} <= depends_on(template, job)


def test_jobs_wait_until_volcanos_queue_controller_has_opened_the_queue(template):
    """Volcano's job and PodGroup webhooks deny a job whose queue has no state yet (admit_job.go validateJobCreate)."""
    values = resources_of(template, "Custom::AWSCDK-EKS-KubernetesObjectValue")
    props = values[logical_id(template, "AddonsVolcanoQueueOpen")]["Properties"]
    assert (props["ObjectType"], props["ObjectName"], props["JsonPath"]) == (
        "queues.scheduling.volcano.sh",
        "training",
        ".status.state",
    )
    assert int(props["TimeoutSeconds"]) == 300


def test_the_queue_is_created_once_volcanos_admission_webhooks_serve(template):
    """Helm's wait ends when the admission pod is ready, which is before its server writes its CA and listens; the
    scheduler's ``default`` queue exists only once the queue webhooks have admitted it (tests/e2e/test_deploy.py)."""
    values = resources_of(template, "Custom::AWSCDK-EKS-KubernetesObjectValue")
    props = values[logical_id(template, "AddonsVolcanoAdmissionServing")]["Properties"]
    assert (props["ObjectType"], props["ObjectName"], props["JsonPath"]) == (
        "queues.scheduling.volcano.sh",
        "default",
        ".metadata.name",
    )
    assert int(props["TimeoutSeconds"]) == 300


def test_volcano_is_installed_once_the_system_nodes_exist(template):
    """Its pre-install hook Job and its pods run on the system nodes; with the nodes there, neither waits for them."""
    system_nodes = next(
        k
        for k, v in resources_of(template, "AWS::EKS::Nodegroup").items()
        if v["Properties"]["AmiType"] == "AL2023_x86_64_STANDARD"
    )
    assert system_nodes in depends_on(template, "AddonsVolcano3")


def test_efa_image_comes_from_the_eks_registry_of_the_stack_region():
    template = default_template(region="us-east-2", trainiumAzId="use2-az3")
    efa = manifests_by_id(template)[logical_id(template, "AddonsEfaDevicePluginDaemonSet")]
    assert (
        "602401143452.dkr.ecr.us-east-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:" in efa["Properties"]["Manifest"]
    )


def test_efa_registry_is_a_mapping_when_the_region_is_a_token():
    app = new_app()
    stack = cdk.Stack(app, "Agnostic")
    network = TrainingNetwork(stack, "Net", node_az_id="usw2-az4")
    cluster = TrainingCluster(stack, "Cluster", vpc=network.vpc)
    ClusterAddons(
        stack,
        "Addons",
        cluster=cluster.cluster,
        volume=LustreVolumeSource("fs-0123456789abcdef0", "fs.example", "abcdefgh", 1200),
        node_instance_types=["trn1.32xlarge"],
    )
    template = assertions.Template.from_stack(stack)
    mapping = template.to_json()["Mappings"]
    (accounts,) = [m for k, m in mapping.items() if k.startswith("AddonsEksRegistryAccounts")]
    assert accounts["af-south-1"] == {"account": "877085696533"}
    efa = manifests_by_id(template)[logical_id(template, "AddonsEfaDevicePluginDaemonSet")]
    assert "Fn::FindInMap" in json.dumps(efa["Properties"]["Manifest"])


def test_objects_embedded_in_the_template_validate(tmp_path):
    if not (SHARED / "k8s-schemas" / "extract_manifests.py").exists():
        pytest.skip("skipped: ../shared/k8s-schemas is absent")
    app, _ = build_default_app()
    assembly = app.synth()
    out = tmp_path / "cdk.out"
    out.mkdir()
    for artifact in assembly.stacks:
        (out / artifact.template_file).write_text(json.dumps(artifact.template))
    extracted = tmp_path / "manifests"
    subprocess.run(
        [sys.executable, str(SHARED / "k8s-schemas" / "extract_manifests.py"), str(out), str(extracted)],
        check=True,
        capture_output=True,
    )
    objects = [o for path in sorted(extracted.glob("*.yaml")) for o in yaml.safe_load_all(path.read_text()) if o]
    assert len(objects) >= 16
    held = [held_job(o) for o in objects if HELD_JOB_LABEL in (o["metadata"].get("labels") or {})]
    assert len(held) == 4, "the held jobs (two and their fabric checks) travel inside their releases: validate them"
    validate_objects([with_shaped_ids(o) for o in objects] + held, tmp_path)


def with_shaped_ids(obj):
    """``obj`` with the extractor's ``cfn-token`` placeholder in an EC2NodeClass's subnet and security group IDs
    given the shape EC2 gives them (``subnet-...``, ``sg-...``): those fields are the stack's own subnet ``Ref`` and
    security group ``GroupId`` (tests/constructs/test_training_node_pool.py), which the CRD's patterns check."""
    if obj.get("kind") != "EC2NodeClass":
        return obj
    spec = dict(obj["spec"])
    for field, prefix in (("subnetSelectorTerms", "subnet-"), ("securityGroupSelectorTerms", "sg-")):
        spec[field] = [
            {**term, "id": f"{prefix}0cfntoken"} if term.get("id") == "cfn-token" else term for term in spec[field]
        ]
    return {**obj, "spec": spec}


def plugins_of(template):
    return sorted(
        {chart for key in manifests_by_id(template) for chart in CHARTS[:3] if key.startswith("Addons" + chart)}
    )


@pytest.mark.parametrize(
    "instance_types,plugins",
    [
        ((), []),
        (("m5.xlarge",), []),
        (("g5.xlarge",), ["NvidiaDevicePlugin"]),
        (("p5.48xlarge",), ["EfaDevicePlugin", "NvidiaDevicePlugin"]),
        (("trn1.2xlarge",), ["NeuronDevicePlugin"]),
        (("trn1.32xlarge", "g5.xlarge"), ["EfaDevicePlugin", "NeuronDevicePlugin", "NvidiaDevicePlugin"]),
    ],
)
@pytest.mark.parametrize("node_groups_first", [True, False])
def test_device_plugins_follow_the_node_groups_built_before_or_after_the_addons(
    instance_types, plugins, node_groups_first
):
    """A GPU node group on a cluster with ClusterAddons' defaults gets the NVIDIA plugin (else its pods stay Pending);
    a cluster without Neuron nodes runs no Neuron plugin, its host /run mount and cluster role."""
    app = new_app()
    stack = cdk.Stack(app, "Composed", env=cdk.Environment(region="us-east-1"))
    network = TrainingNetwork(stack, "Net", node_az_id="use1-az6")
    cluster = TrainingCluster(stack, "Cluster", vpc=network.vpc)

    def node_groups():
        for index, name in enumerate(instance_types):
            TrainingNodeGroup(
                stack,
                f"Nodes{index}",
                cluster=cluster.cluster,
                subnet=network.node_subnet,
                instance_type=name,
                node_count=1,
            )

    if node_groups_first:
        node_groups()
    ClusterAddons(
        stack,
        "Addons",
        cluster=cluster.cluster,
        volume=LustreVolumeSource("fs-0123456789abcdef0", "fs.example", "abcdefgh", 1200),
    )
    if not node_groups_first:
        node_groups()
    assert plugins_of(assertions.Template.from_stack(stack)) == plugins
