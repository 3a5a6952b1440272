"""The KubeflowTraining stack of the default app: CPU nodes, EFS, Kubeflow Trainer, the CIFAR-10 run, its cost."""

import json

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from tests.support.apps import KUBEFLOW_TRAINING, REPO, build_default_stack, new_app, only, resources_of, stack_template
from tests.support.k8s_validation import validate_objects
from tests.support.manifests import (
    applied_objects,
    job_manifests,
    node_pools,
    nodegroups,
    pool_requirements,
    release_manifests,
)
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.facts import versions
from trainium_eks.stacks.kubeflow_training_stack import KubeflowTrainingStack
from trainium_eks.workloads import cifar10_dataset, cifar10_ddp


def template(**context):
    return stack_template(KUBEFLOW_TRAINING, **context)


NODE_GROUP = {"provisioning": "node-group"}


def test_cpu_pool_launches_the_workshops_six_m5_xlarge_in_the_node_subnet():
    pools = node_pools(template())
    assert set(pools) == {"none"}, "the CPU pool; no accelerated pool by default"
    pool, node_class = pools["none"]["NodePool"], pools["none"]["EC2NodeClass"]
    assert pool_requirements(pool)["node.kubernetes.io/instance-type"] == ["m5.xlarge"]
    assert pool["spec"]["limits"]["nodes"] == "6"
    assert "taints" not in pool["spec"]["template"]["spec"], "CPU nodes carry no accelerator taint"
    assert node_class["spec"]["subnetSelectorTerms"] == [{"id": "subnet-0cfntoken"}]
    assert set(nodegroups(template())) == {"system"}


def test_cpu_group_is_the_workshops_six_m5_xlarge_in_the_node_subnet():
    groups = nodegroups(template(**NODE_GROUP))
    assert set(groups) == {"system", "none"}, "system nodes and the CPU group; no accelerated group by default"
    cpu = groups["none"]
    assert cpu["AmiType"] == "AL2023_x86_64_STANDARD"
    assert cpu["ScalingConfig"] == {"MinSize": 6, "DesiredSize": 6, "MaxSize": 6}
    assert "Taints" not in cpu, "CPU nodes carry no accelerator taint"
    launch_templates = [
        r["Properties"]["LaunchTemplateData"]
        for r in resources_of(template(**NODE_GROUP), "AWS::EC2::LaunchTemplate").values()
    ]
    assert sum(data.get("InstanceType") == "m5.xlarge" for data in launch_templates) == 1


def test_the_cpu_node_count_reaches_the_node_group_and_the_trainjob():
    tmpl = template(kubeflowCpuNodes="3", **NODE_GROUP)
    assert nodegroups(tmpl)["none"]["ScalingConfig"] == {"MinSize": 3, "DesiredSize": 3, "MaxSize": 3}
    assert job_manifests(tmpl)["Training"]["spec"]["trainer"]["numNodes"] == 3
    tmpl = template(kubeflowCpuNodes="3")
    assert node_pools(tmpl)["none"]["NodePool"]["spec"]["limits"]["nodes"] == "3"
    assert job_manifests(tmpl)["Training"]["spec"]["trainer"]["numNodes"] == 3


def test_efs_admits_nfs_from_the_node_groups_the_cluster_and_the_sagemaker_jobs_only():
    tmpl = template()
    file_system = only(tmpl, "AWS::EFS::FileSystem")
    assert file_system["DeletionPolicy"] == "Retain"
    assert len(resources_of(tmpl, "AWS::EFS::MountTarget")) == 2, "one per private subnet (two AZs)"
    (efs_group_id,) = [
        logical_id
        for logical_id, r in resources_of(tmpl, "AWS::EC2::SecurityGroup").items()
        if "Amazon EFS" in r["Properties"]["GroupDescription"]
    ]
    rules = [
        r["Properties"]
        for r in resources_of(tmpl, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [efs_group_id, "GroupId"]}
    ]
    assert {(rule["FromPort"], rule["ToPort"], rule["IpProtocol"]) for rule in rules} == {(2049, 2049, "tcp")}
    peers = {json.dumps(rule["SourceSecurityGroupId"], sort_keys=True) for rule in rules}
    assert len(peers) == 3
    for owner in ("CpuNodes", "Cluster", "HybridWorkflowSageMaker"):
        assert any(owner in peer for peer in peers), owner


