"""The seed workload inside the default stack: staging, pre-compilation, training; order, gates, topology."""

import json
import shlex
from pathlib import Path

import pytest

from tests.conftest import REPO, build_default_app, default_template, resources_of
from tests.k8s_validation import validate_objects
from trainium_eks import bert_phase1, versions

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"


def job_manifests(template):
    found = {}
    for logical_id, resource in resources_of(template, MANIFEST).items():
        if logical_id.startswith("Jobs"):
            text = resource["Properties"]["Manifest"]
            if isinstance(text, dict):
                text = "".join(p if isinstance(p, str) else "cfn-token" for p in text["Fn::Join"][1])
            (found[logical_id.split("Jobs")[1][:-8]],) = json.loads(text)
    return found


def test_three_jobs_each_created_after_the_previous_and_after_the_add_ons(template):
    jobs = job_manifests(template)
    assert set(jobs) == {"Staging", "Precompile", "Training"}
    resources = template.to_json()["Resources"]
    ids = {name: next(k for k in resources if k.startswith("Jobs" + name)) for name in jobs}
    depends = {name: set(resources[ids[name]]["DependsOn"]) for name in jobs}
    assert ids["Staging"] in depends["Precompile"] and ids["Precompile"] in depends["Training"]
    for name in jobs:
        assert any(d.startswith("AddonsVolcanoQueue") for d in depends[name])
        assert any(d.startswith("AddonsNeuronDevicePlugin") for d in depends[name])
        assert any(d.startswith("AddonsSharedVolume") for d in depends[name])
        assert any(d.startswith("AcceleratedNodesNodegroup") for d in depends[name])
        assert resources[ids[name]]["Properties"]["PruneLabel"], "a job removed or renamed is deleted"


def test_training_starts_only_after_precompilation_which_starts_only_after_staging(template):
    jobs = job_manifests(template)
    staging, precompile, training = jobs["Staging"], jobs["Precompile"], jobs["Training"]

    def gate(job):
        (init,) = job["spec"]["tasks"][0]["template"]["spec"]["initContainers"]
        return init["command"][3:]

    assert gate(precompile) == ["training", f"job/{staging['metadata']['name']}"]
    assert gate(training) == ["training", f"vcjob/{precompile['metadata']['name']}"]


def words(job, index=0):
    script = job["spec"]["tasks"][index]["template"]["spec"]["containers"][0]["command"][2]
    return shlex.split(script[len("exec ") :])


def test_seed_run_is_the_tutorials_64_worker_bf16_phase_1(template):
    training = job_manifests(template)["Training"]
    command = words(training)
    assert command[command.index("--nnodes") + 1] == "2"
    assert command[command.index("--nproc_per_node") + 1] == "32"
    assert bert_phase1.SCRIPT in command
    assert command[command.index("--batch_size") + 1] == "16"
    assert command[command.index("--grad_accum_usteps") + 1] == "32"
    assert "--bf16" in command
    env = {e["name"]: e["value"] for e in training["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["env"]}
    assert env["XLA_DOWNCAST_BF16"] == "1"
    assert env["NEURON_CC_FLAGS"] == "--cache_dir=/data/neuron_cache/bert-large_0"


def test_precompile_uses_the_same_cache_set_and_ten_steps(template):
    precompile = job_manifests(template)["Precompile"]
    command = words(precompile)
    assert command[0] == "neuron_parallel_compile"
    assert command[command.index("--steps_this_run") + 1] == "10"
    env = {e["name"]: e["value"] for e in precompile["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["env"]}
    assert env["NEURON_CC_FLAGS"] == "--cache_dir=/data/neuron_cache/bert-large_1"


def test_four_nodes_give_a_four_node_job():
    training = job_manifests(default_template(nodeCount="4"))["Training"]
    assert training["spec"]["minAvailable"] == 4
    assert [t["name"] for t in training["spec"]["tasks"]] == ["node-0", "node-1", "node-2", "node-3"]
    assert words(training)[words(training).index("--nnodes") + 1] == "4"


def test_trn1n_pods_request_sixteen_efa_interfaces():
    for job in ("Precompile", "Training"):
        manifest = job_manifests(default_template(instanceType="trn1n.32xlarge"))[job]
        limits = manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert limits == {"aws.amazon.com/neuron": 16, "vpc.amazonaws.com/efa": 16}


def test_image_is_the_asset_built_at_deploy_time(template):
    resources = template.to_json()["Resources"]
    (training_id,) = [k for k in resources if k.startswith("JobsTraining")]
    tokens = [p for p in resources[training_id]["Properties"]["Manifest"]["Fn::Join"][1] if not isinstance(p, str)]
    images = {json.dumps(t) for t in tokens if "container-assets" in json.dumps(t)}
    assert len(images) == 1, "one image, from the bootstrap's asset repository, for worker and start gate"
    app, _ = build_default_app()
    assembly = app.synth()
    docker_images = json.loads(Path(assembly.directory, "TrainiumEks.assets.json").read_text())["dockerImages"]
    (asset,) = docker_images.values()
    assert asset["source"] == {
        "directory": str(REPO / "images" / "bert-pretrain"),
        "platform": "linux/amd64",
        "dockerBuildArgs": {"BASE_IMAGE": versions.NEURON_PYTORCH_TRAINING.image},
    }
    dockerfile = (REPO / "images" / "bert-pretrain" / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE\n" in dockerfile, "the pin lives in versions.py only"
    (destination,) = asset["destinations"].values()
    assert destination["imageTag"] in next(iter(images))


def test_job_names_do_not_depend_on_the_synth():
    _, first = build_default_app()
    _, second = build_default_app()
    assert first.seed_jobs.training.job_name == second.seed_jobs.training.job_name
    _, changed = build_default_app(nodeCount="4")
    assert changed.seed_jobs.training.job_name != first.seed_jobs.training.job_name


def test_every_job_validates(template, tmp_path):
    validate_objects(list(job_manifests(template).values()), tmp_path)


@pytest.mark.parametrize("context", [{"instanceType": "trn1.2xlarge", "nodeCount": "1"}])
def test_single_node_without_efa_runs_the_seed_on_one_node(context):
    training = job_manifests(default_template(**context))["Training"]
    command = words(training)
    assert command[command.index("--nnodes") + 1] == "1"
    assert command[command.index("--nproc_per_node") + 1] == "2"
    limits = training["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"aws.amazon.com/neuron": 1}


def test_a_users_job_composes_into_the_stack_as_the_readme_shows(tmp_path):
    from trainium_eks.manifests.training_job import Rendezvous, TrainingJobChart

    app, stack = build_default_app()
    job = TrainingJobChart(
        name="llama-sft",
        image=stack.images.image_uri_for_tag("v3"),
        node_group=stack.accelerated_nodes.topology,
        script="/opt/train/sft.py",
        args=["--lr", "2e-5"],
        bf16=True,
        cache_set="llama-8b",
        rendezvous=Rendezvous.C10D,
        wait_for=[stack.seed_jobs.training.ref],
        resolve=stack.jobs.resolve,
    )
    manifest = stack.jobs.add("LlamaSft", job)
    assert stack.jobs.jobs[-2] in manifest.node.dependencies
    (rendered,) = job.manifests()
    gate = rendered["spec"]["tasks"][0]["template"]["spec"]["initContainers"][0]["command"]
    assert gate[-1] == stack.seed_jobs.training.ref
    assert app.synth().get_stack_by_name("TrainiumEks").template
