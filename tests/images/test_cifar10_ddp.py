"""Tests of the CIFAR-10 DDP training script (images/cifar10-ddp): data reading, model, checkpoints, CPU runs.

The data is a small synthetic set in the CIFAR-10 "python version" layout (``make_synthetic_cifar.py``). The
distributed run trains under ``python -m torch.distributed.run`` with two gloo workers on the CPU, then resumes from its
checkpoint; the single-process runs check that a resumed run reproduces an uninterrupted one exactly. The stop tests
stop two-worker runs with the stop file (``$TRAINIUM_EKS_STOP_FILE``) and check that the resumed run ends exactly as an
uninterrupted one.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402

from tests.support.apps import REPO  # noqa: E402
from trainium_eks.manifests.jobs.progress_watch import (  # noqa: E402
    LIVENESS_SCRIPT,
    PROGRESS_FILE_ENV,
    ProgressWatch,
)

IMAGE_DIR = REPO / "images" / "cifar10-ddp"
SCRIPT = IMAGE_DIR / "train_cifar10.py"
if str(IMAGE_DIR) not in sys.path:
    sys.path.insert(0, str(IMAGE_DIR))

import make_synthetic_cifar  # noqa: E402
import train_cifar10  # noqa: E402

EPOCH_LINE = re.compile(r"^epoch=(\d+) train_loss=(\S+) test_accuracy=(\S+) steps=(\d+) seconds=\S+$", re.MULTILINE)
RUN_TIMEOUT_S = 300
STOP_TIMEOUT_S = 60
"""How long a timed-out torchrun may take to stop its workers (it waits 30 s before it kills them)."""
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """256 training and 64 test images; the folder holding ``cifar-10-batches-py``."""
    root = tmp_path_factory.mktemp("cifar-data")
    make_synthetic_cifar.write_dataset(str(root), num_train=256, num_test=64, seed=0)
    return root


@pytest.fixture
def single_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """No torchrun variables, so that ``train_cifar10.main`` trains in this process without a process group, and no
    stop file."""
    for name in (*TORCHRUN_VARIABLES, train_cifar10.STOP_FILE_ENV):
        monkeypatch.delenv(name, raising=False)


def epochs_logged(stdout: str) -> list[tuple[int, float, float, int]]:
    """``(epoch, train_loss, test_accuracy, steps)`` of every epoch line."""
    return [(int(e), float(loss), float(acc), int(steps)) for e, loss, acc, steps in EPOCH_LINE.findall(stdout)]


# ------------------------------------------------------------------------------------------------ data


def test_synthetic_data_has_the_cifar10_layout(data_dir: Path) -> None:
    folder = data_dir / "cifar-10-batches-py"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [*(f"data_batch_{i}" for i in range(1, 6)), "test_batch", "batches.meta"]
    )
    with open(folder / "data_batch_1", "rb") as f:
        raw = pickle.load(f, encoding="bytes")
    assert raw[b"data"].dtype == np.uint8 and raw[b"data"].shape == (52, 3072)  # 256 over 5 files: 52, 51, 51, 51, 51
    assert isinstance(raw[b"labels"], list) and len(raw[b"labels"]) == 52
    images, labels = train_cifar10.read_batch(str(folder / "test_batch"))
    assert images.shape == (64, 3, 32, 32) and labels.dtype == np.int64
    assert sorted(set(labels.tolist())) == list(range(10))
    train_set = train_cifar10.load_split(str(folder), train_cifar10.TRAIN_FILES)
    assert len(train_set) == 256
    # Same seed, same data.
    again, again_labels = make_synthetic_cifar.make_images(64, seed=2, noise=40.0, prototypes_seed=0)
    np.testing.assert_array_equal(again.reshape(-1, 3, 32, 32), images)
    assert again_labels == labels.tolist()


def test_data_dir_may_be_the_batches_folder_or_its_parent(data_dir: Path, tmp_path: Path) -> None:
    folder = str(data_dir / "cifar-10-batches-py")
    assert train_cifar10.resolve_batches_dir(str(data_dir)) == folder
    assert train_cifar10.resolve_batches_dir(folder) == folder
    with pytest.raises(train_cifar10.DataError, match="never downloads"):
        train_cifar10.resolve_batches_dir(str(tmp_path))
    with pytest.raises(train_cifar10.DataError, match="is not a directory"):
        train_cifar10.resolve_batches_dir(str(tmp_path / "absent"))
    partial = tmp_path / "partial" / "cifar-10-batches-py"
    partial.mkdir(parents=True)
    (partial / "data_batch_1").write_bytes(b"")
    with pytest.raises(train_cifar10.DataError, match="missing data_batch_2, data_batch_3, data_batch_4, data_batch_5"):
        train_cifar10.resolve_batches_dir(str(partial.parent))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({b"data": np.zeros((2, 3072), dtype=np.float32), b"labels": [0, 1]}, "must be uint8 of shape N x 3072"),
        ({b"data": np.zeros((2, 100), dtype=np.uint8), b"labels": [0, 1]}, "must be uint8 of shape N x 3072"),
        ({b"data": np.zeros((2, 3072), dtype=np.uint8), b"labels": [0]}, "must hold 2 integers"),
        ({b"data": np.zeros((2, 3072), dtype=np.uint8), b"labels": [0, 10]}, r"labels must be in 0\.\.9"),
        ({b"pixels": np.zeros((2, 3072), dtype=np.uint8)}, "is not a CIFAR-10 batch"),
    ],
)
def test_read_batch_rejects_malformed_batches(tmp_path: Path, payload: dict, message: str) -> None:
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps(payload))
    with pytest.raises(train_cifar10.DataError, match=message):
        train_cifar10.read_batch(str(path))


class _RunsCode:
    """What a planted batch file would hold: an object whose unpickling calls a function of the attacker's choice."""

    def __reduce__(self):
        return (print, ("planted code ran",))


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_a_planted_batch_file_cannot_run_code(tmp_path: Path, capsys: pytest.CaptureFixture[str], protocol) -> None:
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({b"data": _RunsCode(), b"labels": [0]}, protocol=protocol))
    with pytest.raises(
        train_cifar10.DataError, match=r"(__builtin__|builtins)\.print is not allowed in a CIFAR-10 batch file"
    ):
        train_cifar10.read_batch(str(path))
    assert "planted code ran" not in capsys.readouterr().out


