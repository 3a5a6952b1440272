"""The ComposerTraining workload: stage CIFAR-10 onto the shared volume once, then train the same ResNet twice on the
same GPU nodes, one run after the other: the baseline at its full schedule, then a Composer speed-up recipe at the
recipe's shorter schedule (``scale_schedule_ratio``), the way MosaicML compares recipes: time and cost to about the
same accuracy.

Both runs are Volcano jobs started by Composer's launcher (``launcher="composer"``) with the project's own script
(``images/composer-resnet``); each writes ``run-summary.json`` (final accuracy, the accuracy after every epoch with
its time, wall-clock time, what the algorithms did) to its own output folder on the shared volume and prints it as
its last log line, which ``python -m trainium_eks cost --run-summary`` reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from trainium_eks.constructs.job_sequence import JobSequence
from trainium_eks.core.conventions import OUTPUT_ROOT, SHARED_MOUNT
from trainium_eks.manifests.jobs.dataset_staging import DatasetStagingChart
from trainium_eks.manifests.jobs.distributed_workload import DEFAULT_RESOURCE_FRACTION, Launcher
from trainium_eks.manifests.jobs.graceful_stop import GracefulStop
from trainium_eks.manifests.jobs.job_deadline import HOUR
from trainium_eks.manifests.jobs.job_naming import JOB_NAME
from trainium_eks.manifests.jobs.progress_watch import ProgressWatch
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart
from trainium_eks.workloads.cifar10_dataset import DATASET_DIRECTORY, cifar10_staging
from trainium_eks.workloads.composer_recipe import ComposerRecipe

SCRIPT = "/opt/composer-resnet/train_composer.py"
"""The training script inside the image built from ``images/composer-resnet``."""

EPOCHS = 40
"""Epochs of the baseline run (the recipe run trains ``EPOCHS x scale_schedule_ratio``): long enough for the recipe's
schedule (progressive resizing over its first 40 %, fine-tuning at full size in the last 20 %) and short enough that
both runs fit in about an hour on one GPU."""

RUN_DEADLINE_SECONDS = 4 * HOUR
"""``activeDeadlineSeconds`` of each pod of either run, so of each of its three attempts (at most 12 hours a run):
both runs together fit in about an hour on the default g5.xlarge (:data:`EPOCHS`); 4 hours for one leave room for
the image pull on a new node. On slower nodes (a CPU type) give ``deadline_seconds``."""

PROGRESS = ProgressWatch(startup_seconds=1800, stall_seconds=900)
"""How long a run's container may go without a training batch before it is stopped and the run restarts
(:mod:`~trainium_eks.manifests.jobs.progress_watch`): 30 minutes to the first batch (loading the data set from the
shared volume, the rendezvous of the nodes), then 15 minutes between batches: an epoch's evaluation of the 10,000 test
images and a checkpoint take seconds on a GPU and a few minutes on a CPU node."""

STOP = GracefulStop(grace_seconds=300, step_seconds=240)
"""A run's pod deleted while its node drains or its run restarts saves a checkpoint at its next batch and exits
(:mod:`~trainium_eks.manifests.jobs.graceful_stop`): a batch and the checkpoint of ResNet-56 (0.86 M parameters) take
seconds on a GPU, but a signal during an epoch's evaluation waits for its end, a few minutes on a CPU node; hence 4
minutes to the next batch and 5 in all, within a Capacity Block end's 9; within a Spot warning's 2 only on a GPU and
outside an evaluation (the library's pools launch no Spot instances)."""

DEFAULT_RECIPE = ComposerRecipe.preset("mild")
"""The recipe of the second run: MosaicML's "mild" ResNet recipe (BlurPool, ChannelsLast, EMA, label smoothing,
progressive resizing) at its schedule, 0.4 of the baseline's
(:data:`~trainium_eks.workloads.composer_recipe.PRESETS`,
:data:`~trainium_eks.workloads.composer_recipe.PRESET_SCHEDULES`)."""


@dataclass(frozen=True)
class ComposerComparisonJobs:
    """The three jobs of the Composer workload, as charts."""

    staging: DatasetStagingChart
    baseline: VolcanoJobChart
    recipe: VolcanoJobChart


def data_loader_workers(node_group: NodeGroupTopology) -> int:
    """Data-loader workers per training process: the vCPUs a pod requests (half the node's) shared among the node's
    processes (one per GPU), at least 1 (Composer's docs: CPU cores divided by the number of GPUs)."""
    processes = node_group.gpus or 1
    return max(1, int(node_group.instance.vcpus * DEFAULT_RESOURCE_FRACTION) // processes)


def script_args(recipe: ComposerRecipe, *, workers: int, epochs: int = EPOCHS) -> List[str]:
    """Arguments of the training script for one run, its outputs and run name those of the job itself."""
    return [
        "--data-dir",
        f"{SHARED_MOUNT}/{DATASET_DIRECTORY}",
        "--output-dir",
        f"{OUTPUT_ROOT}/{JOB_NAME}",
        "--run-name",
        JOB_NAME,
        "--epochs",
        str(epochs),
        "--scale-schedule-ratio",
        f"{recipe.scale_schedule_ratio:g}",
        "--workers",
        str(workers),
        "--recipe",
        recipe.to_json(),
    ]


def add_composer_jobs(
    sequence: JobSequence,
    *,
    image: str,
    node_group: NodeGroupTopology,
    recipe: ComposerRecipe = DEFAULT_RECIPE,
    deadline_seconds: int = RUN_DEADLINE_SECONDS,
) -> ComposerComparisonJobs:
    """Add the staging job, the baseline run (after the staging) and the recipe run (after the baseline, so that
    the two never share the nodes and their times compare) to ``sequence``, on ``node_group``.

    Each run's pods carry ``activeDeadlineSeconds`` = ``deadline_seconds``, so each of its attempts ends by then and
    the run within three times that (:mod:`~trainium_eks.manifests.jobs.job_deadline`). Default:
    :data:`RUN_DEADLINE_SECONDS` (4 hours). The staging Job's deadline is
    :data:`~trainium_eks.workloads.cifar10_dataset.STAGING_DEADLINE_SECONDS` (1 hour)."""
    staging = cifar10_staging(sequence, node_group=node_group)
    common = dict(
        image=image,
        node_group=node_group,
        script=SCRIPT,
        launcher=Launcher.COMPOSER,
        deadline_seconds=deadline_seconds,
        progress=PROGRESS,
        graceful_stop=STOP,
        resolve=sequence.resolve,
    )
    workers = data_loader_workers(node_group)
    baseline = VolcanoJobChart(
        name="resnet-baseline",
        wait_for=[staging],
        args=script_args(ComposerRecipe(), workers=workers),
        **common,
    )
    with_recipe = VolcanoJobChart(
        name="resnet-recipe",
        wait_for=[baseline],
        args=script_args(recipe, workers=workers),
        **common,
    )
    sequence.add("Staging", staging)
    sequence.add("Baseline", baseline)
    sequence.add("Recipe", with_recipe)
    return ComposerComparisonJobs(staging, baseline, with_recipe)
