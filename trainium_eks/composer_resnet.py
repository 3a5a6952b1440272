"""The ComposerTraining workload: stage CIFAR-10 onto the shared volume once, then train the same ResNet twice on the
same GPU nodes, without and with a Composer speed-up recipe, one run after the other, so the two runs compare.

Both runs are Volcano jobs started by Composer's launcher (``launcher="composer"``) with the project's own script
(``images/composer-resnet``); each writes ``run-summary.json`` (accuracy, wall-clock time, what the algorithms did)
to its output folder on the shared volume.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from trainium_eks.cifar10_ddp import DATASET_DIRECTORY, cifar10_staging
from trainium_eks.composer_recipe import PRESETS, ComposerRecipe
from trainium_eks.constructs.job_sequence import JobSequence
from trainium_eks.conventions import OUTPUT_ROOT, SHARED_MOUNT
from trainium_eks.manifests.dataset_staging import DatasetStagingChart
from trainium_eks.manifests.distributed_workload import Launcher
from trainium_eks.manifests.topology import NodeGroupTopology
from trainium_eks.manifests.training_job import TrainingJobChart

SCRIPT = "/opt/composer-resnet/train_composer.py"
"""The training script inside the image built from ``images/composer-resnet``."""

EPOCHS = 40
"""Epochs of each run: long enough for the recipe's schedule (progressive resizing over its first 40 %, fine-tuning
at full size in the last 20 %) and short enough that both runs fit in about an hour on one GPU."""

DEFAULT_RECIPE = ComposerRecipe(PRESETS["mild"])
"""The recipe of the second run: MosaicML's "mild" ResNet recipe (BlurPool, ChannelsLast, EMA, label smoothing,
progressive resizing; :data:`~trainium_eks.composer_recipe.PRESETS`)."""


@dataclass(frozen=True)
class ComposerComparisonJobs:
    """The three jobs of the Composer workload, as charts."""

    staging: DatasetStagingChart
    baseline: TrainingJobChart
    recipe: TrainingJobChart


def script_args(recipe: ComposerRecipe, output_dir: str, *, epochs: int = EPOCHS) -> List[str]:
    """Arguments of the training script for one run."""
    return [
        "--data-dir",
        f"{SHARED_MOUNT}/{DATASET_DIRECTORY}",
        "--output-dir",
        output_dir,
        "--epochs",
        str(epochs),
        "--recipe",
        recipe.to_json(),
    ]


def add_composer_jobs(
    sequence: JobSequence,
    *,
    image: str,
    node_group: NodeGroupTopology,
    recipe: ComposerRecipe = DEFAULT_RECIPE,
) -> ComposerComparisonJobs:
    """Add the staging job, the baseline run (gated on the staging) and the recipe run (gated on the baseline) to
    ``sequence``, on ``node_group``."""
    staging = cifar10_staging(sequence, image=image, node_group=node_group)
    common = dict(
        image=image, node_group=node_group, script=SCRIPT, launcher=Launcher.COMPOSER, resolve=sequence.resolve
    )
    baseline = TrainingJobChart(
        name="resnet-baseline",
        wait_for=[staging],
        args=script_args(ComposerRecipe(), f"{OUTPUT_ROOT}/composer-baseline"),
        **common,
    )
    with_recipe = TrainingJobChart(
        name="resnet-recipe",
        wait_for=[baseline],
        args=script_args(recipe, f"{OUTPUT_ROOT}/composer-recipe"),
        **common,
    )
    sequence.add("Staging", staging)
    sequence.add("Baseline", baseline)
    sequence.add("Recipe", with_recipe)
    return ComposerComparisonJobs(staging, baseline, with_recipe)