def test_efs_csi_driver_add_on_and_the_workshops_storage_class_volume_and_claim():
    tmpl = template()
    addons = {r["Properties"]["AddonName"] for r in resources_of(tmpl, "AWS::EKS::Addon").values()}
    assert "aws-efs-csi-driver" in addons
    objects = applied_objects(tmpl)
    assert objects["StorageClass", "efs-sc"]["provisioner"] == "efs.csi.aws.com"
    assert objects["PersistentVolume", "efs-pv"]["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert objects["PersistentVolumeClaim", "efs-sc-claim"]["metadata"]["namespace"] == "training"


def test_kubeflow_trainer_is_installed_from_its_pinned_oci_chart_with_jobset():
    (release,) = [
        r["Properties"]
        for r in resources_of(template(), "Custom::AWSCDK-EKS-HelmChart").values()
        if r["Properties"]["Chart"] == versions.KUBEFLOW_TRAINER.chart
    ]
    assert release["Repository"] == versions.KUBEFLOW_TRAINER.repository
    assert release["Version"] == versions.KUBEFLOW_TRAINER.version
    assert json.loads(release["Values"])["jobset"] == {"install": True}
    assert (release["Release"], release["Namespace"]) == ("kubeflow-trainer", versions.KUBEFLOW_TRAINER_NAMESPACE)
    assert release["Wait"] is True and release["Timeout"] == "660s", "the controller and its webhook, within budget"
    assert json.loads(release["Values"])["runtimes"] == {"defaultEnabled": False}, "no hook Job that needs internet"


def test_cifar10_is_staged_once_then_trained_as_a_trainjob_on_the_cpu_group(tmp_path):
    jobs = job_manifests(template())
    assert set(jobs) == {"Staging", "Training"}
    staging, training = jobs["Staging"], jobs["Training"]
    assert staging["kind"] == "Job" and training["kind"] == "TrainJob"
    args = staging["spec"]["template"]["spec"]["containers"][0]["command"]
    assert cifar10_dataset.DATASET_URL in args and cifar10_dataset.DATASET_SHA256 in args
    trainer = training["spec"]["trainer"]
    assert trainer["numNodes"] == 6 and trainer["numProcPerNode"] == 1
    assert cifar10_ddp.LAUNCHER in trainer["command"][2]
    assert "--data-dir /data/cifar10" in trainer["command"][2]
    assert f"--output-dir /data/output/{training['metadata']['name']}" in trainer["command"][2], "a folder per run"
    release = release_manifests(template())["Training"]
    (container,) = release["spec"]["template"]["spec"]["containers"]
    assert container["command"][-1] == f"job/{staging['metadata']['name']}", "created once the data is staged"
    validate_objects([staging, training, release], tmp_path)


def test_the_trainjobs_release_comes_after_the_runtime_and_the_trainer_after_volcano():
    resources = template().to_json()["Resources"]
    (release_id,) = [k for k in resources if k.startswith("JobsTrainingJob")]
    depends = resources[release_id]["DependsOn"]
    assert any(d.startswith("KubeflowTrainerRuntime") for d in depends), "its runtime exists when it is created"
    (trainer,) = [k for k in resources if k.startswith("KubeflowTrainerRelease")]
    (volcano,) = [k for k in resources if k.startswith("AddonsVolcano") and resources[k]["Type"].endswith("HelmChart")]
    assert volcano in resources[trainer]["DependsOn"], (
        "a Trainer controller that starts before the PodGroup kind exists never watches PodGroups"
    )


@pytest.mark.parametrize("version", versions.KUBERNETES_VERSIONS)
def test_every_applied_object_validates_strictly(version, tmp_path):
    objects = list(applied_objects(template(kubernetesVersion=version)).values())
    assert len(objects) >= 18
    validate_objects(objects, tmp_path, k8s_version=version)


@pytest.mark.parametrize(
    "instance_type, ami_type, plugin",
    [("trn1.32xlarge", "AL2023_x86_64_NEURON", None), ("g5.12xlarge", "AL2023_x86_64_NVIDIA", "nvidia")],
)
def test_an_accelerated_group_gets_its_ami_the_shared_volume_and_its_device_plugin(instance_type, ami_type, plugin):
    tmpl = template(kubeflowAcceleratedType=instance_type, kubeflowAcceleratedNodes="2", **NODE_GROUP)
    groups = nodegroups(tmpl)
    accelerated = groups["neuron" if plugin is None else "nvidia"]
    assert accelerated["AmiType"] == ami_type and accelerated["ScalingConfig"]["DesiredSize"] == 2
    objects = applied_objects(tmpl)
    daemon_sets = {name for kind, name in objects if kind == "DaemonSet"}
    assert ("nvidia-device-plugin" in daemon_sets) is (plugin == "nvidia")
    serving = "nvidia-device-plugin" if plugin == "nvidia" else "neuron-device-plugin"
    affinity = json.dumps(objects["DaemonSet", serving]["spec"]["template"]["spec"]["affinity"])
    assert f'"{instance_type}"' in affinity, "the group's devices are advertised by a plugin that runs on it"
    efs_ingress = [
        r["Properties"]
        for r in resources_of(tmpl, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"].get("FromPort") == 2049
    ]
    assert any("AcceleratedNodes" in json.dumps(rule["SourceSecurityGroupId"]) for rule in efs_ingress)


def test_an_accelerated_pool_gets_its_device_plugin_and_reaches_efs():
    tmpl = template(kubeflowAcceleratedType="g5.12xlarge", kubeflowAcceleratedNodes="2")
    pool = node_pools(tmpl)["nvidia"]["NodePool"]
    assert pool_requirements(pool)["node.kubernetes.io/instance-type"] == ["g5.12xlarge"]
    assert pool_requirements(pool)["topology.k8s.aws/zone-id"] == ["usw2-az3"], "usw2-az4 offers no g5"
    assert {name for kind, name in applied_objects(tmpl) if kind == "DaemonSet"} >= {"nvidia-device-plugin"}
    efs_ingress = [
        r["Properties"]
        for r in resources_of(tmpl, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"].get("FromPort") == 2049
    ]
    assert any("AcceleratedNodes" in json.dumps(rule["SourceSecurityGroupId"]) for rule in efs_ingress)


def test_cost_outputs_add_up_the_components_at_their_list_prices():
    outputs = template(region="us-east-1", kubeflowAzId="use1-az6").to_json()["Outputs"]
    gp3 = 0.08 / 730  # USD per GiB-hour
    idle = 0.10 + 2 * 0.045 + 2 * (0.2016 + 100 * gp3) + 1.0 * 0.30 / 730  # control plane, NAT, system nodes, EFS
    assert float(outputs["IdleClusterUsdPerHour"]["Value"]) == pytest.approx(idle, abs=0.005)
    nodes = 6 * (0.192 + 100 * gp3)
    assert float(outputs["TrainingNodesUsdPerHour"]["Value"]) == pytest.approx(nodes, abs=0.005)
    description = outputs["TrainingNodesUsdPerHour"]["Description"]
    assert "CPU nodes (6 x m5.xlarge while a job runs, 100 GiB gp3 each)" in description
    for component in ("EKS control plane", "System nodes", "NAT gateways", "Amazon EFS"):
        assert f"{component} (" in outputs["IdleClusterUsdPerHour"]["Description"]
    standing = template(region="us-east-1", kubeflowAzId="use1-az6", **NODE_GROUP).to_json()["Outputs"]
    assert float(standing["IdleClusterUsdPerHour"]["Value"]) == pytest.approx(idle + nodes, abs=0.005)
    assert standing["TrainingNodesUsdPerHour"]["Value"] == "0.00", "standing nodes bill while idle"
    assert "6 x m5.xlarge standing" in standing["IdleClusterUsdPerHour"]["Description"]


@pytest.mark.parametrize(
    "context, key, message",
    [
        ({"kubeflowAcceleratedType": "m5.xlarge"}, "kubeflowAcceleratedType", "Trainium or GPU"),
        ({"kubeflowCpuNodes": "0"}, "kubeflowCpuNodes", "an integer from 1"),
        ({"kubeflowAcceleratedType": "g5.xlarge", "kubeflowAcceleratedNodes": "2"}, "kubeflowAcceleratedNodes", "EFA"),
        ({"kubeflowAzId": "use1-az6"}, "kubeflowAzId", "us-west-2"),
    ],
)
def test_bad_settings_are_refused_naming_the_context_key(context, key, message):
    with pytest.raises(ConfigurationError) as raised:
        build_default_stack(KUBEFLOW_TRAINING, **context)
    (problem,) = [p for p in raised.value.problems if p.startswith(f"{key}=")]
    assert message in problem


def file_system_conditions(tmpl):
    (statement,) = only(tmpl, "AWS::EFS::FileSystem")["Properties"]["FileSystemPolicy"]["Statement"]
    return statement["Condition"]["Bool"]


def test_efs_admits_sagemakers_mount_without_tls_only_when_the_workflow_exists():
    assert file_system_conditions(template()) == {"elasticfilesystem:AccessedViaMountTarget": "true"}
    stack = KubeflowTrainingStack(new_app(), "NoImage", env=cdk.Environment(region="us-west-2"))
    assert stack.hybrid_workflow is None
    assert file_system_conditions(assertions.Template.from_stack(stack)) == {
        "elasticfilesystem:AccessedViaMountTarget": "true",
        "aws:SecureTransport": "true",
    }


def cifar10_stack(name, **props):
    return KubeflowTrainingStack(
        new_app(),
        name,
        env=cdk.Environment(region="us-west-2"),
        image_directory=str(REPO / "images" / "cifar10-ddp"),
        **props,
    )


def test_without_the_seed_run_the_workflow_still_has_its_data_staged_and_checks_it():
    stack = cifar10_stack("WorkflowOnly", seed_jobs=False)
    assert stack.seed_jobs is None and stack.data_staging is not None
    jobs = job_manifests(assertions.Template.from_stack(stack))
    assert set(jobs) == {"Staging"}, "staged for the workflow's runs, no seed TrainJob"
    machine = stack.hybrid_workflow.state_machine.node.default_child
    definition = json.dumps(stack.resolve(machine.definition_string))
    assert f"/jobs/{stack.data_staging.job_name}" in definition, "every run reads the staging Job first"
    no_workflow = cifar10_stack("Neither", seed_jobs=False, hybrid_workflow=False)
    assert no_workflow.data_staging is None and not job_manifests(assertions.Template.from_stack(no_workflow))


def test_each_efs_client_keeps_its_rule_whichever_optional_clients_the_stack_has():
    """CloudFormation creates a renamed rule before it deletes the old one and EC2 refuses the twin, so a rule's
    logical ID must name the same client in every setting: with or without the GPU group and the workflow."""
    peers = {}
    for gpu in (None, "g6.12xlarge"):
        for workflow in (True, False):
            stack = cifar10_stack("Rules", accelerated_instance_type=gpu, hybrid_workflow=workflow, seed_jobs=False)
            rules = resources_of(assertions.Template.from_stack(stack), "AWS::EC2::SecurityGroupIngress")
            for logical_id, rule in rules.items():
                if logical_id.startswith("StorageFrom"):
                    peers.setdefault(logical_id, set()).add(json.dumps(rule["Properties"]["SourceSecurityGroupId"]))
    assert len(peers) == 4, "the CPU nodes, the cluster, the SageMaker jobs, the GPU nodes"
    assert all(len(found) == 1 for found in peers.values()), peers