def test_read_batch_rejects_a_file_that_is_not_a_pickle(tmp_path: Path) -> None:
    path = tmp_path / "test_batch"
    path.write_bytes(b"not a pickle")
    with pytest.raises(train_cifar10.DataError, match="cannot read CIFAR-10 batch"):
        train_cifar10.read_batch(str(path))


def test_normalize_maps_bytes_to_minus_one_to_one() -> None:
    pixels = torch.tensor([0, 51, 255], dtype=torch.uint8)
    assert train_cifar10.normalize(pixels).tolist() == pytest.approx([-1.0, -0.6, 1.0])


# ------------------------------------------------------------------------------------------------ model, args


def test_net_is_the_tutorial_cnn() -> None:
    net = train_cifar10.Net()
    shapes = {name: tuple(p.shape) for name, p in net.named_parameters()}
    assert shapes == {
        "conv1.weight": (6, 3, 5, 5),
        "conv1.bias": (6,),
        "conv2.weight": (16, 6, 5, 5),
        "conv2.bias": (16,),
        "fc1.weight": (120, 400),
        "fc1.bias": (120,),
        "fc2.weight": (84, 120),
        "fc2.bias": (84,),
        "fc3.weight": (10, 84),
        "fc3.bias": (10,),
    }
    assert net(torch.zeros(4, 3, 32, 32)).shape == (4, 10)


