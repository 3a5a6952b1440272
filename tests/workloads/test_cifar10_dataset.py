"""CIFAR-10 below both workloads that train on it: one staging job, checked by its digest, into /data/cifar10."""

import json

from tests.support.kubeflow_jobs import CPU
from tests.support.sequences import RecordingSequence
from trainium_eks.core.conventions import SHARED_MOUNT
from trainium_eks.workloads import cifar10_dataset, cifar10_ddp, composer_resnet


def test_the_staging_job_downloads_the_authors_archive_checked_by_its_sha256():
    chart = cifar10_dataset.cifar10_staging(RecordingSequence(), node_group=CPU)
    (job,) = [o for o in chart.manifests() if o["kind"] == "Job"]
    text = json.dumps(job)
    assert cifar10_dataset.DATASET_URL in text and cifar10_dataset.DATASET_SHA256 in text
    assert f"{SHARED_MOUNT}/{cifar10_dataset.DATASET_DIRECTORY}" in text
    assert job["metadata"]["name"].startswith("cifar10-data-")


def test_both_workloads_stage_and_read_the_same_data_set():
    assert composer_resnet.cifar10_staging is cifar10_ddp.cifar10_staging is cifar10_dataset.cifar10_staging
    assert composer_resnet.DATASET_DIRECTORY == cifar10_ddp.DATASET_DIRECTORY == cifar10_dataset.DATASET_DIRECTORY


def test_the_staging_job_ends_within_an_hour_unless_told_otherwise():
    assert cifar10_dataset.STAGING_DEADLINE_SECONDS == 3600
    chart = cifar10_dataset.cifar10_staging(RecordingSequence(), node_group=CPU)
    assert chart.manifest["spec"]["activeDeadlineSeconds"] == 3600
    longer = cifar10_dataset.cifar10_staging(RecordingSequence(), node_group=CPU, deadline_seconds=7200)
    assert longer.manifest["spec"]["activeDeadlineSeconds"] == 7200
