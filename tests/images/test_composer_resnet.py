"""CPU smoke runs of the Composer image's training script, in the image's own Python environment.

``images/composer-resnet/train_composer.py`` needs Composer 0.32.1, which pins torch<2.7.1, so it runs in
``.venv-composer`` (``scripts/composer_env.sh``, from the image's pins: torch 2.7.0, the CUDA build PyPI serves, on
the CPU), not in the project's ``.venv``. The runs train ResNet-20 for a few batches on generated CIFAR-10 batch
files: a baseline, a recipe that changes the model (BlurPool, ChannelsLast) and the targets (LabelSmoothing, MixUp)
and then resumes from its checkpoint, a baseline restarted twice whose last summary covers every attempt, the "mild"
preset under Composer's launcher with two processes (gloo), and two processes of which one is asked to stop: both stop
with a checkpoint, from which the run resumes. Two more check the library's algorithm table against the constructors
of the installed Composer, and that a CIFAR batch file cannot run code when read; one more that the script is asked
to stop by its stop file.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import pytest

from trainium_eks.manifests.jobs.graceful_stop import STOP_FILE_ENV, STOPPED_EXIT
from trainium_eks.manifests.jobs.progress_watch import LIVENESS_SCRIPT, PROGRESS_FILE_ENV, ProgressWatch
from trainium_eks.workloads.composer_recipe import ALGORITHMS, PRESETS, Algorithm, ComposerRecipe, allowed_algorithms

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "images" / "composer-resnet" / "train_composer.py"
ENV_BIN = REPO / ".venv-composer" / "bin"
RUN_TIMEOUT_S = 300
IMAGES_PER_FILE = 16
# Set by a launcher around pytest, they would make the single-process runs wait for a process group.
DIST_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")

pytestmark = pytest.mark.skipif(
    not (ENV_BIN / "composer").exists(),
    reason=".venv-composer is missing: run scripts/composer_env.sh (make test does it before the tests)",
)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CIFAR-10 python-version batch files (random images and labels), pickled with protocol 2 as the originals."""
    root = tmp_path_factory.mktemp("cifar")
    folder = root / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {
            b"batch_label": name.encode(),
            b"labels": rng.integers(0, 10, IMAGES_PER_FILE).tolist(),
            b"data": rng.integers(0, 256, (IMAGES_PER_FILE, 3072), dtype=np.uint8),
        }
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
    return root


