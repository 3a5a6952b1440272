"""DatasetStagingChart: its manifest, and its script run for real with a fake `aws` command on PATH."""

import io
import os
import subprocess
import tarfile

import pytest

from tests.support.k8s_validation import validate_objects
from trainium_eks.core.conventions import EGRESS_INTERNET_LABEL, INGRESS_POLICY_LABEL, NO_INGRESS_POLICY, Taint
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.jobs.dataset_staging import (
    DEFAULT_DEADLINE_SECONDS,
    DOWNLOAD,
    STAGED_MARKER,
    STAGING_SCRIPT,
    DatasetStagingChart,
)
from trainium_eks.manifests.jobs.topology import NodeGroupTopology

NODES = NodeGroupTopology(
    "trn1.32xlarge", 2, 2, 8, (Taint("aws.amazon.com/neuron", "true", "NoSchedule"),), frozenset({"fsx-claim"})
)
SOURCE = "s3://neuron-s3/training_datasets/bert/seqlen128.tar"


def chart(**overrides):
    props = dict(
        name="bert-data", source=SOURCE, directory="bert/seqlen128", image="img:1", node_group=NODES, unsigned=True
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
    assert container["command"][:2] == ["bash", "-c"]
    assert container["command"][-3:] == ["/data/bert/seqlen128", SOURCE, "unsigned"]
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}, "no accelerator: it runs beside the jobs"
    assert pod["tolerations"][0]["key"] == "aws.amazon.com/neuron"
    assert pod["volumes"] == [{"name": "shared", "persistentVolumeClaim": {"claimName": "fsx-claim"}}]
    validate_objects([manifest], tmp_path)


def test_the_staging_pod_reaches_the_internet_and_admits_no_connection():
    (manifest,) = chart().manifests()
    labels = manifest["spec"]["template"]["metadata"]["labels"]
    assert labels[EGRESS_INTERNET_LABEL] == "true"
    assert labels[INGRESS_POLICY_LABEL] == NO_INGRESS_POLICY, "left out of the namespace's peer rule"


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


@pytest.fixture
def fake_aws(tmp_path):
    """An `aws` command that serves `s3 cp <uri> -` from bucket/<key> files and `s3 sync` from bucket/ folders."""
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "aws.log"
    (bin_dir / "aws").write_text(f"""#!/usr/bin/env bash
echo "$@" >> {log}
args=(); for a in "$@"; do case "$a" in --*) ;; *) args+=("$a");; esac; done
key="${{args[2]#s3://*/}}"
case "${{args[1]}}" in
  cp) cat "{bucket}/$key" ;;
  sync) cp -r "{bucket}/$key/." "${{args[3]}}" ;;
esac
""")
    (bin_dir / "aws").chmod(0o755)
    return bucket, bin_dir, log


def stage(fake_aws, data, source, sign="unsigned"):
    _, bin_dir, _ = fake_aws
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-c", STAGING_SCRIPT, "stage", str(data), source, sign],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def tarball(path, files):
    with tarfile.open(path, "w") as archive:
        for name, text in files.items():
            payload = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))


def test_tarball_with_one_top_folder_becomes_the_dataset_and_is_staged_once(fake_aws, tmp_path):
    bucket, _, log = fake_aws
    (bucket / "ds").mkdir()
    tarball(bucket / "ds" / "set.tar", {"seqlen128/a_training_0.hdf5": "a", "seqlen128/b_training_1.hdf5": "b"})
    dest = tmp_path / "data" / "bert"
    dest.parent.mkdir()
    result = stage(fake_aws, dest, "s3://bucket/ds/set.tar")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in dest.iterdir()) == [STAGED_MARKER, "a_training_0.hdf5", "b_training_1.hdf5"]
    assert "--no-sign-request" in log.read_text()
    assert not any(p.name.startswith(".staging") for p in dest.parent.iterdir())
    again = stage(fake_aws, dest, "s3://bucket/ds/set.tar")
    assert again.returncode == 0 and "already staged" in again.stdout
    assert log.read_text().count("s3 cp") == 1, "the second run copies nothing"


