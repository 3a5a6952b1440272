"""composer_resnet: the staging job, the baseline and the recipe run one after the other, and their arguments."""

import pytest

from tests.support.kubeflow_jobs import CPU, P4D, TRN1
from tests.support.launches import flag, volcano_launch
from tests.support.sequences import RecordingSequence
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.jobs.distributed_workload import Launcher
from trainium_eks.manifests.jobs.job_naming import JOB_NAME
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.workloads import composer_resnet
from trainium_eks.workloads.composer_recipe import ComposerRecipe

IMAGE = "example.com/composer:1"
G5_12X = NodeGroupTopology("g5.12xlarge", 1, 1, 0, (), frozenset({"fsx-claim"}))


@pytest.mark.parametrize(
    "group,workers",
    [(P4D, 6), (G5_12X, 6), (CPU, 2)],
    ids=["p4d-48-vcpus-8-gpus", "g5-24-vcpus-4-gpus", "cpu-2-vcpus-1-process"],
)
def test_data_loader_workers_share_the_pods_vcpus_among_its_processes(group, workers):
    assert composer_resnet.data_loader_workers(group) == workers


def test_script_args_carry_the_recipe_its_schedule_and_the_jobs_own_name():
    recipe = ComposerRecipe.preset("mild")
    args = composer_resnet.script_args(recipe, workers=3, epochs=12)
    assert args[:6] == [
        "--data-dir",
        "/data/cifar10",
        "--output-dir",
        f"/data/output/{JOB_NAME}",
        "--run-name",
        JOB_NAME,
    ]
    assert flag(args, "--epochs") == "12" and flag(args, "--workers") == "3"
    assert flag(args, "--scale-schedule-ratio") == "0.4" and flag(args, "--recipe") == recipe.to_json()
    baseline = composer_resnet.script_args(ComposerRecipe(), workers=1)
    assert flag(baseline, "--scale-schedule-ratio") == "1" and flag(baseline, "--recipe") == "[]"
    assert flag(baseline, "--epochs") == str(composer_resnet.EPOCHS)


def test_staging_then_the_baseline_then_the_recipe_each_waiting_for_the_one_before(tmp_path):
    sequence = RecordingSequence()
    jobs = composer_resnet.add_composer_jobs(sequence, image=IMAGE, node_group=P4D)
    assert sequence.added == [("Staging", jobs.staging), ("Baseline", jobs.baseline), ("Recipe", jobs.recipe)]
    baseline_check, recipe_check = jobs.baseline.fabric_check, jobs.recipe.fabric_check
    assert jobs.baseline.wait_for == (jobs.staging.ref, baseline_check.ref), "two p4d nodes: its fabric check too"
    assert jobs.recipe.wait_for == (jobs.baseline.ref, recipe_check.ref)
    assert (baseline_check.wait_for, recipe_check.wait_for) == ((jobs.staging.ref,), (jobs.baseline.ref,))
    for job in (jobs.baseline, jobs.recipe):
        assert job.workload.launcher is Launcher.COMPOSER and job.workload.node_group == P4D
        argv = volcano_launch(job.manifests()[0], tmp_path, node_index=1)["argv"]
        assert argv[0] == "composer" and flag(argv, "--node_rank") == "1" and flag(argv, "--workers") == "6"
        assert flag(argv, "--run-name") == job.job_name and flag(argv, "--output-dir") == f"/data/output/{job.job_name}"
    assert jobs.baseline.job_name.startswith("resnet-baseline-") and jobs.recipe.job_name.startswith("resnet-recipe-")
    recipe_argv = volcano_launch(jobs.recipe.manifests()[0], tmp_path)["argv"]
    assert flag(recipe_argv, "--recipe") == composer_resnet.DEFAULT_RECIPE.to_json()
    assert composer_resnet.DEFAULT_RECIPE == ComposerRecipe.preset("mild")


def test_neuron_nodes_are_refused_and_nothing_is_added():
    sequence = RecordingSequence()
    with pytest.raises(ConfigurationError) as raised:
        composer_resnet.add_composer_jobs(sequence, image=IMAGE, node_group=TRN1)
    assert any("Composer on Neuron nodes (trn1.32xlarge) is not supported" in p for p in raised.value.problems)
    assert sequence.added == [], "no staging job without the runs that need it"


def test_each_attempt_of_either_run_ends_within_four_hours_unless_told_otherwise():
    jobs = composer_resnet.add_composer_jobs(RecordingSequence(), image=IMAGE, node_group=G5_12X)
    assert composer_resnet.RUN_DEADLINE_SECONDS == 4 * 3600
    for run in (jobs.baseline, jobs.recipe):
        (task,) = run.manifest["spec"]["tasks"]
        assert task["template"]["spec"]["activeDeadlineSeconds"] == 4 * 3600 and run.bound_seconds == 12 * 3600
    assert jobs.staging.manifest["spec"]["activeDeadlineSeconds"] == 3600
    slower = composer_resnet.add_composer_jobs(RecordingSequence(), image=IMAGE, node_group=CPU, deadline_seconds=86400)
    assert (slower.baseline.deadline_seconds, slower.recipe.deadline_seconds) == (86400, 86400)