def environment() -> Dict[str, str]:
    """This process's environment for a child run: one thread, and no process-group variables."""
    env = {k: v for k, v in os.environ.items() if k not in DIST_VARS}
    return {**env, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def run(
    data_dir: Path,
    output: Path,
    recipe: ComposerRecipe,
    *,
    epochs: int,
    launcher: Sequence[str] = (),
    extra: Sequence[str] = (),
    variables: Optional[Dict[str, str]] = None,
) -> subprocess.CompletedProcess:
    """Run the script (under ``launcher`` when given, with ``extra`` arguments and the environment ``variables``), in a
    session of its own: on a timeout the whole session is killed, a launcher's training processes with it."""
    command = [
        *(launcher or [str(ENV_BIN / "python")]),
        str(SCRIPT),
        f"--data-dir={data_dir}",
        f"--output-dir={output}",
        f"--recipe={recipe.to_json()}",
        "--arch=resnet20",
        f"--epochs={epochs}",
        "--batch-size=8",
        "--eval-batch-size=8",
        "--max-train-batches=2",
        "--max-eval-batches=1",
        "--warmup=1ba",
        "--workers=0",
        *extra,
    ]
    env = {**environment(), **(variables or {})}
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def train(
    data_dir: Path,
    output: Path,
    recipe: ComposerRecipe,
    *,
    epochs: int,
    launcher: Sequence[str] = (),
    extra: Sequence[str] = (),
    variables: Optional[Dict[str, str]] = None,
) -> Any:
    """Run the script (:func:`run`); its summary, after checking it finished and the file matches the output."""
    done = run(data_dir, output, recipe, epochs=epochs, launcher=launcher, extra=extra, variables=variables)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stdout[-3000:]
    summary = json.loads(lines[-1])
    assert json.loads((output / "run-summary.json").read_text()) == summary
    return summary


def test_baseline_trains_and_reports(data_dir: Path, tmp_path: Path) -> None:
    progress = tmp_path / "progress"
    watch = {**ProgressWatch().env(), PROGRESS_FILE_ENV: str(progress)}
    summary = train(data_dir, tmp_path / "baseline", ComposerRecipe.preset("baseline"), epochs=1, variables=watch)
    assert progress.read_text().split()[0] == "2", "each training batch reported, as Composer counts them"
    probe = subprocess.run(["sh", "-c", LIVENESS_SCRIPT], env={**watch, "PATH": "/usr/bin:/bin"}, timeout=30)
    assert probe.returncode == 0, "the liveness probe reads what the script wrote"

    assert summary["algorithms"] == [] and summary["recipe"] == []
    assert summary["model_changes"] == {} and summary["channels_last"] is False
    assert summary["soft_target_batches"] == 0
    assert (summary["device"], summary["world_size"], summary["precision"]) == ("cpu", 1, "fp32")
    assert (summary["start_epoch"], summary["epochs"], summary["batches"]) == (0, 1, 2)
    assert 0.0 <= summary["final_accuracy"] <= 1.0
    assert summary["wall_clock_s"] >= summary["fit_s"] > 0
    assert (summary["attempts"], summary["total_fit_s"]) == (1, summary["fit_s"])


def test_a_scaled_schedule_trains_its_share_and_reports_the_accuracy_after_every_epoch(
    data_dir: Path, tmp_path: Path
) -> None:
    """What ``cost --run-summary`` prices: the run's name, and (epoch, seconds, accuracy) after each evaluation."""
    extra = ["--scale-schedule-ratio=0.5", "--run-name=resnet-half"]
    summary = train(data_dir, tmp_path / "half", ComposerRecipe.preset("baseline"), epochs=4, extra=extra)

    assert summary["run_name"] == "resnet-half" and summary["scale_schedule_ratio"] == 0.5
    assert summary["trained_duration"] == "2ep" and (summary["epochs"], summary["batches"]) == (2, 4)
    points = summary["accuracy_by_epoch"]
    assert [epoch for epoch, _, _ in points] == [1, 2]
    assert 0 < points[0][1] <= points[1][1] <= summary["fit_s"], "seconds since the fit started, rising"
    assert points[-1][2] == round(summary["final_accuracy"], 5)


def test_recipe_changes_model_and_targets_then_resumes(data_dir: Path, tmp_path: Path) -> None:
    recipe = ComposerRecipe(
        [
            Algorithm("BlurPool", {"min_channels": 16}),
            Algorithm("ChannelsLast"),
            Algorithm("LabelSmoothing", {"smoothing": 0.1}),
            Algorithm("MixUp", {"alpha": 0.2}),
        ]
    )
    output = tmp_path / "recipe"
    first = train(data_dir, output, recipe, epochs=1)

    assert first["algorithms"] == list(recipe.names)
    assert first["recipe"] == json.loads(recipe.to_json())
    # ResNet-20 has four strided convolutions with >= 16 input channels: the first 3x3 and the 1x1 shortcut of the
    # second and third stages. BlurPool replaces each with a BlurConv2d (which keeps its Conv2d inside).
    assert first["model_changes"] == {"BlurConv2d": 4}
    assert first["channels_last"] is True
    # Smoothed and mixed targets are probability vectors in every training batch.
    assert first["soft_target_batches"] == first["batches"] == 2
    assert first["algorithm_calls"]["BlurPool"] == 1 and first["algorithm_calls"]["ChannelsLast"] == 1
    assert first["algorithm_calls"]["LabelSmoothing"] >= 2 and first["algorithm_calls"]["MixUp"] >= 2
    assert sorted(p.name for p in (output / "checkpoints").iterdir()) == ["ep1-ba2-rank0.pt", "latest-rank0.pt"]

    resumed = train(data_dir, output, recipe, epochs=2)

    assert (resumed["start_epoch"], resumed["epochs"], resumed["batches"]) == (1, 2, 4)
    assert resumed["model_changes"] == {"BlurConv2d": 4}


def test_a_restarted_runs_summary_covers_every_attempt(data_dir: Path, tmp_path: Path) -> None:
    """The accuracy history and the fit time travel in the checkpoint: after a resume to a longer run, and again after
    a start at its length (which only evaluates), the summary holds the first attempt's epochs and seconds, on one
    clock of fit time across the attempts, which ``cost --run-summary`` prices."""
    output, baseline = tmp_path / "restarted", ComposerRecipe.preset("baseline")
    first = train(data_dir, output, baseline, epochs=2)
    resumed = train(data_dir, output, baseline, epochs=3)
    again = train(data_dir, output, baseline, epochs=3)

    points = resumed["accuracy_by_epoch"]
    assert points[:2] == first["accuracy_by_epoch"] and [epoch for epoch, _, _ in points] == [1, 2, 3]
    assert (first["start_epoch"], first["attempts"], first["total_fit_s"]) == (0, 1, first["fit_s"])
    assert (resumed["start_epoch"], resumed["epochs"], resumed["attempts"]) == (2, 3, 2)
    # The first attempt's fit seconds up to its last checkpoint (after its last evaluation, before the fit returned).
    carried = resumed["total_fit_s"] - resumed["fit_s"]
    assert first["accuracy_by_epoch"][-1][1] - 0.002 <= carried <= first["fit_s"] + 0.002
    assert carried <= points[2][1] <= resumed["total_fit_s"] + 0.002 and resumed["fit_s"] > 0

    assert (again["start_epoch"], again["epochs"], again["attempts"]) == (3, 3, 3)
    assert again["accuracy_by_epoch"] == points, "an evaluation outside a fit adds no point"
    assert again["final_accuracy"] == pytest.approx(points[-1][2], abs=1e-5)
    assert points[2][1] - 0.002 <= again["total_fit_s"] - again["fit_s"] <= resumed["total_fit_s"] + 0.002


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_processes() -> List[str]:
    """Composer's launcher for two processes on this machine."""
    launcher = [str(ENV_BIN / "composer"), "-n", "2", "--world_size", "2", "--node_rank", "0"]
    return launcher + ["--master_addr", "127.0.0.1", "--master_port", str(free_port())]


def test_mild_preset_under_composer_launcher_with_two_processes(data_dir: Path, tmp_path: Path) -> None:
    launcher = two_processes()
    recipe = ComposerRecipe.preset("mild")

    summary = train(data_dir, tmp_path / "mild", recipe, epochs=2, launcher=launcher)

    assert summary["world_size"] == 2
    assert summary["algorithms"] == list(recipe.names)
    assert summary["model_changes"] == {"BlurConv2d": 4} and summary["channels_last"] is True
    assert summary["soft_target_batches"] == summary["batches"] == 4
    assert summary["algorithm_calls"]["EMA"] > 0 and summary["algorithm_calls"]["ProgressiveResizing"] > 0
    # Progressive resizing starts at half size (16 px) after its delay and grows (full size only in the last 20%).
    assert summary["input_sizes"][0] == 16 < summary["input_sizes"][-1] <= 32


# Runs the script given as its first argument with the rest; only rank 1 sees the stop file. Each rank writes the status
# it exits with to exit-rank<N> in the folder of the stop file: the launcher reports one rank's at most, and may have
# ended the others with SIGTERM once that one exited.
ONE_RANK_ASKED = """
import os, pathlib, runpy, sys
stop_file = pathlib.Path(os.environ["TRAINIUM_EKS_STOP_FILE"])
if os.environ["RANK"] != "1":
    del os.environ["TRAINIUM_EKS_STOP_FILE"]
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as ending:
    (stop_file.parent / f"exit-rank{os.environ['RANK']}").write_text(str(ending.code))
    raise
"""


def test_a_stop_asked_of_one_rank_stops_both_with_a_checkpoint_and_the_run_resumes_there(
    data_dir: Path, tmp_path: Path
) -> None:
    """The stop file exists from the start for rank 1 only: at the end of the first batch the ranks agree to stop,
    rank 0 saves the batch's checkpoint and logs the stop, and both exit with STOPPED_EXIT. Started again without it,
    the run goes on from that batch and ends with the batches of an uninterrupted run (two per epoch)."""
    wrapper, asked = tmp_path / "one_rank_asked.py", tmp_path / "asked"
    wrapper.write_text(ONE_RANK_ASKED)
    asked.mkdir()
    (asked / "stop").write_text("1\n")
    output = tmp_path / "stopped"
    # Label smoothing makes every training batch of an attempt count in soft_target_batches, which no checkpoint keeps.
    recipe = ComposerRecipe([Algorithm("LabelSmoothing", {"smoothing": 0.1})])

    stopped = run(
        data_dir,
        output,
        recipe,
        epochs=2,
        launcher=[*two_processes(), str(wrapper)],
        variables={STOP_FILE_ENV: str(asked / "stop")},
    )

    assert stopped.returncode != 0, stopped.stdout[-3000:]
    exits = {path.name: path.read_text() for path in asked.glob("exit-rank*")}
    assert exits == {"exit-rank0": str(STOPPED_EXIT), "exit-rank1": str(STOPPED_EXIT)}, stopped.stderr[-5000:]
    assert "stopping at batch 1: a stop was requested ($TRAINIUM_EKS_STOP_FILE)" in stopped.stdout.splitlines()
    assert "[Eval batch=" not in stopped.stdout + stopped.stderr, "no evaluation after the stop (Composer logs one)"
    assert not (output / "run-summary.json").exists(), "no summary of a stopped run"
    checkpoints = output / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["ep0-ba1-rank0.pt", "latest-rank0.pt"]
    assert os.readlink(checkpoints / "latest-rank0.pt") == "ep0-ba1-rank0.pt", "what autoresume loads"

    resumed = train(data_dir, output, recipe, epochs=2, launcher=two_processes())

    assert (resumed["start_epoch"], resumed["epochs"], resumed["batches"]) == (0, 2, 4)
    assert resumed["soft_target_batches"] == 3, "this attempt trained the batches after the checkpoint's only"
    assert resumed["attempts"] == 2 and [epoch for epoch, _, _ in resumed["accuracy_by_epoch"]] == [1, 2]


def load_script() -> Any:
    """train_composer.py as a module of this Python; it imports only the standard library until training starts."""
    spec = importlib.util.spec_from_file_location("train_composer", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stop_requested_when_the_stop_file_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = load_script()
    assert (script.STOP_FILE_ENV, script.STOPPED_EXIT) == (STOP_FILE_ENV, STOPPED_EXIT), "the library's contract"
    stop = tmp_path / "stop"

    monkeypatch.delenv(STOP_FILE_ENV, raising=False)
    assert script.stop_requested() is False
    monkeypatch.setenv(STOP_FILE_ENV, "")
    assert script.stop_requested() is False
    monkeypatch.setenv(STOP_FILE_ENV, str(stop))
    assert script.stop_requested() is False
    stop.write_text("1767225600\n")
    assert script.stop_requested() is True


# Constructor parameters a recipe cannot set from JSON (Python objects); see trainium_eks.workloads.composer_recipe.
NOT_SETTABLE = {
    "GatedLinearUnits": {"act_fn"},
    "LowPrecisionLayerNorm": {"apply_at"},
    "LowPrecisionGroupNorm": {"apply_at"},
}
INTROSPECT = """
import inspect, json, sys
import composer.algorithms as algorithms
from composer.core import Algorithm
sys.path.insert(0, sys.argv[1])
import train_composer

signatures = {}
for name in algorithms.__all__:
    cls = getattr(algorithms, name)
    if isinstance(cls, type) and issubclass(cls, Algorithm):
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        signatures[name] = {
            p.name: "<required>" if p.default is p.empty else p.default if p.name != "apply_at" else str(p.default)
            for p in params
        }
built = {key: [type(a).__name__ for a in train_composer.instantiate_algorithms(train_composer.parse_recipe(text))]
         for key, text in json.loads(sys.argv[2]).items()}
print(json.dumps({"signatures": signatures, "built": built}))
"""


def test_algorithm_table_matches_installed_composer() -> None:
    # Every preset, and every algorithm an image recipe may use (with its required parameters), as the script builds
    # them in the image's environment. The text algorithms need Composer's "nlp" extra (transformers), which the
    # ResNet image does not install: GatedLinearUnits refuses to be built without it.
    required = {
        "StochasticDepth": {"target_layer_name": "ResNetBottleneck"},
        "GradientClipping": {"clipping_type": "norm", "clipping_threshold": 1.0},
    }
    image_algorithms = allowed_algorithms("image")
    recipes = {f"preset:{name}": ComposerRecipe(algorithms).to_json() for name, algorithms in PRESETS.items()}
    recipes.update({name: json.dumps([{"name": name, "kwargs": required.get(name, {})}]) for name in image_algorithms})
    done = subprocess.run(
        [str(ENV_BIN / "python"), "-c", INTROSPECT, str(SCRIPT.parent), json.dumps(recipes)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env=environment(),
    )
    assert done.returncode == 0, done.stderr[-5000:]
    found = json.loads(done.stdout.splitlines()[-1])
    signatures = found["signatures"]

    assert set(signatures) - set(ALGORITHMS) == {"NoOpModel"}  # Composer's test helper, not offered
    assert set(ALGORITHMS) <= set(signatures)
    for name, spec in ALGORITHMS.items():
        assert set(spec.params) == set(signatures[name]) - NOT_SETTABLE.get(name, set()), name
        for key, param in spec.params.items():
            expected = signatures[name][key]
            if expected == "<required>":
                assert param.describe().endswith("(required)"), (name, key)
            else:
                assert param.default == expected, (name, key, param.default, expected)
    assert found["built"] == {
        **{f"preset:{name}": [a.name for a in algorithms] for name, algorithms in PRESETS.items()},
        **{name: [name] for name in image_algorithms},
    }


UNPICKLE = """
import pickle, sys
sys.path.insert(0, sys.argv[1])
import resnet_cifar

class Payload:
    def __reduce__(self):
        return (print, ("code ran",))

path = sys.argv[2]
with open(path, "wb") as f:
    pickle.dump({b"data": Payload(), b"labels": [0]}, f, protocol=2)
try:
    resnet_cifar.read_batch(__import__("pathlib").Path(path))
except pickle.UnpicklingError as err:
    print("refused:", err)
"""


def test_a_batch_file_cannot_run_code(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(ENV_BIN / "python"), "-c", UNPICKLE, str(SCRIPT.parent), str(tmp_path / "data_batch_1")],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env=environment(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # Protocol 2 names the builtins module __builtin__, as Python 2 (which wrote the original files) did.
    assert done.stdout.strip() == "refused: __builtin__.print is not allowed in a CIFAR-10 batch file"
