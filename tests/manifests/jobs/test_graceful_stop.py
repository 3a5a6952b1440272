"""GracefulStop: its settings, where it lands in the job charts, and its launch lines run by bash as the process 1 of
a PID namespace of their own (as in a container), around a stand-in launcher that plays a training script."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.kubeflow_jobs import CPU, TRN1
from trainium_eks.core.validation import ConfigurationError, Problems
from trainium_eks.manifests.jobs.graceful_stop import STOP_FILE_ENV, STOPPED_EXIT, GracefulStop, check_graceful_stop
from trainium_eks.manifests.jobs.progress_watch import PROGRESS_FILE_ENV
from trainium_eks.manifests.jobs.pytorch_job import PyTorchJobChart
from trainium_eks.manifests.jobs.train_job import TrainJobChart
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart

WAIT_SECONDS = 60
"""The bound of every wait here; the runs take a second or a few."""

LAUNCHER = r"""
trap 'echo TERM >> "$LOG"' TERM
echo running >> "$LOG"
for _ in $(seq 600); do [ -e "$TRAINIUM_EKS_STOP_FILE" ] && break; sleep 0.1; done
[ -e "$TRAINIUM_EKS_STOP_FILE" ] || exit 3
case "$MODE" in
  step) sleep 0.2; echo "8 $(date +%s)" > "$TRAINIUM_EKS_PROGRESS_FILE"; sleep "$SAVE_SECONDS"; echo saved >> "$LOG";;
  hang) sleep 600;;
