"""ProgressWatch: the liveness probe's script, run by a real ``sh`` against progress files, and where the charts put
the probe, the bounds and the start line."""

import subprocess
import time
from pathlib import Path

import pytest

from tests.support.kubeflow_jobs import CPU, TRN1
from trainium_eks.core.validation import ConfigurationError, Problems
from trainium_eks.manifests.addons.training_runtime import TrainingRuntimeChart
from trainium_eks.manifests.jobs.progress_watch import (
    LIVENESS_SCRIPT,
    PROGRESS_FILE,
    PROGRESS_FILE_ENV,
    STALL_ENV,
    STARTUP_ENV,
    ProgressWatch,
    check_progress,
    liveness_probe,
)
from trainium_eks.manifests.jobs.train_job import TrainJobChart
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart

WATCH = ProgressWatch(startup_seconds=600, stall_seconds=300)


def probe(tmp_path: Path, content=None, watch: ProgressWatch = WATCH, **environment: str):
    """The probe's exit status and output, run as the kubelet runs it (``sh -c``, in the container's environment:
    the watch's variables with the progress file in ``tmp_path``, which holds ``content`` unless None)."""
    path = tmp_path / "progress"
    if content is not None:
        path.write_text(content)
    env = {**watch.env(), PROGRESS_FILE_ENV: str(path), "PATH": "/usr/bin:/bin", **environment}
    command = liveness_probe()["exec"]["command"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    return done.returncode, done.stdout.strip()


def test_a_step_within_the_stall_bound_passes_and_one_after_it_fails_naming_the_step(tmp_path):
    now = int(time.time())
    assert probe(tmp_path, f"1200 {now - 290}\n") == (0, "")
    code, output = probe(tmp_path, f"1200 {now - 400}\n")
    assert code == 1
    assert output.startswith("no training step after step 1200 for 40") and "(bound 300 s)" in output


def test_before_the_first_step_the_startup_bound_counts(tmp_path):
    now = int(time.time())
    assert probe(tmp_path, f"start {now - 590}\n") == (0, "")
    code, output = probe(tmp_path, f"start {now - 700}\n")
    assert code == 1 and output.startswith("no first training step for 70") and "(bound 600 s)" in output


def test_a_container_without_the_watch_passes(tmp_path):
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(["sh", "-c", LIVENESS_SCRIPT], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no progress file"),
        ("start\n", "does not read <step> <unix time>: start"),
        ("", "no progress file"),
        ("12 yesterday\n", "does not read <step> <unix time>: 12 yesterday"),
    ],
)
def test_a_missing_or_unreadable_file_fails(tmp_path, content, message):
    code, output = probe(tmp_path, content)
    assert code == 1 and message in output
    assert "\n" not in output and "cannot open" not in output, "one line, without the shell's own error"


def test_the_probe_runs_every_minute_and_two_failures_stop_the_container_with_30_seconds_of_grace():
    """A probe that times out counts as a failure; the second one keeps one slow probe from stopping a run. A
    stalled container gets 30 s whatever the pod's grace for a checkpoint: it makes no step to save at."""
    assert liveness_probe() == {
        "exec": {"command": ["sh", "-c", LIVENESS_SCRIPT]},
        "periodSeconds": 60,
        "timeoutSeconds": 10,
        "failureThreshold": 2,
        "terminationGracePeriodSeconds": 30,
    }


def test_a_line_without_its_newline_is_read(tmp_path):
    now = int(time.time())
    assert probe(tmp_path, f"7 {now}") == (0, "")
    code, output = probe(tmp_path, f"7 {now - 400}")
    assert code == 1 and output.startswith("no training step after step 7 for")


def test_the_watch_is_bounded_and_checked():
    assert ProgressWatch().env() == {PROGRESS_FILE_ENV: PROGRESS_FILE, STARTUP_ENV: "3600", STALL_ENV: "1800"}
    problems = Problems("job")
    assert not check_progress(problems, "progress", ProgressWatch(startup_seconds=10, stall_seconds=2 * 86400))
    assert [p.split("=")[0] for p in problems] == ["progress.startup_seconds", "progress.stall_seconds"]
    problems = Problems("job")
    assert not check_progress(problems, "progress", 1800)
    assert check_progress(Problems("job"), "progress", None)


def test_a_volcano_job_with_the_watch_has_its_probe_its_bounds_and_its_start_line():
    chart = VolcanoJobChart(name="train", image="img:1", node_group=CPU, script="/train.py", progress=WATCH)
    (job,) = chart.manifests()
    (container,) = job["spec"]["tasks"][0]["template"]["spec"]["containers"]
    assert container["livenessProbe"] == liveness_probe()
    assert {e["name"]: e["value"] for e in container["env"]}.items() >= WATCH.env().items()
    assert container["command"][2].splitlines()[0] == f'echo "start $(date +%s)" > "${PROGRESS_FILE_ENV}"'


def test_a_job_without_the_watch_has_no_probe():
    chart = VolcanoJobChart(name="train", image="img:1", node_group=CPU, script="/train.py")
    (job,) = chart.manifests()
    (container,) = job["spec"]["tasks"][0]["template"]["spec"]["containers"]
    assert "livenessProbe" not in container and PROGRESS_FILE_ENV not in container["command"][2]


def test_a_trainjob_carries_the_bounds_and_its_runtime_the_probe():
    """A TrainJob's runtime patches cannot set a probe (the CRD's container patch has env, name, securityContext
    and volumeMounts only), so the runtime's container has it and the TrainJob's environment turns it on."""
    (trainjob,) = TrainJobChart(
        name="train", image="img:1", node_group=CPU, script="/train.py", progress=WATCH
    ).manifests()
    env = {e["name"]: e["value"] for e in trainjob["spec"]["trainer"]["env"]}
    assert env.items() >= WATCH.env().items()
    (runtime,) = TrainingRuntimeChart().manifests()
    (replicated,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    (container,) = replicated["template"]["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"] == liveness_probe()


def test_a_wrong_watch_is_refused_by_the_chart():
    with pytest.raises(ConfigurationError, match="progress"):
        VolcanoJobChart(name="train", image="img:1", node_group=CPU, script="/train.py", progress={"stall": 60})


def test_a_precompilation_job_is_refused_a_watch():
    """neuron_parallel_compile runs the script's steps, then compiles every graph with no step reported."""
    with pytest.raises(ConfigurationError, match="None with precompile"):
        VolcanoJobChart(name="compile", image="img:1", node_group=TRN1, script="/t.py", precompile=True, progress=WATCH)
