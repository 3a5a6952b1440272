"""The seed workload inside the default stack: staging, pre-compilation, training; order, gates, topology."""

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, build_default_app, default_template
from tests.job_helpers import flag, job_manifests, pod_spec, volcano_launch
from tests.k8s_validation import validate_objects
from trainium_eks import bert_phase1, versions


def test_three_jobs_created_side_by_side_after_the_add_ons_each_its_own_resource(template):
    jobs = job_manifests(template)
    assert set(jobs) == {"Staging", "Precompile", "Training"}
    resources = template.to_json()["Resources"]
    ids = {name: next(k for k in resources if k.startswith(f"Jobs{name}Job")) for name in jobs}
    depends = {name: set(resources[ids[name]]["DependsOn"]) for name in jobs}
    for name, job in jobs.items():
        assert job["metadata"]["name"].replace("-", "") in ids[name], "the job's hashed name is in its logical ID"
        assert not any(d.startswith("Jobs") for d in depends[name]), "no job waits for another in CloudFormation"
        assert not any(d.startswith("AcceleratedNodes") for d in depends[name]), "pods wait for nodes, not CFN"
        for prerequisite in ("AddonsVolcanoQueue", "AddonsSharedVolume", "AddonsTrainingNamespace", "AddonsJobPrio"):
            assert any(d.startswith(prerequisite) for d in depends[name]), (name, prerequisite)
        assert "PruneLabel" not in resources[ids[name]]["Properties"]


def test_training_starts_only_after_precompilation_which_starts_only_after_staging(template):
    jobs = job_manifests(template)
    staging, precompile, training = jobs["Staging"], jobs["Precompile"], jobs["Training"]

    def gate(job):
        (init,) = pod_spec(job)["initContainers"]
        return init["command"][3:]

    assert gate(precompile) == ["training", f"job/{staging['metadata']['name']}"]
    assert gate(training) == ["training", f"vcjob/{precompile['metadata']['name']}"]


def test_a_waiting_job_has_a_lower_priority_than_the_job_it_waits_for(template):
    jobs = job_manifests(template)
    classes = {name: jobs[name]["spec"]["priorityClassName"] for name in ("Precompile", "Training")}
    assert classes == {"Precompile": "trainium-eks-stage-1", "Training": "trainium-eks-stage-2"}
    for name, priority_class in classes.items():
        assert pod_spec(jobs[name])["priorityClassName"] == priority_class


def test_seed_run_is_the_tutorials_64_worker_bf16_phase_1(template, tmp_path):
    training = job_manifests(template)["Training"]
    started = volcano_launch(training, tmp_path, 0)
    command = started["argv"]
    assert flag(command, "--nnodes") == "2"
    assert flag(command, "--nproc_per_node") == "32"
    assert bert_phase1.SCRIPT in command
    assert flag(command, "--batch_size") == "16"
    assert flag(command, "--grad_accum_usteps") == "32"
    assert "--bf16" in command
    assert started["env"]["XLA_DOWNCAST_BF16"] == "1"
    assert started["env"]["NEURON_CC_FLAGS"] == "--cache_dir=/data/neuron_cache/bert-large_0"


def test_precompile_uses_the_same_cache_set_and_ten_steps(template, tmp_path):
    started = volcano_launch(job_manifests(template)["Precompile"], tmp_path, 1)
    assert started["argv"][0] == "neuron_parallel_compile"
    assert flag(started["argv"], "--steps_this_run") == "10"
    assert started["env"]["NEURON_CC_FLAGS"] == "--cache_dir=/data/neuron_cache/bert-large_1"


def test_four_nodes_give_a_four_node_job(tmp_path):
    training = job_manifests(default_template(nodeCount="4"))["Training"]
    assert training["spec"]["minAvailable"] == 4
    assert [(t["name"], t["replicas"]) for t in training["spec"]["tasks"]] == [("node", 4)]
    assert flag(volcano_launch(training, tmp_path, 3)["argv"], "--nnodes") == "4"


def test_trn1n_pods_request_sixteen_efa_interfaces():
    for job in ("Precompile", "Training"):
        manifest = job_manifests(default_template(instanceType="trn1n.32xlarge"))[job]
        limits = pod_spec(manifest)["containers"][0]["resources"]["limits"]
        assert limits == {"aws.amazon.com/neuron": 16, "vpc.amazonaws.com/efa": 16}


def test_image_is_the_asset_built_at_deploy_time(template):
    resources = template.to_json()["Resources"]
    (training_id,) = [k for k in resources if k.startswith("JobsTrainingJob")]
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
def test_single_node_without_efa_runs_the_seed_on_one_node(context, tmp_path):
    training = job_manifests(default_template(**context))["Training"]
    command = volcano_launch(training, tmp_path)["argv"]
    assert flag(command, "--nnodes") == "1"
    assert flag(command, "--nproc_per_node") == "2"
    limits = pod_spec(training)["containers"][0]["resources"]["limits"]
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
        wait_for=[stack.seed_jobs.training],
        resolve=stack.jobs.resolve,
    )
    stack.jobs.add("LlamaSft", job)
    assert job.stage == stack.seed_jobs.training.stage + 1, "after the seed run, at a lower priority"
    (rendered,) = job.manifests()
    gate = pod_spec(rendered)["initContainers"][0]["command"]
    assert gate[-1] == stack.seed_jobs.training.ref
    assert app.synth().get_stack_by_name("TrainiumEks").template
