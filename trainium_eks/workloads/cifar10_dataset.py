"""CIFAR-10, the data set of the KubeflowTraining and ComposerTraining workloads: where it comes from, its digest,
and the job that stages it once onto the shared volume (``/data/cifar10``)."""

from __future__ import annotations

from trainium_eks.constructs.job_sequence import JobSequence
from trainium_eks.manifests.jobs.dataset_staging import DatasetStagingChart
from trainium_eks.manifests.jobs.job_deadline import HOUR
from trainium_eks.manifests.jobs.topology import NodeGroupTopology

DATASET_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
"""CIFAR-10, python version, from its authors' page (https://www.cs.toronto.edu/~kriz/cifar.html)."""

DATASET_SHA256 = "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"
"""SHA-256 of :data:`DATASET_URL` (the page publishes the MD5 c58f30108f718f92721af3b95e74349a; torchvision's
``CIFAR10`` checks the same MD5). The staging job refuses a download with another digest."""

DATASET_DIRECTORY = "cifar10"
"""The data set's directory on the shared volume."""

STAGING_DEADLINE_SECONDS = HOUR
"""``activeDeadlineSeconds`` of the staging Job, all its attempts: one hour for the 163 MB archive (the authors' page),
downloaded up to four times (``backoff_limit`` 3), on a node that may be new."""


def cifar10_staging(
    sequence: JobSequence,
    *,
    node_group: NodeGroupTopology,
    deadline_seconds: int = STAGING_DEADLINE_SECONDS,
) -> DatasetStagingChart:
    """The job that downloads CIFAR-10 once onto the shared volume (``/data/cifar10``), checked by its SHA-256, and
    fails once ``deadline_seconds`` have passed (the Job's ``activeDeadlineSeconds``; default:
    :data:`STAGING_DEADLINE_SECONDS`, 1 hour)."""
    return DatasetStagingChart(
        name="cifar10-data",
        source=DATASET_URL,
        sha256=DATASET_SHA256,
        directory=DATASET_DIRECTORY,
        node_group=node_group,
        deadline_seconds=deadline_seconds,
        resolve=sequence.resolve,
    )
