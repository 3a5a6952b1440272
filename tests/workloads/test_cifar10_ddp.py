"""cifar10_ddp: the CIFAR-10 TrainJob added after its staging, and the run template of the hybrid workflow."""

import shlex

from tests.support.kubeflow_jobs import CPU
from tests.support.sequences import RecordingSequence
from trainium_eks.constructs.private.trainjob_template import check_train_job
from trainium_eks.core.validation import Problems
from trainium_eks.manifests.jobs.distributed_workload import Launcher
from trainium_eks.manifests.jobs.progress_watch import PROGRESS_FILE_ENV, ProgressWatch
from trainium_eks.workloads import cifar10_ddp
from trainium_eks.workloads.cifar10_dataset import cifar10_staging

IMAGE = "example.com/cifar10:1"


def launched(chart):
    """The words the TrainJob's trainer runs in the background (the image's launcher, started once per pod), after
    the line that records the container's start for the progress watch, under the graceful stop's trap."""
    (manifest,) = chart.manifests()
    command = manifest["spec"]["trainer"]["command"]
    assert command[:2] == ["bash", "-c"]
    lines = command[2].splitlines()
    trap = cifar10_ddp.STOP.trap_lines(PROGRESS_FILE_ENV)
    assert lines[: len(trap)] == trap and lines[len(trap)] == ProgressWatch().launch_lines()[0]
    rest = lines[len(trap) + 1 :]
    words = shlex.split(rest[1])
    assert words[0] == "("
    assert rest == cifar10_ddp.STOP.launch_lines(shlex.join(words[1:]), PROGRESS_FILE_ENV)
    return words[1:]


def test_the_staging_job_then_the_trainjob_held_until_it_completed():
    sequence = RecordingSequence()
    jobs = cifar10_ddp.add_cifar10_jobs(sequence, image=IMAGE, node_group=CPU)
    assert sequence.added == [("Staging", jobs.staging), ("Training", jobs.training)]
    assert jobs.training.wait_for == (jobs.staging.ref,)
    assert jobs.training.workload.launcher is Launcher.DIRECT and jobs.training.nodes == CPU.node_count
    assert launched(jobs.training) == [
        "python3",
        cifar10_ddp.LAUNCHER,
        "--",
        "--data-dir",
        "/data/cifar10",
        "--output-dir",
        f"/data/output/{jobs.training.job_name}",
        "--epochs",
        str(cifar10_ddp.EPOCHS),
    ], "the job's own output folder: a changed job never resumes another's checkpoints"


def test_a_staging_job_the_sequence_already_has_is_waited_for_and_not_added_again():
    staging = cifar10_staging(RecordingSequence(), node_group=CPU)
    sequence = RecordingSequence()
    jobs = cifar10_ddp.add_cifar10_jobs(sequence, image=IMAGE, node_group=CPU, staging=staging)
    assert jobs.staging is staging
    assert sequence.added == [("Training", jobs.training)]
    assert jobs.training.wait_for == (staging.ref,)


def test_script_args_put_the_output_and_epochs_after_the_launchers_separator():
    assert cifar10_ddp.script_args(output_dir="/data/output/x", epochs=7) == [
        "--",
        "--data-dir",
        "/data/cifar10",
        "--output-dir",
        "/data/output/x",
        "--epochs",
        "7",
    ]


def test_the_run_template_writes_to_the_runs_folder_and_is_one_the_workflow_accepts():
    template = cifar10_ddp.run_template(image=IMAGE, node_group=CPU)
    (manifest,) = template.manifests()
    script = manifest["spec"]["trainer"]["command"][2]
    assert '--output-dir "/data/output/${TRAINING_JOB_NAME}"' in script, "double-quoted: the shell expands it"
    assert template.component == "cifar10-run" and template.wait_for == ()
    problems = Problems("workflow")
    check_train_job(problems, template, "training")
    assert list(problems) == []


def test_the_whole_trainjob_ends_within_two_hours_of_its_creation_unless_told_otherwise():
    jobs = cifar10_ddp.add_cifar10_jobs(RecordingSequence(), image=IMAGE, node_group=CPU)
    assert jobs.training.manifest["spec"]["activeDeadlineSeconds"] == cifar10_ddp.DEADLINE_SECONDS == 2 * 3600
    assert jobs.staging.manifest["spec"]["activeDeadlineSeconds"] == 3600, "the data set's staging deadline"
    longer = cifar10_ddp.add_cifar10_jobs(RecordingSequence(), image=IMAGE, node_group=CPU, deadline_seconds=6 * 3600)
    assert longer.training.manifest["spec"]["activeDeadlineSeconds"] == 6 * 3600