esac
exit 143
"""
"""Waits for the stop file (the training script's check at a step), then, by ``$MODE``: makes a step and saves
(``step``), or never makes another step (``hang``, a collective whose peer is gone); it logs any SIGTERM it gets."""


def problems_of(value: object) -> list[str]:
    problems = Problems("job 'x'")
    check_graceful_stop(problems, "graceful_stop", value)
    return [str(problem) for problem in problems]


def test_the_defaults_and_their_bounds():
    assert GracefulStop() == GracefulStop(grace_seconds=300, step_seconds=120)
    assert problems_of(None) == [] and problems_of(GracefulStop(30, 30)) == []
    assert problems_of(GracefulStop(3600, 3600)) == []
    assert problems_of(GracefulStop(grace_seconds=29, step_seconds=29)) == [
        "graceful_stop.grace_seconds=29: an integer from 30 to 3600",
        "graceful_stop.step_seconds=29: an integer from 30 to 3600",
    ]
    assert problems_of(GracefulStop(grace_seconds=60, step_seconds=61)) == [
        "graceful_stop.step_seconds=61: at most grace_seconds (60)"
    ]
    assert problems_of(300) == ["graceful_stop=300: None or a GracefulStop"]


def test_a_job_chart_refuses_a_wrong_one():
    with pytest.raises(ConfigurationError, match="graceful_stop.step_seconds=400"):
        VolcanoJobChart(name="x", image="i:1", node_group=TRN1, script="t.py", graceful_stop=GracefulStop(300, 400))


def test_the_pod_gets_the_grace_and_the_stop_file_the_trap_comes_first_and_the_launcher_is_not_exec_d():
    stop = GracefulStop(grace_seconds=200, step_seconds=50)
    chart = VolcanoJobChart(name="x", image="i:1", node_group=TRN1, script="t.py", graceful_stop=stop)
    (job,) = [m for m in chart.manifests() if m["kind"] == "Job"]
    (task,) = job["spec"]["tasks"]
    pod = task["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 200
    (container,) = pod["containers"]
    assert {"name": STOP_FILE_ENV, "value": "/run/trainium-eks/stop"} in container["env"]
    lines = container["command"][2].splitlines()
    assert lines[:2] == stop.trap_lines(None), "no signal may find process 1 without its handler"
    assert not any(line.startswith("exec ") for line in lines)
    assert any(line.startswith("( torchrun ") for line in lines)

    plain = VolcanoJobChart(name="x", image="i:1", node_group=TRN1, script="t.py")
    (job,) = [m for m in plain.manifests() if m["kind"] == "Job"]
    (task,) = job["spec"]["tasks"]
    assert "terminationGracePeriodSeconds" not in task["template"]["spec"]
    assert task["template"]["spec"]["containers"][0]["command"][2].splitlines()[-1].startswith("exec torchrun ")


def test_a_pytorchjob_refuses_one():
    """Its containers restart in place, each counted against backoffLimit: a stop would spend a retry per node."""
    with pytest.raises(ConfigurationError, match="graceful_stop=.*None on a PyTorchJob"):
        PyTorchJobChart(name="x", image="i:1", node_group=CPU, script="t.py", graceful_stop=GracefulStop())


def test_a_trainjob_carries_the_grace_in_its_runtime_patch_and_the_stop_file_in_its_environment():
    chart = TrainJobChart(name="x", image="i:1", node_group=CPU, script="t.py", graceful_stop=GracefulStop(90, 30))
    (job,) = chart.manifests()
    (patch,) = job["spec"]["runtimePatches"]
    pod = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["spec"]["terminationGracePeriodSeconds"] == 90
    assert {"name": STOP_FILE_ENV, "value": "/run/trainium-eks/stop"} in job["spec"]["trainer"]["env"]


# -------------------------------------------------------------------------------- the launch lines, run by bash


class Container:
    """The launch lines around :data:`LAUNCHER`, run by bash as process 1 of a new PID namespace."""

    def __init__(self, tmp_path: Path, stop: GracefulStop, *, progress: bool, mode: str, save_seconds: int = 0):
        self.log = tmp_path / "launcher.log"
        self.stop_file = tmp_path / "stop"
        launcher = tmp_path / "launcher.sh"
        launcher.write_text(LAUNCHER)
        progress_env = PROGRESS_FILE_ENV if progress else None
        lines = stop.trap_lines(progress_env) + stop.launch_lines(f"bash {launcher}", progress_env)
        script = "\n".join(lines)
        env = {
            "PATH": os.environ["PATH"],
            "LOG": str(self.log),
            "MODE": mode,
            "SAVE_SECONDS": str(save_seconds),
            STOP_FILE_ENV: str(self.stop_file),
            PROGRESS_FILE_ENV: str(tmp_path / "progress"),
        }
        (tmp_path / "progress").write_text(f"7 {int(time.time()) - 5}\n")
        self.progress = tmp_path / "progress"
        command = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "bash", "-c", script]
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.init_pid = self._child(self.process.pid)
        self.launcher_pid = self._child(self.init_pid)
        self._until(lambda: self.log.exists())

    def _until(self, ready, what: str = "the launcher to start") -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while not ready():
            assert time.monotonic() < deadline, f"no {what} within {WAIT_SECONDS} s"
            time.sleep(0.05)

    def _child(self, pid: int) -> int:
        children: list[str] = []

        def found() -> bool:
            children[:] = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            return bool(children)

        self._until(found, f"child of process {pid}")
        return int(children[0])

    def terminate(self) -> None:
        """SIGTERM to process 1, as the kubelet sends it."""
        os.kill(self.init_pid, signal.SIGTERM)

    def result(self) -> tuple[int, str, list[str]]:
        """The exit status, the output and the launcher's log; the process is ended if it outlives the bound."""
        try:
            output, _ = self.process.communicate(timeout=WAIT_SECONDS)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=WAIT_SECONDS)
        return self.process.returncode, output, self.log.read_text().split()


def test_without_a_signal_the_launchers_status_is_the_containers(tmp_path):
    stop = GracefulStop()
    for status in (0, 7):
        script = "\n".join(
            stop.trap_lines(PROGRESS_FILE_ENV) + stop.launch_lines(f"bash -c 'exit {status}'", PROGRESS_FILE_ENV)
        )
        done = subprocess.run(["bash", "-c", script], env={STOP_FILE_ENV: str(tmp_path / "stop")}, timeout=WAIT_SECONDS)
        assert done.returncode == status and not (tmp_path / "stop").exists()


