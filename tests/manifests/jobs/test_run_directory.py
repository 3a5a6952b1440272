"""The run directory: every training container with a progress watch or a graceful stop mounts the pod's ``emptyDir``
where both files are, whatever the operator; and a container restarted in place on its leftovers starts as a new one."""

import subprocess
import time

import pytest

from tests.support.kubeflow_jobs import CPU, patched_pod, pytorchjob, trainjob
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.jobs.graceful_stop import STOP_FILE, STOP_FILE_ENV, STOPPED_EXIT, GracefulStop
from trainium_eks.manifests.jobs.progress_watch import (
    LIVENESS_SCRIPT,
    PROGRESS_FILE,
    PROGRESS_FILE_ENV,
    ProgressWatch,
)
from trainium_eks.manifests.jobs.run_directory import RUN_DIRECTORY, RUN_VOLUME, run_mount, run_volume
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart

WAIT_SECONDS = 30


def volcano_pod(**settings):
    """The pod spec of a Volcano job on the CPU node group with ``settings`` (the script ``/t.py`` unless they name a
    command)."""
    entrypoint = {} if "command" in settings else {"script": "/t.py"}
    chart = VolcanoJobChart(name="x", image="i:1", node_group=CPU, **entrypoint, **settings)
    (job,) = [m for m in chart.manifests() if m["kind"] == "Job"]
    (task,) = job["spec"]["tasks"]
    return task["template"]["spec"]


def test_both_files_are_in_the_run_directory():
    assert PROGRESS_FILE.startswith(RUN_DIRECTORY + "/") and STOP_FILE.startswith(RUN_DIRECTORY + "/")
    assert run_mount() == {"name": RUN_VOLUME, "mountPath": RUN_DIRECTORY}
    assert run_volume() == {"name": RUN_VOLUME, "emptyDir": {}}


@pytest.mark.parametrize(
    "settings",
    [
        {"progress": ProgressWatch()},
        {"graceful_stop": GracefulStop()},
        {"progress": ProgressWatch(), "graceful_stop": GracefulStop()},
    ],
    ids=["progress", "graceful-stop", "both"],
)
def test_a_volcano_job_mounts_it_with_either_file(settings):
    pod = volcano_pod(**settings)
    (container,) = pod["containers"]
    assert run_volume() in pod["volumes"] and run_mount() in container["volumeMounts"]
    for variable in container["env"]:
        if variable["name"] in (PROGRESS_FILE_ENV, STOP_FILE_ENV):
            assert variable["value"].startswith(RUN_DIRECTORY + "/")


def test_a_job_with_neither_has_no_run_directory():
    pod = volcano_pod()
    assert RUN_VOLUME not in [v["name"] for v in pod["volumes"]]
    assert RUN_VOLUME not in [m["name"] for m in pod["containers"][0]["volumeMounts"]]


def test_a_trainjobs_runtime_patch_adds_it_and_a_pytorchjobs_pod_has_it():
    """The runtime's pod template has ``/dev/shm`` only; the patch brings the run directory with the claims."""
    _, manifest = trainjob(progress=ProgressWatch())
    pod = patched_pod(manifest)
    assert run_volume() in pod["volumes"] and run_mount() in pod["containers"][0]["volumeMounts"]
    assert "dshm" not in [v["name"] for v in pod["volumes"]], "the runtime's own volume is not patched twice"
    _, manifest = pytorchjob(progress=ProgressWatch())
    (pod,) = [r["template"]["spec"] for r in manifest["spec"]["pytorchReplicaSpecs"].values()][:1]
    assert run_volume() in pod["volumes"] and run_mount() in pod["containers"][0]["volumeMounts"]


@pytest.mark.parametrize("path", [RUN_DIRECTORY, RUN_DIRECTORY + "/x", "/run", "/dev/shm", "/dev/shm/data", "/dev"])
def test_a_claim_cannot_be_mounted_at_below_or_above_the_pods_own_volumes(path):
    """Below, it would hide them; above, their mounts would make directories in the claim (``/run``) or the claim
    would hide the container's devices (``/dev``)."""
    with pytest.raises(ConfigurationError, match="a path neither at, below nor above"):
        volcano_pod(volumes={"efs-sc-claim": path})
    volcano_pod(volumes={"efs-sc-claim": "/runs"})


@pytest.mark.parametrize("name", [PROGRESS_FILE_ENV, STOP_FILE_ENV, "TRAINIUM_EKS_STALL_SECONDS"])
def test_a_jobs_own_environment_cannot_move_the_files_or_switch_the_probe_on(name):
    """A job's value would move a file to a shared claim, where every node writes it and it outlives the run, or turn
    on the runtime's probe of a TrainJob without its bounds, which fails every time."""
    with pytest.raises(ConfigurationError, match="not starting with TRAINIUM_EKS_"):
        volcano_pod(env={name: "/data/progress"})


def test_a_container_restarted_on_the_last_ones_files_starts_as_a_new_one(tmp_path):
    """An ``emptyDir`` outlives a container restarted in place: the new container finds the stop file, its status
    file and a progress line of long ago. The chart's own launch script runs its launcher anyway, and the liveness
    probe, run right after its first line, reads ``start``."""
    stop, progress = tmp_path / "stop", tmp_path / "progress"
    stop.write_text("1700000000\n")
    (tmp_path / "stop.status").write_text("143\n")
    progress.write_text("120 1700000000\n")
    launched = tmp_path / "launched"
    pod = volcano_pod(
        command="/bin/sh",
        args=["-c", f"cat {progress} > {launched}"],
        launcher="direct",
        progress=ProgressWatch(),
        graceful_stop=GracefulStop(),
    )
    (container,) = pod["containers"]
    env = {v["name"]: v["value"] for v in container["env"]}
    env.update(
        {STOP_FILE_ENV: str(stop), PROGRESS_FILE_ENV: str(progress), "VC_TASK_INDEX": "0", "PATH": "/usr/bin:/bin"}
    )
    before = int(time.time())
    done = subprocess.run(
        ["bash", "-c", container["command"][2]], env=env, capture_output=True, text=True, timeout=WAIT_SECONDS
    )
    assert done.returncode == 0 != STOPPED_EXIT, done.stdout + done.stderr
    word, at = launched.read_text().split()
    assert word == "start" and int(at) >= before, "the launcher saw the new container's start, not the old step"
    assert not stop.exists(), "the old stop file would stop the new run at its first step"
    probe = subprocess.run(["sh", "-c", LIVENESS_SCRIPT], env=env, capture_output=True, text=True, timeout=WAIT_SECONDS)
    assert probe.returncode == 0, probe.stdout
