"""The ComposerTraining stack of the default app: GPU nodes that schedule, the baseline and recipe runs, the cost."""

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from tests.support.apps import COMPOSER_TRAINING, REPO, build_default_stack, new_app, resources_of, stack_template
from tests.support.k8s_validation import validate_objects
from tests.support.launches import flag, volcano_launch
from tests.support.manifests import (
    applied_objects,
    job_manifests,
    node_pools,
    nodegroups,
    pod_spec,
    pool_requirements,
    release_manifests,
)
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.facts import versions
from trainium_eks.manifests.addons.nvidia_device_plugin import nvidia_instance_types
from trainium_eks.stacks.composer_training_stack import ComposerTrainingStack
from trainium_eks.workloads import composer_resnet
from trainium_eks.workloads.composer_recipe import ComposerRecipe


def template(**context):
    return stack_template(COMPOSER_TRAINING, **context)


NODE_GROUP = {"provisioning": "node-group"}


def test_gpu_pool_launches_a_g5_xlarge_in_an_az_that_offers_it_with_the_gpu_taint():
    pools = node_pools(template())
    pool = pools["nvidia"]["NodePool"]
    assert pool_requirements(pool)["node.kubernetes.io/instance-type"] == ["g5.xlarge"]
    assert pool_requirements(pool)["topology.k8s.aws/zone-id"] == ["usw2-az3"], "usw2-az4 offers no g5"
    assert pool["spec"]["limits"]["nodes"] == "1"
    assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"} in pool["spec"]["template"]["spec"][
        "taints"
    ]
    assert "networkInterfaces" not in pools["nvidia"]["EC2NodeClass"]["spec"], "g5.xlarge has no EFA"


def test_gpu_group_runs_the_nvidia_ami_with_the_gpu_taint():
    gpu = nodegroups(template(**NODE_GROUP))["nvidia"]
    assert gpu["AmiType"] == "AL2023_x86_64_NVIDIA"
    assert gpu["ScalingConfig"]["DesiredSize"] == 1
    assert {"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NO_SCHEDULE"} in gpu["Taints"]


