"""The KubeflowTraining workload: stage CIFAR-10 onto the shared volume once, then train the small CNN with DDP as a
Kubeflow TrainJob (``images/cifar10-ddp``: the project's own script, started by the image's launcher).

The seed ran the same network and data as a PyTorchJob on six CPU nodes; the library runs it as a TrainJob of Kubeflow
Trainer v2 on the stack's CPU node group, one process per node, gloo between nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from trainium_eks.constructs.job_sequence import JobSequence
from trainium_eks.core.conventions import OUTPUT_ROOT, SHARED_MOUNT
from trainium_eks.manifests.jobs.dataset_staging import DatasetStagingChart
from trainium_eks.manifests.jobs.distributed_workload import Launcher
from trainium_eks.manifests.jobs.graceful_stop import GracefulStop
from trainium_eks.manifests.jobs.job_deadline import HOUR
from trainium_eks.manifests.jobs.job_naming import JOB_NAME
from trainium_eks.manifests.jobs.progress_watch import ProgressWatch
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.train_job import TrainJobChart
from trainium_eks.moved import moved_names
from trainium_eks.workloads.cifar10_dataset import DATASET_DIRECTORY, cifar10_staging

LAUNCHER = "/opt/cifar10/launch.py"
"""The image's launcher (``images/cifar10-ddp/launch.py``), which maps the TrainJob's ``PET_*`` contract to torchrun."""

OUTPUT = f"{OUTPUT_ROOT}/{JOB_NAME}"
"""Each TrainJob's checkpoints, in a folder named after the job: a changed job never resumes another's run."""
EPOCHS = 3
"""Epochs of the seed run (the training script's default)."""

DEADLINE_SECONDS = 2 * HOUR
"""``spec.activeDeadlineSeconds`` of the seed TrainJob: the bound of the whole TrainJob, its three attempts included,
from its creation by its release. The run is small: :data:`EPOCHS` epochs of the PyTorch tutorial's CNN (62,006
parameters), each of the 6 processes training on a sixth of the 50,000 images an epoch; most of the two hours is room
for pulling the multi-GB PyTorch CUDA image onto six new nodes and for restarts, each of which resumes from the last
epoch's checkpoint."""

PROGRESS = ProgressWatch(startup_seconds=1800, stall_seconds=600)
"""How long a TrainJob's container may go without a training step before it is stopped and the TrainJob restarts
(:mod:`~trainium_eks.manifests.jobs.progress_watch`): 30 minutes to the first step (loading the data set from the
shared volume and the rendezvous of every node), then 10 minutes between steps, far above an epoch's evaluation and
checkpoint of this small network."""

STOP = GracefulStop(grace_seconds=60, step_seconds=30)
"""A TrainJob pod deleted while its node drains or its TrainJob restarts saves a checkpoint at its next step and
exits (:mod:`~trainium_eks.manifests.jobs.graceful_stop`): its steps take milliseconds and the checkpoint of this
small network (62,006 parameters) well under a second, so a minute is ample, within a Spot warning's two."""


@dataclass(frozen=True)
class Cifar10Jobs:
    """The two jobs of the CIFAR-10 workload, as charts."""

    staging: DatasetStagingChart
    training: TrainJobChart


def script_args(*, output_dir: str = OUTPUT, epochs: int = EPOCHS) -> List[str]:
    """Arguments of the launcher: ``--`` and the training script's own arguments."""
    return [
        "--",
        "--data-dir",
        f"{SHARED_MOUNT}/{DATASET_DIRECTORY}",
        "--output-dir",
        output_dir,
        "--epochs",
        str(epochs),
    ]


def run_template(*, image: str, node_group: NodeGroupTopology) -> TrainJobChart:
    """The TrainJob the hybrid workflow starts for each run on the cluster: the same training, its output in a folder
    of the run (``TRAINING_JOB_NAME``, set by the workflow), the epochs and other arguments from the run's
    hyperparameters (``TRAINING_HYPERPARAMETERS``, read by the launcher)."""
    return TrainJobChart(
        name="cifar10-run",
        image=image,
        node_group=node_group,
        script=LAUNCHER,
        launcher=Launcher.DIRECT,
        args=script_args(output_dir=f"{OUTPUT_ROOT}/${{TRAINING_JOB_NAME}}"),
        progress=PROGRESS,
        graceful_stop=STOP,
    )


def add_cifar10_jobs(
    sequence: JobSequence,
    *,
    image: str,
    node_group: NodeGroupTopology,
    staging: Optional[DatasetStagingChart] = None,
    deadline_seconds: int = DEADLINE_SECONDS,
) -> Cifar10Jobs:
    """Add the TrainJob, held until the data is staged, to ``sequence``, on ``node_group``; and the staging job, unless
    ``staging`` is one the sequence already has (to give the staging Job another deadline than
    :data:`~trainium_eks.workloads.cifar10_dataset.STAGING_DEADLINE_SECONDS`, pass one made with
    :func:`~trainium_eks.workloads.cifar10_dataset.cifar10_staging`).

    The TrainJob fails, and its pods are deleted, once ``deadline_seconds`` have passed since its creation
    (``spec.activeDeadlineSeconds``; :mod:`~trainium_eks.manifests.jobs.job_deadline`). Default:
    :data:`DEADLINE_SECONDS` (2 hours)."""
    if staging is None:
        staging = cifar10_staging(sequence, node_group=node_group)
        sequence.add("Staging", staging)
    training = TrainJobChart(
        name="cifar10-ddp",
        image=image,
        node_group=node_group,
        script=LAUNCHER,
        launcher=Launcher.DIRECT,
        args=script_args(),
        wait_for=[staging],
        deadline_seconds=deadline_seconds,
        progress=PROGRESS,
        graceful_stop=STOP,
        resolve=sequence.resolve,
    )
    sequence.add("Training", training)
    return Cifar10Jobs(staging, training)


__getattr__ = moved_names(
    __name__, {name: f"trainium_eks.workloads.cifar10_dataset.{name}" for name in ("DATASET_SHA256", "DATASET_URL")}
)
