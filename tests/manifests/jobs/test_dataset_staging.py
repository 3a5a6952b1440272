"""DatasetStagingChart: its manifest, its program's ConfigMap, and its container's command run for real against a
local S3 (the program itself: ``test_dataset_staging_program.py``)."""

import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import Aws, Stack

from tests.support.fake_s3 import BUCKET, SHARDS, fake_s3_server, staged_files, tarball
from tests.support.k8s_validation import validate_objects
from trainium_eks.core.conventions import EGRESS_INTERNET_LABEL, INGRESS_POLICY_LABEL, NO_INGRESS_POLICY, Taint
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.facts import versions
from trainium_eks.manifests.jobs import dataset_staging_program
from trainium_eks.manifests.jobs.dataset_staging import (
    DEFAULT_DEADLINE_SECONDS,
    STAGING_IMAGE,
    STAGING_PROGRAM,
    DatasetStagingChart,
    StagingProgramChart,
)
from trainium_eks.manifests.jobs.dataset_staging_program import STAGED_MARKER
from trainium_eks.manifests.jobs.mounted_program import program_source
from trainium_eks.manifests.jobs.topology import NodeGroupTopology

NODES = NodeGroupTopology(
    "trn1.32xlarge", 2, 2, 8, (Taint("aws.amazon.com/neuron", "true", "NoSchedule"),), frozenset({"fsx-claim"})
)
SOURCE = "s3://neuron-s3/training_datasets/bert/seqlen128.tar"


def chart(**overrides):
    props = dict(
        name="bert-data",
        source=SOURCE,
        region="us-west-2",
        directory="bert/seqlen128",
        node_group=NODES,
        unsigned=True,
    )
    return DatasetStagingChart(**{**props, **overrides})


def test_job_manifest(tmp_path):
    staging = chart()
    (manifest,) = staging.manifests()
    assert manifest["apiVersion"] == "batch/v1" and manifest["metadata"]["name"] == staging.job_name
    assert staging.ref == f"job/{staging.job_name}"
    spec = manifest["spec"]
    assert spec["backoffLimit"] == 3 and "ttlSecondsAfterFinished" not in spec, "start gates read its status"
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == STAGING_IMAGE == versions.JOB_RELEASE_IMAGE.image and "@sha256:" in STAGING_IMAGE
    assert container["command"] == [
        "python3",
        "-I",
        "-B",
        "/opt/trainium-eks/staging/dataset_staging_program.py",
        "/data/bert/seqlen128",
        SOURCE,
        "unsigned",
        "-",
        "us-west-2",
    ]
    assert "env" not in container
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}, "no accelerator: it runs beside the jobs"
    assert pod["tolerations"][0]["key"] == "aws.amazon.com/neuron"
    assert pod["volumes"] == [
        {"name": "shared", "persistentVolumeClaim": {"claimName": "fsx-claim"}},
        {"name": "staging-program", "configMap": {"name": STAGING_PROGRAM.config_map}},
    ]
    assert {"name": "staging-program", "mountPath": STAGING_PROGRAM.mount, "readOnly": True} in container[
        "volumeMounts"
    ]
    validate_objects([manifest], tmp_path)


def test_the_config_map_holds_the_programs_code_under_the_name_the_job_mounts(tmp_path):
    (config_map,) = StagingProgramChart(namespace="training").manifests()
    assert config_map["metadata"]["name"] == STAGING_PROGRAM.config_map
    assert config_map["metadata"]["namespace"] == "training"
    assert config_map["data"] == {"dataset_staging_program.py": program_source(Path(dataset_staging_program.__file__))}
    validate_objects([config_map], tmp_path)


def test_the_containers_command_stages_the_dataset(tmp_path):
    """The command as the Job runs it, with this machine's Python for ``python3``, the program's file for its mount,
    a folder here for ``/data`` and the local S3 for S3's endpoint."""
    (manifest,) = chart(source=f"s3://{BUCKET}/bert/seqlen128.tar").manifests()
    (container,) = manifest["spec"]["template"]["spec"]["containers"]
    destination = tmp_path / "data" / "bert" / "seqlen128"
    command = [sys.executable, *container["command"][1:]]
    command[3] = dataset_staging_program.__file__
    command[4] = str(destination)
    with fake_s3_server() as s3:
        s3.public = True
        s3.put("bert/seqlen128.tar", tarball(SHARDS, mode="w"))
        result = subprocess.run(
            command, env={"AWS_ENDPOINT_URL_S3": s3.endpoint}, capture_output=True, text=True, timeout=120
        )
    assert result.returncode == 0, result.stderr
    assert staged_files(destination) == SHARDS and (destination / STAGED_MARKER).exists()


def test_a_failure_no_retry_mends_fails_the_job_at_once():
    (manifest,) = chart().manifests()
    rules = manifest["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {
        "action": "FailJob",
        "onExitCodes": {"containerName": "stage", "operator": "In", "values": [2, 3]},
    }
    assert rules[1] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


def test_the_buckets_region_is_a_region_the_stacks_token_or_left_to_the_program():
    (manifest,) = chart(region=None).manifests()
    assert manifest["spec"]["template"]["spec"]["containers"][0]["command"][-1] == "-"
    with pytest.raises(ConfigurationError, match="region='west': the bucket's region"):
        chart(region="west")
    (manifest,) = chart(region=Aws.REGION, resolve=Stack().resolve).manifests()
    assert manifest["spec"]["template"]["spec"]["containers"][0]["command"][-1] == Aws.REGION


def test_the_staging_pod_reaches_the_internet_and_admits_no_connection():
    (manifest,) = chart().manifests()
    labels = manifest["spec"]["template"]["metadata"]["labels"]
    assert labels[EGRESS_INTERNET_LABEL] == "true"
    assert labels[INGRESS_POLICY_LABEL] == NO_INGRESS_POLICY, "a release gives it no peers policy when it is held"


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"source": "https://example.com/x.tar"}, "sha256=None: the 64 hex digits"),
        ({"directory": "/abs"}, "directory='/abs': a relative path"),
        ({"directory": "../up"}, "directory='../up': a relative path"),
        ({"node_group": NodeGroupTopology("trn1.32xlarge", 2, 2, 8)}, "claim=None: a shared claim the node group"),
    ],
)
def test_bad_settings(overrides, message):
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        chart(**overrides)


def test_staging_pod_runs_without_capabilities_on_a_read_only_root():
    (manifest,) = chart().manifests()
    pod = manifest["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def test_https_sources_need_their_sha256():
    with pytest.raises(ConfigurationError) as raised:
        chart(source="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz")
    assert any(problem.startswith("sha256=None") for problem in raised.value.problems)
    https = chart(source="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", sha256="ab" * 32)
    (manifest,) = https.manifests()
    (container,) = manifest["spec"]["template"]["spec"]["containers"]
    assert container["command"][-2:] == ["ab" * 32, "-"] and "env" not in container


def test_the_whole_staging_job_ends_by_its_deadline(tmp_path):
    staging = chart()
    (manifest,) = staging.manifests()
    assert manifest["spec"]["activeDeadlineSeconds"] == 4 * 3600 == DEFAULT_DEADLINE_SECONDS, "the default: 4 hours"
    (manifest,) = chart(deadline_seconds=600).manifests()
    assert manifest["spec"]["activeDeadlineSeconds"] == 600 and manifest["spec"]["backoffLimit"] == 3
    validate_objects([manifest], tmp_path)
    with pytest.raises(ConfigurationError, match="deadline_seconds=30: an integer from 60 to 7776000"):
        chart(deadline_seconds=30)
