"""CPU smoke runs of the Composer image's training script, in the image's own Python environment.

``images/composer-resnet/train_composer.py`` needs Composer 0.32.1, which pins torch<2.7.1, so it runs in
``.venv-composer`` (``scripts/composer_env.sh``, from the image's pins: torch 2.7.0, the CUDA build PyPI serves, on
the CPU), not in the project's ``.venv``. The runs train ResNet-20 for a few batches on generated CIFAR-10 batch
files: a baseline, a recipe that changes the model (BlurPool, ChannelsLast) and the targets (LabelSmoothing, MixUp)
and then resumes from its checkpoint, a baseline restarted twice whose last summary covers every attempt, and the
"mild" preset under Composer's launcher with two processes (gloo).
Two more check the library's algorithm table against the constructors of the installed Composer, and that a CIFAR
batch file cannot run code when read.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

import numpy as np
import pytest

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
    """Run the script (under ``launcher`` when given, with ``extra`` arguments and the environment ``variables``); its
    summary, after checking the file matches the output."""
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
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)
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


def test_mild_preset_under_composer_launcher_with_two_processes(data_dir: Path, tmp_path: Path) -> None:
    launcher = [str(ENV_BIN / "composer"), "-n", "2", "--world_size", "2", "--node_rank", "0"]
    launcher += ["--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    recipe = ComposerRecipe.preset("mild")

    summary = train(data_dir, tmp_path / "mild", recipe, epochs=2, launcher=launcher)

    assert summary["world_size"] == 2
    assert summary["algorithms"] == list(recipe.names)
    assert summary["model_changes"] == {"BlurConv2d": 4} and summary["channels_last"] is True
    assert summary["soft_target_batches"] == summary["batches"] == 4
    assert summary["algorithm_calls"]["EMA"] > 0 and summary["algorithm_calls"]["ProgressiveResizing"] > 0
    # Progressive resizing starts at half size (16 px) after its delay and grows (full size only in the last 20%).
    assert summary["input_sizes"][0] == 16 < summary["input_sizes"][-1] <= 32


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