def test_prefix_is_synced_with_credentials(fake_aws, tmp_path):
    bucket, _, log = fake_aws
    (bucket / "prefix").mkdir()
    (bucket / "prefix" / "x.h5").write_text("x")
    (bucket / "prefix" / "y.h5").write_text("y")
    dest = tmp_path / "data" / "set"
    dest.parent.mkdir()
    result = stage(fake_aws, dest, "s3://bucket/prefix/", sign="signed")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in dest.iterdir()) == [STAGED_MARKER, "x.h5", "y.h5"]
    assert "--no-sign-request" not in log.read_text()


def test_a_failed_copy_leaves_no_dataset_behind(fake_aws, tmp_path):
    bucket, _, _ = fake_aws
    (bucket / "broken.tar").write_text("not a tar archive")
    dest = tmp_path / "data" / "set"
    dest.parent.mkdir()
    result = stage(fake_aws, dest, "s3://bucket/broken.tar")
    assert result.returncode != 0
    assert not dest.exists()


def test_staging_pod_runs_without_capabilities():
    (manifest,) = chart().manifests()
    pod = manifest["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    (container,) = pod["containers"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert "tar -x --no-same-owner" in STAGING_SCRIPT, "without CAP_CHOWN, tar must not restore ownership"


def serve(directory):
    """An HTTP server on localhost serving ``directory``; returns (base URL, server)."""
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


def stage_https(dest, url, sha256):
    env = {"PATH": os.environ["PATH"], "DOWNLOAD": DOWNLOAD}
    return subprocess.run(
        ["bash", "-c", STAGING_SCRIPT, "stage-dataset", str(dest), url, "signed", sha256],
        env=env,
        capture_output=True,
        text=True,
    )


def test_an_https_tarball_is_staged_only_when_its_sha256_matches(tmp_path):
    import hashlib

    site = tmp_path / "site"
    site.mkdir()
    archive = site / "cifar-10-python.tar.gz"
    tarball(archive, {"cifar-10-batches-py/data_batch_1": "x" * 100, "cifar-10-batches-py/batches.meta": "m"})
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    base, server = serve(site)
    try:
        dest = tmp_path / "data" / "cifar10"
        wrong = stage_https(dest, f"{base}/cifar-10-python.tar.gz", "0" * 64)
        assert wrong.returncode != 0 and "expected 0000" in wrong.stderr and not dest.exists()
        right = stage_https(dest, f"{base}/cifar-10-python.tar.gz", digest)
        assert right.returncode == 0, right.stderr
        assert (dest / "data_batch_1").read_text() == "x" * 100 and (dest / STAGED_MARKER).exists()
        assert not list(dest.parent.glob(".staging-*")), "the work folder and the archive are gone"
    finally:
        server.shutdown()


def test_https_sources_need_their_sha256():
    with pytest.raises(ConfigurationError) as raised:
        chart(source="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz")
    assert any(problem.startswith("sha256=None") for problem in raised.value.problems)
    https = chart(source="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", sha256="ab" * 32)
    (manifest,) = https.manifests()
    (container,) = manifest["spec"]["template"]["spec"]["containers"]
    assert container["command"][-1] == "ab" * 32 and container["env"] == [{"name": "DOWNLOAD", "value": DOWNLOAD}]


def test_the_whole_staging_job_ends_by_its_deadline(tmp_path):
    staging = chart()
    (manifest,) = staging.manifests()
    assert manifest["spec"]["activeDeadlineSeconds"] == 4 * 3600 == DEFAULT_DEADLINE_SECONDS, "the default: 4 hours"
    (manifest,) = chart(deadline_seconds=600).manifests()
    assert manifest["spec"]["activeDeadlineSeconds"] == 600 and manifest["spec"]["backoffLimit"] == 3
    validate_objects([manifest], tmp_path)
    with pytest.raises(ConfigurationError, match="deadline_seconds=30: an integer from 60 to 7776000"):
        chart(deadline_seconds=30)