def test_the_nvidia_device_plugin_runs_on_gpu_nodes_and_tolerates_their_taint():
    objects = applied_objects(template())
    plugin = objects["DaemonSet", "nvidia-device-plugin"]
    pod = plugin["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == versions.NVIDIA_DEVICE_PLUGIN.image
    assert any(t.get("key") == "nvidia.com/gpu" for t in pod["tolerations"])
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (expression,) = [e for e in term["matchExpressions"] if e["key"] == "node.kubernetes.io/instance-type"]
    assert expression["operator"] == "In"
    assert set(expression["values"]) == set(nvidia_instance_types()), "every NVIDIA type of the catalog, no other"
    assert "g5.xlarge" in expression["values"], "the stack's GPU group among them"


def test_baseline_then_recipe_on_the_same_gpu_nodes_each_with_composers_launcher(tmp_path):
    jobs = job_manifests(template())
    assert set(jobs) == {"Staging", "Baseline", "Recipe"}
    baseline, recipe = jobs["Baseline"], jobs["Recipe"]
    for job in (baseline, recipe):
        (worker,) = pod_spec(job)["containers"]
        assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1
    releases = release_manifests(template())
    waits = releases["Recipe"]["spec"]["template"]["spec"]["containers"][0]["command"][4:]
    assert waits == [f"vcjob/{baseline['metadata']['name']}"], "the recipe run is created once the baseline completed"
    started = volcano_launch(recipe, tmp_path)
    assert started["argv"][0] == "composer" and flag(started["argv"], "-n") == "1"
    assert flag(started["argv"], "--recipe") == composer_resnet.DEFAULT_RECIPE.to_json()
    baseline_started = volcano_launch(baseline, tmp_path)
    assert flag(baseline_started["argv"], "--recipe") == "[]"
    assert flag(started["argv"], "--data-dir") == "/data/cifar10"


def test_each_run_has_its_own_identity_and_the_recipe_its_shorter_schedule(tmp_path):
    """A changed job never autoresumes another run's checkpoint: outputs and run name are the job's own name."""
    jobs = job_manifests(template())
    for name in ("Baseline", "Recipe"):
        argv = volcano_launch(jobs[name], tmp_path)["argv"]
        job_name = jobs[name]["metadata"]["name"]
        assert flag(argv, "--output-dir") == f"/data/output/{job_name}" and flag(argv, "--run-name") == job_name
        assert flag(argv, "--epochs") == str(composer_resnet.EPOCHS)
        assert flag(argv, "--workers") == "2", "half of a g5.xlarge's 4 vCPUs, for its one GPU"
    recipe = volcano_launch(jobs["Recipe"], tmp_path)["argv"]
    assert flag(recipe, "--scale-schedule-ratio") == "0.4", "MosaicML's mild recipe trains 0.4 of the schedule"
    assert flag(volcano_launch(jobs["Baseline"], tmp_path)["argv"], "--scale-schedule-ratio") == "1"
    validate_objects(list(jobs.values()), tmp_path)


@pytest.mark.parametrize("version", versions.KUBERNETES_VERSIONS)
def test_every_applied_object_validates_strictly(version, tmp_path):
    validate_objects(list(applied_objects(template(kubernetesVersion=version)).values()), tmp_path, k8s_version=version)


def test_an_efa_gpu_type_gets_its_interfaces_and_several_nodes(tmp_path):
    tmpl = template(composerInstanceType="g6e.48xlarge", composerNodeCount="2", **NODE_GROUP)
    (data,) = [
        r["Properties"]["LaunchTemplateData"]
        for r in resources_of(tmpl, "AWS::EC2::LaunchTemplate").values()
        if r["Properties"]["LaunchTemplateData"].get("InstanceType") == "g6e.48xlarge"
    ]
    assert len(data["NetworkInterfaces"]) == 4, "one EFA interface per network card"
    assert len(resources_of(tmpl, "AWS::EC2::PlacementGroup")) == 1
    assert nodegroups(tmpl)["nvidia"]["ScalingConfig"] == {"MinSize": 2, "DesiredSize": 2, "MaxSize": 2}
    for name in ("Baseline", "Recipe"):
        job = job_manifests(tmpl)[name]
        assert job["spec"]["minAvailable"] == 2 and job["spec"]["tasks"][0]["replicas"] == 2
        started = volcano_launch(job, tmp_path, 1)
        assert flag(started["argv"], "--world_size") == "16" and flag(started["argv"], "-n") == "8", "2 x 8 GPUs"


def test_an_efa_gpu_pool_gets_an_efa_device_per_card_and_a_placement_group():
    tmpl = template(composerInstanceType="g6e.48xlarge", composerNodeCount="2")
    node_class = node_pools(tmpl)["nvidia"]["EC2NodeClass"]["spec"]
    assert [i["interfaceType"] for i in node_class["networkInterfaces"]] == ["interface"] + ["efa-only"] * 4
    assert "placementGroupSelector" in node_class
    assert len(resources_of(tmpl, "AWS::EC2::PlacementGroup")) == 1
    assert job_manifests(tmpl)["Baseline"]["spec"]["minAvailable"] == 2


def test_a_recipe_of_the_stack_reaches_the_recipe_run_and_only_it(tmp_path):
    recipe = ComposerRecipe.from_json(
        '[{"name": "BlurPool"}, {"name": "LabelSmoothing", "kwargs": {"smoothing": 0.1}}]'
    )
    stack = ComposerTrainingStack(
        new_app(),
        "Own",
        env=cdk.Environment(region="us-west-2"),
        recipe=recipe,
        image_directory=str(REPO / "images" / "composer-resnet"),
    )
    jobs = job_manifests(assertions.Template.from_stack(stack))
    assert flag(volcano_launch(jobs["Recipe"], tmp_path)["argv"], "--recipe") == recipe.to_json()
    assert flag(volcano_launch(jobs["Baseline"], tmp_path)["argv"], "--recipe") == "[]"


def test_cost_outputs_price_the_gpu_nodes():
    outputs = template(region="us-east-1", composerAzId="use1-az6").to_json()["Outputs"]
    # g5.xlarge in us-east-1: 1.006 USD per hour and 500 GiB of gp3 (0.08 per GB-month / 730).
    assert float(outputs["TrainingNodesUsdPerHour"]["Value"]) == pytest.approx(1.006 + 200 * 0.08 / 730, abs=0.006)


@pytest.mark.parametrize(
    "context, key, message",
    [
        ({"composerInstanceType": "trn1.32xlarge"}, "composerInstanceType", "Neuron support is experimental"),
        ({"composerNodeCount": "2"}, "composerNodeCount", "EFA"),
        ({"composerInstanceType": "p9.48xlarge"}, "composerInstanceType", "catalog"),
    ],
)
def test_bad_settings_are_refused_naming_the_context_key(context, key, message):
    with pytest.raises(ConfigurationError) as raised:
        build_default_stack(COMPOSER_TRAINING, **context)
    (problem,) = [p for p in raised.value.problems if p.startswith(f"{key}=")]
    assert message in problem
