"""The seed workload inside the default stack: staging, pre-compilation, training; order, releases, topology."""

import json
from pathlib import Path

import pytest

from tests.support.apps import REPO, build_default_app, default_template
from tests.support.k8s_validation import validate_objects
from tests.support.launches import flag, volcano_launch
from tests.support.manifests import job_manifests, pod_spec, release_manifests
from tests.support.sequences import RecordingSequence
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.workloads import bert_phase1


def test_staging_and_two_releases_created_side_by_side_after_the_add_ons_each_its_own_resource(template):
    jobs = job_manifests(template)
    checks = {"PrecompileFabricCheck", "TrainingFabricCheck"}
    assert set(jobs) == {"Staging", "Precompile", "Training"} | checks, "a fabric check before each two-node job"
    releases = release_manifests(template)
    assert set(releases) == {"Precompile", "Training"} | checks, "the jobs that wait are held; their releases applied"
    resources = template.to_json()["Resources"]
    ids = {
        name: next(k for k in resources if k.startswith(f"Jobs{name}Job") and "ReleaseAccess" not in k) for name in jobs
    }
    depends = {name: set(resources[ids[name]]["DependsOn"]) for name in jobs}
    for name in jobs:
        applied = releases.get(name, jobs[name])
        assert applied["metadata"]["name"].replace("-", "") in ids[name], "the hashed name is in the logical ID"
        jobs_ids = ("JobsStagingJob", "JobsPrecompile", "JobsTraining")
        assert not any(d.startswith(jobs_ids) for d in depends[name]), "no job waits for another in CloudFormation"
        assert not any(d.startswith("AcceleratedNodes") for d in depends[name]), "pods wait for nodes, not CFN"
        for prerequisite in ("AddonsVolcanoQueueOpen", "AddonsSharedVolume", "AddonsTrainingNamespace"):
            assert any(d.startswith(prerequisite) for d in depends[name]), (name, prerequisite)
        assert "PruneLabel" not in resources[ids[name]]["Properties"]
    for name in releases:
        assert any(d.startswith("JobsReleaseAccesstraining") for d in depends[name]), "its service account first"


def test_training_is_created_after_precompilation_which_is_created_after_staging(template):
    jobs, releases = job_manifests(template), release_manifests(template)
    staging, precompile, training = jobs["Staging"], jobs["Precompile"], jobs["Training"]

    def waits(release):
        (container,) = release["spec"]["template"]["spec"]["containers"]
        return container["command"][2:]

    compile_check, training_check = jobs["PrecompileFabricCheck"], jobs["TrainingFabricCheck"]
    assert waits(releases["Precompile"]) == ["training", releases["Precompile"]["metadata"]["name"]] + [
        f"job/{staging['metadata']['name']}",
        f"vcjob/{compile_check['metadata']['name']}",
    ]
    assert waits(releases["PrecompileFabricCheck"])[2:] == [f"job/{staging['metadata']['name']}"]
    assert waits(releases["TrainingFabricCheck"])[2:] == [f"vcjob/{precompile['metadata']['name']}"]
    assert waits(releases["Training"])[2:] == [
        f"vcjob/{precompile['metadata']['name']}",
        f"vcjob/{training_check['metadata']['name']}",
    ], "staging -> check -> pre-compilation -> check -> training"
    for name, check in (("Precompile", compile_check), ("Training", training_check)):
        assert check["metadata"]["labels"]["trainium-eks/fabric-check-for"] == jobs[name]["metadata"]["name"]
        assert pod_spec(check)["containers"][0]["image"] == pod_spec(jobs[name])["containers"][0]["image"]
    for name in ("Precompile", "Training"):
        job = jobs[name]
        assert "initContainers" not in pod_spec(job) and "priorityClassName" not in pod_spec(job)
        assert releases[name]["metadata"]["name"] == f"{job['metadata']['name']}-release"
    assert training["metadata"]["name"] != precompile["metadata"]["name"]