def test_sigterm_becomes_the_stop_file_the_launcher_saves_unsignalled_and_its_status_is_the_containers(tmp_path):
    container = Container(
        tmp_path, GracefulStop(grace_seconds=60, step_seconds=3), progress=True, mode="step", save_seconds=5
    )
    before = int(time.time())
    container.terminate()
    status, output, log = container.result()
    assert status == STOPPED_EXIT and log == ["running", "saved"], "the launcher got no SIGTERM"
    assert int(container.stop_file.read_text()) >= before
    assert "stop signal; the training stops at its next step, with a checkpoint" in output
    assert "without a checkpoint" not in output, "a step came after the signal: the save is waited for"


def test_a_launcher_that_makes_no_step_after_the_signal_is_stopped_with_the_container(tmp_path):
    container = Container(tmp_path, GracefulStop(grace_seconds=60, step_seconds=1), progress=True, mode="hang")
    container.terminate()
    status, output, log = container.result()
    assert status == STOPPED_EXIT and log == ["running"]
    assert "no training step within 1 s of the stop signal; stopped without a checkpoint" in output
    container._until(lambda: not Path(f"/proc/{container.launcher_pid}").exists(), "end of the launcher")


def test_without_a_progress_watch_the_launcher_has_its_whole_grace(tmp_path):
    container = Container(
        tmp_path, GracefulStop(grace_seconds=60, step_seconds=1), progress=False, mode="step", save_seconds=3
    )
    container.terminate()
    status, output, log = container.result()
    assert status == STOPPED_EXIT and log == ["running", "saved"]
    assert "without a checkpoint" not in output


def test_a_launcher_that_has_made_no_step_yet_is_stopped_at_once(tmp_path):
    """Nothing to save before the first step, so a gang restarted while it forms does not wait out its grace."""
    container = Container(tmp_path, GracefulStop(grace_seconds=60, step_seconds=60), progress=True, mode="hang")
    (tmp_path / "progress").write_text(f"start {int(time.time())}\n")
    container.terminate()
    status, output, log = container.result()
    assert status == STOPPED_EXIT and log == ["running"]
    assert "stop signal before the first training step; nothing to save" in output


def test_a_step_reported_in_the_signals_second_but_before_it_is_not_a_step_after_it(tmp_path):
    """Steps are told apart by number, not by the second they were reported in."""
    container = Container(tmp_path, GracefulStop(grace_seconds=60, step_seconds=1), progress=True, mode="hang")
    container.progress.write_text(f"7 {int(time.time())}\n")
    container.terminate()
    status, output, log = container.result()
    assert status == STOPPED_EXIT and log == ["running"]
    assert "no training step within 1 s of the stop signal" in output


def test_a_signal_before_the_launch_starts_no_launcher(tmp_path):
    """The trap is the first line: a signal during the setup lines is kept, and the launcher never starts."""
    stop = GracefulStop()
    launcher = tmp_path / "launcher.sh"
    launcher.write_text(LAUNCHER)
    lines = (
        stop.trap_lines(PROGRESS_FILE_ENV)
        + ["kill -TERM $$"]
        + stop.launch_lines(f"bash {launcher}", PROGRESS_FILE_ENV)
    )
    env = {"PATH": os.environ["PATH"], "LOG": str(tmp_path / "log"), STOP_FILE_ENV: str(tmp_path / "stop")}
    done = subprocess.run(
        ["bash", "-c", "\n".join(lines)], env=env, timeout=WAIT_SECONDS, capture_output=True, text=True
    )
    assert done.returncode == STOPPED_EXIT and not (tmp_path / "log").exists()
    assert "trainium-eks: stop signal" in done.stdout