def test_backend_choice() -> None:
    assert train_cifar10.choose_backend("auto", cuda_available=False) == "gloo"
    assert train_cifar10.choose_backend("auto", cuda_available=True) == "nccl"
    assert train_cifar10.choose_backend("gloo", cuda_available=True) == "gloo"
    with pytest.raises(train_cifar10.DataError, match="--backend nccl needs CUDA"):
        train_cifar10.choose_backend("nccl", cuda_available=False)


def test_parse_args_defaults_and_bad_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--data-dir", str(tmp_path), "--output-dir", str(tmp_path / "out")]
    args = train_cifar10.parse_args(base)
    assert (args.epochs, args.batch_size, args.lr, args.momentum, args.num_workers) == (3, 64, 0.01, 0.9, 0)
    assert args.backend == "auto" and args.max_steps_per_epoch is None
    assert args.checkpoint_dir == str(tmp_path / "out") and args.run_id is None
    for bad, message in (
        (["--epochs", "0"], "--epochs must be >= 1"),
        (["--batch-size", "-1"], "--batch-size must be >= 1"),
        (["--lr", "0"], "--lr must be > 0"),
        (["--momentum", "1"], "--momentum must be in [0, 1)"),
        (["--max-steps-per-epoch", "0"], "--max-steps-per-epoch must be >= 1"),
        (["--backend", "mpi"], "invalid choice: 'mpi'"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            train_cifar10.parse_args([*base, *bad])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def test_atomic_write_replaces_or_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "metrics.json"
    train_cifar10.save_json(str(target), {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}

    def broken(f: object) -> None:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        train_cifar10.atomic_write(str(target), broken)
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]  # no temporary file left behind


# ------------------------------------------------------------------------------------------------ single process


def test_resume_reproduces_an_uninterrupted_run(
    data_dir: Path, tmp_path: Path, single_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--data-dir", str(data_dir), "--batch-size", "32", "--seed", "7", "--max-steps-per-epoch", "3"]
    split, whole = tmp_path / "split", tmp_path / "whole"
    assert train_cifar10.main([*common, "--output-dir", str(split), "--epochs", "1"]) == 0
    assert train_cifar10.main([*common, "--output-dir", str(split), "--epochs", "2"]) == 0
    resumed = capsys.readouterr().out
    assert "resumed from epoch 1" in resumed
    assert [e for e, *_ in epochs_logged(resumed)] == [1, 2]
    assert train_cifar10.main([*common, "--output-dir", str(whole), "--epochs", "2"]) == 0
    straight = capsys.readouterr().out

    assert epochs_logged(resumed) == epochs_logged(straight)
    split_model = torch.load(split / "model.pt", weights_only=True)
    whole_model = torch.load(whole / "model.pt", weights_only=True)
    for name, tensor in whole_model.items():
        torch.testing.assert_close(split_model[name], tensor, rtol=0, atol=0)
    assert json.loads((split / "metrics.json").read_text()) == json.loads((whole / "metrics.json").read_text())

    # A finished run does nothing but rewrite its outputs.
    assert train_cifar10.main([*common, "--output-dir", str(split), "--epochs", "2"]) == 0
    again = capsys.readouterr().out
    assert "nothing to do" in again and epochs_logged(again) == []


def test_missing_data_or_foreign_checkpoint_exit_2(
    data_dir: Path, tmp_path: Path, single_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert train_cifar10.main(["--data-dir", str(tmp_path / "nothing"), "--output-dir", str(tmp_path / "o")]) == 2
    assert "--data-dir" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert train_cifar10.main(["--data-dir", str(tmp_path / "empty"), "--output-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "train_cifar10.py: error: no CIFAR-10 data in" in err and "never downloads" in err

    out = tmp_path / "foreign"
    out.mkdir()
    torch.save({"format": 99}, out / "checkpoint.pt")
    assert train_cifar10.main(["--data-dir", str(data_dir), "--output-dir", str(out), "--epochs", "1"]) == 2
    assert "is not a checkpoint of this script" in capsys.readouterr().err


def test_a_checkpoint_of_the_version_before_stops_resumes_at_its_epochs_end(tmp_path: Path) -> None:
    """Format 1 was written at an epoch's end only: it reads as batch 0, its steps the sum of its epochs'."""
    history = [{"epoch": 1, "train_loss": 2.0, "test_accuracy": 0.1, "steps": 5}, {"epoch": 2, "steps": 4}]
    torch.save({"format": 1, "epoch": 2, "history": history}, tmp_path / "checkpoint.pt")
    checkpoint = train_cifar10.load_checkpoint(str(tmp_path / "checkpoint.pt"))
    assert checkpoint is not None and checkpoint["format"] == train_cifar10.CHECKPOINT_FORMAT
    assert (checkpoint["epoch"], checkpoint["batch"], checkpoint["step"]) == (2, 0, 9)


def test_a_run_resumes_its_own_checkpoint_and_refuses_another_runs(
    data_dir: Path, tmp_path: Path, single_process: None, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Two runs in one folder (a reused job name, a shared --output-dir): the second must not continue from the
    first's weights, optimizer state and epoch."""
    first, second = (f"arn:aws:states:us-west-2:123456789012:execution:Workflow:{name}" for name in ("a", "b"))
    common = ["--data-dir", str(data_dir), "--output-dir", str(tmp_path / "out"), "--max-steps-per-epoch", "2"]
    monkeypatch.setenv(train_cifar10.RUN_ID_ENV, first)
    assert train_cifar10.main([*common, "--epochs", "1"]) == 0
    assert torch.load(tmp_path / "out" / "checkpoint.pt", weights_only=True)["run"] == first
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["run"] == first
    capsys.readouterr()

    monkeypatch.setenv(train_cifar10.RUN_ID_ENV, second)
    assert train_cifar10.main([*common, "--epochs", "2"]) == 2
    err = capsys.readouterr().err
    assert f"belongs to run {first}, not to this run {second}" in err and "its own --checkpoint-dir" in err
    assert torch.load(tmp_path / "out" / "checkpoint.pt", weights_only=True)["epoch"] == 1, "left as it was"
    monkeypatch.delenv(train_cifar10.RUN_ID_ENV)
    assert train_cifar10.main([*common, "--epochs", "2"]) == 2, "a run without an identity is not the first run"
    assert "not to this run (none)" in capsys.readouterr().err

    assert train_cifar10.main([*common, "--epochs", "2", "--run-id", first]) == 0
    assert "resumed from epoch 1" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ two processes


def run_torchrun(
    *args: str, nproc: int = 2, timeout: float = RUN_TIMEOUT_S, script: Path = SCRIPT, **environment: str
) -> subprocess.CompletedProcess[str]:
    """Runs ``script`` (the training script by default) under ``python -m torch.distributed.run --standalone`` with
    ``nproc`` CPU workers (and the variables ``environment``). A run that outlasts ``timeout`` gets SIGTERM, which
    torchrun passes on to its workers (each in a session of its own), then SIGKILL, and raises ``TimeoutExpired``."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in TORCHRUN_VARIABLES and not k.startswith("PET_") and k != train_cifar10.STOP_FILE_ENV
    }
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **environment)
    with subprocess.Popen(
        [*command, str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.communicate(timeout=STOP_TIMEOUT_S)
            finally:
                process.kill()
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def checked(done: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a run that must have succeeded."""
    assert done.returncode == 0, (
        f"exit {done.returncode}\nSTDOUT:\n{done.stdout[-4000:]}\nSTDERR:\n{done.stderr[-4000:]}"
    )
    return done.stdout


def test_ddp_two_workers_train_checkpoint_and_resume(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    common = ["--data-dir", str(data_dir), "--output-dir", str(out), "--batch-size", "16", "--backend", "gloo"]
    progress = tmp_path / "progress"
    watch = {**ProgressWatch().env(), PROGRESS_FILE_ENV: str(progress)}
    stdout = checked(run_torchrun(*common, "--epochs", "2", **watch))
    assert "rank 0 of 2 on cpu" in stdout
    step, at = progress.read_text().split()
    assert step == "16" and abs(int(at) - time.time()) < 600, "local rank 0 reported every step of both epochs"
    probe = subprocess.run(["sh", "-c", LIVENESS_SCRIPT], env={**watch, "PATH": "/usr/bin:/bin"}, timeout=30)
    assert probe.returncode == 0, "the liveness probe reads what the script wrote"
    first = epochs_logged(stdout)
    assert [e for e, *_ in first] == [1, 2]
    assert all(steps == 8 for *_, steps in first)  # 256 images / 2 ranks / 16 per step
    assert first[1][1] < first[0][1]  # the loss falls
    checkpoint = torch.load(out / "checkpoint.pt", weights_only=True)
    assert checkpoint["epoch"] == 2 and checkpoint["world_size"] == 2 and checkpoint["seed"] == 1
    assert {"model", "optimizer", "torch_rng_state", "history"} <= set(checkpoint)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epochs"] == 2 and metrics["world_size"] == 2
    assert metrics["train_loss"] == pytest.approx(first[1][1], abs=1e-4)
    final_json = json.loads(stdout.strip().splitlines()[-1])
    assert final_json == metrics

    stdout = checked(run_torchrun(*common, "--epochs", "4"))
    assert "resumed from epoch 2" in stdout
    second = epochs_logged(stdout)
    assert [e for e, *_ in second] == [3, 4]
    losses = [loss for _, loss, _, _ in first + second]
    assert losses == sorted(losses, reverse=True) and losses[-1] < losses[0] - 0.05
    assert second[-1][2] > 0.3  # well above chance (0.1) on the held-out images
    metrics = json.loads((out / "metrics.json").read_text())
    assert [h["epoch"] for h in metrics["history"]] == [1, 2, 3, 4]
    assert torch.load(out / "checkpoint.pt", weights_only=True)["epoch"] == 4
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "metrics.json", "model.pt"]  # no temp files
    net = train_cifar10.Net()
    net.load_state_dict(torch.load(out / "model.pt", weights_only=True))


def test_ddp_run_without_data_fails_with_a_clear_message(tmp_path: Path) -> None:
    done = run_torchrun("--data-dir", str(tmp_path), "--output-dir", str(tmp_path / "out"))
    assert done.returncode != 0
    assert "train_cifar10.py: error: no CIFAR-10 data in" in done.stderr
    assert not (tmp_path / "out").exists()


def test_ddp_checkpoint_that_rank_0_cannot_load_fails_the_run(data_dir: Path, tmp_path: Path) -> None:
    """Rank 0 reads the checkpoint and broadcasts it, or broadcasts the error: the run stops with that message."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "checkpoint.pt").write_bytes(b"truncated")
    done = run_torchrun("--data-dir", str(data_dir), "--output-dir", str(out), timeout=120)
    assert done.returncode != 0
    assert f"train_cifar10.py: error: cannot load {str(out / 'checkpoint.pt')!r}" in done.stderr
    assert f'File "{SCRIPT}"' not in done.stderr  # the message, not a worker's traceback


# ------------------------------------------------------------------------------------------------ stop on request

STOP_LINE = re.compile(
    r"^\[train_cifar10\] stopping at step (\d+) \(epoch (\d+), batch (\d+) of the epoch\): "
    r"a stop was requested \(\$TRAINIUM_EKS_STOP_FILE\)$",
    re.MULTILINE,
)
STOP_ARGS = ("--batch-size", "16", "--backend", "gloo", "--seed", "3", "--epochs", "2")
"""Two workers, 256 images: 8 steps per epoch, 16 in all."""
ASK_ONE_RANK_TO_STOP = """
import os
import sys

sys.path.insert(0, os.environ["CIFAR10_IMAGE_DIR"])
import train_cifar10

rank, at_step = os.environ["RANK"], int(os.environ["STOP_AT_STEP"])
os.environ[train_cifar10.STOP_FILE_ENV] += "." + rank  # a stop file of each rank's own
report_progress = train_cifar10.report_progress


def report_then_ask_to_stop(step):
    report_progress(step)
    if step == at_step and rank == os.environ["STOP_RANK"]:
        open(os.environ[train_cifar10.STOP_FILE_ENV], "w").close()


train_cifar10.report_progress = report_then_ask_to_stop
exit_code = train_cifar10.main(sys.argv[1:])
sys.stdout.flush()
sys.stderr.flush()
os._exit(exit_code)  # as the script does, for gloo's threads
"""
"""Runs the training script and, after the progress report of step ``$STOP_AT_STEP``, creates the stop file of rank
``$STOP_RANK`` only (each rank has a file of its own): a stop asked of one rank, between two steps, at an exact step."""


def stopped(done: subprocess.CompletedProcess[str]) -> list[tuple[int, int, int]]:
    """``(step, epoch, batch)`` of the stop lines of a run that must have stopped on request: torchrun reports its
    workers' failure (status 143) as its own exit status 1."""
    assert done.returncode == 1, (
        f"exit {done.returncode}\nSTDOUT:\n{done.stdout[-4000:]}\nSTDERR:\n{done.stderr[-4000:]}"
    )
    assert re.search(r"exitcode\s*:\s*143\b", done.stderr), "a worker exited with STOPPED_EXIT"
    return [(int(step), int(epoch), int(batch)) for step, epoch, batch in STOP_LINE.findall(done.stdout)]


def assert_ends_alike(out: Path, expected: Path) -> None:
    """The runs whose output folders are ``out`` and ``expected`` end alike, bitwise: their models, their metrics
    (losses and accuracies of every epoch) and the torch RNG state of their last checkpoints."""
    model, reference = (torch.load(folder / "model.pt", weights_only=True) for folder in (out, expected))
    assert model.keys() == reference.keys()
    for name, tensor in reference.items():
        torch.testing.assert_close(model[name], tensor, rtol=0, atol=0, msg=lambda m, name=name: f"{name}: {m}")
    assert json.loads((out / "metrics.json").read_text()) == json.loads((expected / "metrics.json").read_text())
    rng, reference_rng = (
        torch.load(folder / "checkpoint.pt", weights_only=True)["torch_rng_state"] for folder in (out, expected)
    )
    assert torch.equal(rng, reference_rng)


@pytest.fixture(scope="module")
def uninterrupted(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output folder of a two-worker run of :data:`STOP_ARGS` that no stop interrupted."""
    out = tmp_path_factory.mktemp("uninterrupted")
    checked(run_torchrun("--data-dir", str(data_dir), "--output-dir", str(out), *STOP_ARGS))
    return out


@pytest.fixture(scope="module")
def stopped_at_first_step(
    data_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """A two-worker run of :data:`STOP_ARGS` whose stop file exists from its start, and its output folder."""
    root = tmp_path_factory.mktemp("stopped")
    stop_file = root / "stop"
    stop_file.write_text("1700000000\n")
    out = root / "out"
    done = run_torchrun(
        "--data-dir",
        str(data_dir),
        "--output-dir",
        str(out),
        *STOP_ARGS,
        **{train_cifar10.STOP_FILE_ENV: str(stop_file)},
    )
    return done, out


def test_stop_requested_when_the_stop_file_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainium_eks.manifests.jobs import graceful_stop

    assert (train_cifar10.STOP_FILE_ENV, train_cifar10.STOPPED_EXIT) == (
        graceful_stop.STOP_FILE_ENV,
        graceful_stop.STOPPED_EXIT,
    ), "the contract the launch script and the script share"
    stop_file = tmp_path / "stop"
    monkeypatch.delenv(train_cifar10.STOP_FILE_ENV, raising=False)
    assert train_cifar10.stop_requested() is False
    monkeypatch.setenv(train_cifar10.STOP_FILE_ENV, "")
    assert train_cifar10.stop_requested() is False
    monkeypatch.setenv(train_cifar10.STOP_FILE_ENV, str(stop_file))
    assert train_cifar10.stop_requested() is False
    runtime = train_cifar10.Runtime(torch.device("cpu"), rank=0, world_size=1, local_rank=0, distributed=False)
    assert train_cifar10.gang_stop_requested(runtime) is False
    stop_file.write_text("1700000000\n")
    assert train_cifar10.stop_requested() is True
    assert train_cifar10.gang_stop_requested(runtime) is True
    stop_file.unlink()
    assert train_cifar10.stop_requested() is False
    assert runtime.gather([1.5, 3.0]) == [[1.5, 3.0]]


def test_a_single_process_stopped_after_an_epochs_last_step_resumes_exactly(
    data_dir: Path, tmp_path: Path, single_process: None, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Without a process group there is no collective: the process's own flag decides. A stop after the last step of
    an epoch leaves the epoch's test and its checkpoint to the resumed run."""
    common = ["--data-dir", str(data_dir), "--batch-size", "32", "--seed", "7", "--max-steps-per-epoch", "3"]
    split, whole, stop_file = tmp_path / "split", tmp_path / "whole", tmp_path / "stop"
    report_progress = train_cifar10.report_progress

    def report_then_ask_to_stop(step: int) -> None:
        report_progress(step)
        if step == 3:
            stop_file.touch()

    monkeypatch.setattr(train_cifar10, "report_progress", report_then_ask_to_stop)
    monkeypatch.setenv(train_cifar10.STOP_FILE_ENV, str(stop_file))
    assert train_cifar10.main([*common, "--output-dir", str(split), "--epochs", "2"]) == train_cifar10.STOPPED_EXIT
    out = capsys.readouterr().out
    assert [(int(s), int(e), int(b)) for s, e, b in STOP_LINE.findall(out)] == [(3, 1, 3)]
    assert epochs_logged(out) == []
    checkpoint = torch.load(split / "checkpoint.pt", weights_only=True)
    assert (checkpoint["epoch"], checkpoint["batch"], checkpoint["step"], checkpoint["history"]) == (0, 3, 3, [])
    assert [count for _, count in checkpoint["loss_sums"]] == [96.0]
    assert sorted(p.name for p in split.iterdir()) == ["checkpoint.pt"]

    monkeypatch.delenv(train_cifar10.STOP_FILE_ENV)
    assert train_cifar10.main([*common, "--output-dir", str(split), "--epochs", "2"]) == 0
    resumed = capsys.readouterr().out
    assert "resumed from step 3 (epoch 1, batch 3 of the epoch)" in resumed
    assert train_cifar10.main([*common, "--output-dir", str(whole), "--epochs", "2"]) == 0
    assert epochs_logged(resumed) == epochs_logged(capsys.readouterr().out)
    assert_ends_alike(split, whole)
    assert torch.load(split / "checkpoint.pt", weights_only=True)["step"] == 6


def test_ddp_stop_file_stops_the_gang_after_its_first_step(
    stopped_at_first_step: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    done, out = stopped_at_first_step
    assert stopped(done) == [(1, 1, 1)], "rank 0 logs the stop once"
    assert epochs_logged(done.stdout) == []
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt"], "no model.pt, no metrics.json, no temp file"
    checkpoint = torch.load(out / "checkpoint.pt", weights_only=True)
    assert checkpoint["format"] == train_cifar10.CHECKPOINT_FORMAT
    assert (checkpoint["epoch"], checkpoint["batch"], checkpoint["step"], checkpoint["history"]) == (0, 1, 1, [])
    assert checkpoint["world_size"] == 2
    assert [count for _, count in checkpoint["loss_sums"]] == [16.0, 16.0], "each rank's sum over its one batch"


def test_ddp_resume_after_a_stop_ends_as_an_uninterrupted_run(
    stopped_at_first_step: tuple[subprocess.CompletedProcess[str], Path],
    uninterrupted: Path,
    data_dir: Path,
    tmp_path: Path,
) -> None:
    """Bitwise: with two gloo workers on the CPU (one thread each) training is deterministic, each gradient being the
    mean of two, and the resumed run repeats the uninterrupted one's data order, steps and loss sums."""
    out, progress = tmp_path / "out", tmp_path / "progress"
    shutil.copytree(stopped_at_first_step[1], out)
    stdout = checked(
        run_torchrun(
            "--data-dir", str(data_dir), "--output-dir", str(out), *STOP_ARGS, **{PROGRESS_FILE_ENV: str(progress)}
        )
    )
    assert "resumed from step 1 (epoch 1, batch 1 of the epoch)" in stdout
    assert [(epoch, steps) for epoch, _, _, steps in epochs_logged(stdout)] == [(1, 8), (2, 8)]
    assert progress.read_text().split()[0] == "16", "the steps are counted on from the checkpoint's"
    assert_ends_alike(out, uninterrupted)


def test_ddp_stop_asked_of_one_rank_mid_epoch_resumes_at_that_batch(
    uninterrupted: Path, data_dir: Path, tmp_path: Path
) -> None:
    """Rank 1 alone finds a stop file, after step 11 (batch 3 of epoch 2): both ranks stop there, and the resumed run
    skips the epoch's first 3 batches, so it ends as the uninterrupted run does."""
    wrapper, stop_file, out, progress = (tmp_path / name for name in ("stop_at.py", "stop", "out", "progress"))
    wrapper.write_text(ASK_ONE_RANK_TO_STOP)
    common = ["--data-dir", str(data_dir), "--output-dir", str(out), *STOP_ARGS]
    done = run_torchrun(
        *common,
        script=wrapper,
        CIFAR10_IMAGE_DIR=str(IMAGE_DIR),
        STOP_AT_STEP="11",
        STOP_RANK="1",
        **{train_cifar10.STOP_FILE_ENV: str(stop_file), PROGRESS_FILE_ENV: str(progress)},
    )
    assert stopped(done) == [(11, 2, 3)]
    assert [p.name for p in tmp_path.glob("stop.*")] == ["stop.1"], "rank 0 stopped because rank 1 was asked"
    assert progress.read_text().split()[0] == "11"
    assert [epoch for epoch, *_ in epochs_logged(done.stdout)] == [1]
    checkpoint = torch.load(out / "checkpoint.pt", weights_only=True)
    assert (checkpoint["epoch"], checkpoint["batch"], checkpoint["step"]) == (1, 3, 11)
    assert [count for _, count in checkpoint["loss_sums"]] == [48.0, 48.0]
    assert not (out / "model.pt").exists() and not (out / "metrics.json").exists()

    stdout = checked(run_torchrun(*common, **{PROGRESS_FILE_ENV: str(progress)}))
    assert "resumed from step 11 (epoch 2, batch 3 of the epoch)" in stdout
    assert [(epoch, steps) for epoch, _, _, steps in epochs_logged(stdout)] == [(2, 8)]
    assert progress.read_text().split()[0] == "16"
    assert_ends_alike(out, uninterrupted)


def test_a_checkpoint_from_within_an_epoch_needs_the_same_number_of_processes(
    stopped_at_first_step: tuple[subprocess.CompletedProcess[str], Path],
    data_dir: Path,
    tmp_path: Path,
    single_process: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    shutil.copytree(stopped_at_first_step[1], out)
    assert train_cifar10.main(["--data-dir", str(data_dir), "--output-dir", str(out), *STOP_ARGS]) == 2
    err = capsys.readouterr().err
    assert "written in the middle of epoch 1 by 2 processes, and this run has 1" in err
    assert "run it with 2 processes, or remove the file to start over" in err
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == 1, "left as it was"