def test_seed_run_is_the_tutorials_64_worker_bf16_phase_1(template, tmp_path):
    training = job_manifests(template)["Training"]
    started = volcano_launch(training, tmp_path, 0)
    command = started["argv"]
    assert flag(command, "--nnodes") == "2"
    assert flag(command, "--nproc_per_node") == "32"
    assert bert_phase1.SCRIPT in command
    assert flag(command, "--batch_size") == "16"
    assert flag(command, "--grad_accum_usteps") == "32"
    assert "--bf16" in command, "bf16 through the script's autocast"
    assert "XLA_DOWNCAST_BF16" not in started["env"], "Neuron's migration guide: not together with autocast"
    output = flag(command, "--output_dir")
    assert output == f"/data/output/{training['metadata']['name']}", "each run writes and resumes in its own folder"
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
    assert len(images) == 1, "one image, from the bootstrap's asset repository"
    app, _ = build_default_app()
    assembly = app.synth()
    docker_images = json.loads(Path(assembly.directory, "TrainiumEks.assets.json").read_text())["dockerImages"]
    (asset,) = docker_images.values()
    assert asset["source"] == {
        "directory": str(REPO / "images" / "bert-pretrain"),
        "platform": "linux/amd64",
        "dockerBuildArgs": {},
    }, "the Dockerfile's ARG BASE_IMAGE default is the pin (tests/images/test_image_assets.py)"
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
    from trainium_eks.manifests.jobs.volcano_job import Rendezvous, VolcanoJobChart

    app, stack = build_default_app()
    job = VolcanoJobChart(
        name="llama-sft",
        image=stack.images.image_uri_for_tag("v3"),
        node_group=stack.accelerated_nodes.topology,
        script="/opt/train/sft.py",
        args=["--lr", "2e-5", "--bf16"],
        cache_set="llama-8b",
        rendezvous=Rendezvous.ETCD,
        wait_for=[stack.seed_jobs.training],
        resolve=stack.jobs.resolve,
    )
    stack.jobs.add("LlamaSft", job)
    release = stack.jobs.releases[job.ref]
    assert release.wait_for == [stack.seed_jobs.training.ref, job.fabric_check.ref], "after the seed run and its check"
    assert stack.jobs.releases[job.fabric_check.ref].wait_for == [stack.seed_jobs.training.ref]
    template = app.synth().get_stack_by_name("TrainiumEks").template
    etcd = [k for k in template["Resources"] if k.startswith("JobsEtcdtraining")]
    assert etcd, "a job that rendezvouses through etcd brings the etcd server of its namespace"


def test_every_seed_job_ends_by_its_deadline(template):
    jobs = job_manifests(template)
    hour = 3600
    assert jobs["Staging"]["spec"]["activeDeadlineSeconds"] == bert_phase1.STAGING_DEADLINE_SECONDS == 4 * hour
    assert pod_spec(jobs["Precompile"])["activeDeadlineSeconds"] == bert_phase1.PRECOMPILE_DEADLINE_SECONDS == 4 * hour
    assert pod_spec(jobs["Training"])["activeDeadlineSeconds"] == bert_phase1.TRAINING_DEADLINE_SECONDS == 72 * hour
    for check in ("PrecompileFabricCheck", "TrainingFabricCheck"):
        assert pod_spec(jobs[check])["activeDeadlineSeconds"] == 2 * hour and jobs[check]["spec"]["maxRetry"] == 2
    for name in ("Precompile", "Training"):
        assert jobs[name]["spec"]["maxRetry"] == 3, "three attempts, each bounded by the pods' deadline"


def test_the_training_deadline_is_about_twice_the_run_at_the_published_throughput():
    script = (REPO / "images" / "bert-pretrain" / "pretrain_bert.py").read_text()
    assert f'"--max_steps", type=int, default={bert_phase1.MAX_STEPS},' in script, "the seed run's --max_steps"
    args = bert_phase1.script_args("/out")
    per_step = int(flag(args, "--batch_size")) * int(flag(args, "--grad_accum_usteps")) * 64
    hours = bert_phase1.MAX_STEPS * per_step / (2 * 53655.8 / 16) / 3600
    assert 37 < hours < 39, "Neuron 2.23.0's 16-node figure, per node, on two nodes"
    assert 1.8 < bert_phase1.TRAINING_DEADLINE_SECONDS / 3600 / hours < 2


def test_each_deadline_of_the_seed_run_is_the_callers_to_set():
    sequence = RecordingSequence()
    nodes = NodeGroupTopology("trn1.32xlarge", 2, 2, 8, (), frozenset({"fsx-claim"}))
    jobs = bert_phase1.add_bert_phase1_jobs(
        sequence,
        image="example.com/bert:1",
        node_group=nodes,
        staging_deadline_seconds=600,
        precompile_deadline_seconds=1200,
        training_deadline_seconds=86400,
    )
    assert jobs.staging.manifest["spec"]["activeDeadlineSeconds"] == 600
    assert (jobs.precompile.deadline_seconds, jobs.training.deadline_seconds) == (1200, 86400)
    assert jobs.training.bound_seconds == 3 * 86400
