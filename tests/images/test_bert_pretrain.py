"""Tests of the BERT pretraining image's code: HDF5 reader, data stream, LR schedule, LAMB, and CPU smoke runs.

The smoke runs train ``configs/bert-tiny.json`` on synthetic shards, on the CPU with the gloo backend, under
``python -m torch.distributed.run`` with two workers, then resume from the checkpoint they wrote.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import h5py  # noqa: E402
import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
IMAGE_DIR = REPO / "images" / "bert-pretrain"
SCRIPT = IMAGE_DIR / "pretrain_bert.py"
TINY_CONFIG = IMAGE_DIR / "configs" / "bert-tiny.json"
if str(IMAGE_DIR) not in sys.path:
    sys.path.insert(0, str(IMAGE_DIR))

import lamb  # noqa: E402
import make_synthetic_shard  # noqa: E402
import pretrain_bert  # noqa: E402

from trainium_eks.manifests.jobs.progress_watch import (  # noqa: E402
    LIVENESS_SCRIPT,
    PROGRESS_FILE_ENV,
    ProgressWatch,
)

STEP_LINE = re.compile(r"\[pretrain_bert\] step (\d+)/(\d+) loss (\S+) lr (\S+) throughput (\S+) seq/s")
RUN_TIMEOUT_S = 300


# ------------------------------------------------------------------------------------------------ HDF5 reader


def write_h5(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    with h5py.File(path, "w") as f:
        for name, data in arrays.items():
            f.create_dataset(name, data=data)
    return path


def test_masked_lm_labels_are_ignore_index_except_masked_positions() -> None:
    positions = np.array([[3, 5, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=np.int32)
    ids = np.array([[7, 9, 0, 0], [4, 0, 0, 0], [0, 0, 0, 0]], dtype=np.int32)
    labels = pretrain_bert.masked_lm_labels(8, positions, ids)
    expected = np.full((3, 8), -100)
    expected[0, 3], expected[0, 5], expected[1, 1] = 7, 9, 4
    assert labels.dtype == np.int64
    np.testing.assert_array_equal(labels, expected)


def test_masked_lm_labels_rejects_out_of_range_positions() -> None:
    with pytest.raises(ValueError, match="masked_lm_positions"):
        pretrain_bert.masked_lm_labels(4, np.array([[5]]), np.array([[1]]))


def test_read_shard_builds_model_inputs(tmp_path: Path) -> None:
    # Two hand-made rows: zero-padded masked positions must leave position 0 ([CLS]) ignored, not labelled 0.
    arrays = {
        "input_ids": np.array([[101, 103, 7, 103, 102, 0], [101, 5, 103, 102, 8, 102]], dtype=np.int32),
        "input_mask": np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]], dtype=np.int8),
        "segment_ids": np.array([[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1]], dtype=np.int8),
        "masked_lm_positions": np.array([[1, 3, 0], [2, 0, 0]], dtype=np.int32),
        "masked_lm_ids": np.array([[11, 12, 0], [13, 0, 0]], dtype=np.int32),
        "next_sentence_labels": np.array([1, 0], dtype=np.int8),
    }
    shard = write_h5(tmp_path / "shard.hdf5", arrays)
    batch = pretrain_bert.read_shard(str(shard))

    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label"}
    assert all(t.dtype == torch.int64 for t in batch.values())
    assert batch["labels"].tolist() == [[-100, 11, -100, 12, -100, -100], [-100, -100, 13, -100, -100, -100]]
    assert batch["input_ids"].tolist() == arrays["input_ids"].tolist()
    assert batch["token_type_ids"].tolist() == arrays["segment_ids"].tolist()
    assert batch["attention_mask"].tolist() == arrays["input_mask"].tolist()
    assert batch["next_sentence_label"].tolist() == [1, 0]

    tail = pretrain_bert.read_shard(str(shard), 1, 2)
    assert tail["labels"].tolist() == [[-100, -100, 13, -100, -100, -100]]


def test_synthetic_shard_is_consistent(tmp_path: Path) -> None:
    out = tmp_path / "synthetic_training_0.hdf5"
    assert (
        make_synthetic_shard.main(
            [
                "--output",
                str(out),
                "--vocab_size",
                "300",
                "--seq_len",
                "32",
                "--max_predictions",
                "5",
                "--num_samples",
                "12",
                "--seed",
                "3",
            ]
        )
        == 0
    )
    assert pretrain_bert.shard_num_samples(str(out)) == 12
    with h5py.File(out, "r") as f:
        positions = f["masked_lm_positions"][:]
        masked_ids = f["masked_lm_ids"][:]
    batch = pretrain_bert.read_shard(str(out))
    labels, input_ids = batch["labels"].numpy(), batch["input_ids"].numpy()
    for row in range(12):
        real = positions[row][positions[row] != 0]
        assert 1 <= len(real) <= 5
        assert sorted(np.nonzero(labels[row] != -100)[0].tolist()) == sorted(real.tolist())
        np.testing.assert_array_equal(labels[row, real], masked_ids[row, : len(real)])
        assert (input_ids[row, real] == make_synthetic_shard.MASK_ID).all()
        assert labels[row, 0] == -100 and input_ids[row, 0] == make_synthetic_shard.CLS_ID
    assert batch["input_ids"].max() < 300
    # Same seed, same shard.
    again = make_synthetic_shard.make_shard_arrays(
        vocab_size=300, seq_len=32, max_predictions=5, num_samples=12, seed=3
    )
    np.testing.assert_array_equal(again["input_ids"], input_ids)


def test_read_shard_rejects_other_hdf5(tmp_path: Path) -> None:
    shard = write_h5(tmp_path / "other.h5", {"input_ids": np.zeros((2, 4), dtype=np.int32)})
    with pytest.raises(ValueError, match="missing datasets"):
        pretrain_bert.read_shard(str(shard))


# ------------------------------------------------------------------------------------------------ data stream


def numbered_shard(path: Path, first_id: int, rows: int) -> Path:
    """A synthetic shard whose token at position 1 is a unique row number (``first_id + row``)."""
    arrays = make_synthetic_shard.make_shard_arrays(
        vocab_size=4096, seq_len=16, max_predictions=3, num_samples=rows, seed=first_id
    )
    arrays["masked_lm_positions"][:, :] = 0  # keep position 1 unmasked, so that input_ids[:, 1] is the row number
    arrays["masked_lm_positions"][:, 0] = 2
    arrays["input_ids"][:, 1] = np.arange(first_id, first_id + rows)
    return write_h5(path, arrays)


def collect_ids(stream: pretrain_bert.ShardStream, start: int, count: int) -> list[list[int]]:
    it = stream.iter_from(start)
    return [next(it)[1]["input_ids"][:, 1].tolist() for _ in range(count)]


def test_shard_stream_splits_ranks_and_resumes(tmp_path: Path) -> None:
    files = [str(numbered_shard(tmp_path / "a.hdf5", 1000, 20)), str(numbered_shard(tmp_path / "b.h5", 2000, 13))]
    assert pretrain_bert.list_shards(str(tmp_path)) == sorted(files)
    assert pretrain_bert.list_shards(str(tmp_path), "b") == [files[1]]
    world, batch = 3, 2
    streams = [
        pretrain_bert.ShardStream(files, batch_size=batch, rank=r, world_size=world, seed=5) for r in range(world)
    ]
    # 20 rows -> 6 per rank -> 3 batches; 13 rows -> 4 per rank -> 2 batches.
    assert all(s.batches_per_epoch == 5 for s in streams)

    epoch0 = [collect_ids(s, 0, 5) for s in streams]
    seen = [{i for b in batches for i in b} for batches in epoch0]
    assert all(len(ids) == 10 for ids in seen)  # no duplicates within a rank
    assert not (seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2])  # ranks read disjoint rows
    assert all(len(b) == batch for batches in epoch0 for b in batches)

    # Deterministic, and restartable at any micro-batch, across the epoch boundary.
    again = pretrain_bert.ShardStream(files, batch_size=batch, rank=1, world_size=world, seed=5)
    assert collect_ids(again, 0, 5) == epoch0[1]
    full = collect_ids(streams[1], 0, 12)
    assert collect_ids(again, 3, 9) == full[3:]
    # A new epoch reshuffles; another seed gives another order.
    assert full[5:10] != full[0:5]
    assert sorted(i for b in full[5:10] for i in b) == sorted(i for b in full[0:5] for i in b)
    other_seed = pretrain_bert.ShardStream(files, batch_size=batch, rank=1, world_size=world, seed=6)
    assert collect_ids(other_seed, 0, 5) != epoch0[1]


def test_shard_stream_checks_data_against_model(tmp_path: Path) -> None:
    files = [str(numbered_shard(tmp_path / "a.hdf5", 1000, 8))]
    with pytest.raises(ValueError, match="too few"):
        pretrain_bert.ShardStream(files, batch_size=4, rank=0, world_size=4, seed=0)
    small_vocab = pretrain_bert.ShardStream(files, batch_size=2, rank=0, world_size=1, seed=0, vocab_size=500)
    with pytest.raises(ValueError, match="vocab_size"):
        next(small_vocab.iter_from(0))
    with pytest.raises(FileNotFoundError):
        pretrain_bert.list_shards(str(tmp_path / "empty"))


# ------------------------------------------------------------------------------------------------ schedule, args


def test_lr_schedule_warmup_then_polynomial_decay() -> None:
    def f(step: int, power: float = 1.0) -> float:
        return pretrain_bert.lr_factor(step, warmup_steps=4, max_steps=12, power=power)

    assert [f(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert f(4) == 1.0 and f(8) == pytest.approx(0.5) and f(12) == 0.0 and f(20) == 0.0
    assert f(8, power=2.0) == pytest.approx(0.25)
    assert pretrain_bert.lr_factor(0, warmup_steps=0, max_steps=10) == 1.0


def test_resume_moves_schedule_to_the_new_max_steps() -> None:
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=1.0)
    sched = pretrain_bert.build_scheduler(opt, warmup_steps=1, max_steps=6, power=1.0)
    pretrain_bert.set_schedule_step(sched, 4)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.4)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.2)


def test_parse_args_rejects_bad_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--data_dir", str(tmp_path), "--output_dir", str(tmp_path), "--model_config", str(TINY_CONFIG)]
    args = pretrain_bert.parse_args([*base, "--bf16", "True", "--optimizer", "lamb"])
    assert args.bf16 is True and args.optimizer == "lamb" and args.steps_this_run is None
    assert pretrain_bert.parse_args([*base, "--bf16"]).bf16 is True
    assert pretrain_bert.parse_args(base).bf16 is False
    with pytest.raises(SystemExit):
        pretrain_bert.parse_args([*base, "--grad_accum_usteps", "0"])
    assert "--grad_accum_usteps must be >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        pretrain_bert.parse_args([*base[:4], "--model_config", str(tmp_path / "missing.json")])


def test_build_model_from_local_config_with_attention_override() -> None:
    model = pretrain_bert.build_model(str(TINY_CONFIG), "eager")
    assert type(model).__name__ == "BertForPreTraining"
    assert model.config.num_hidden_layers == 2 and model.config.vocab_size == 1024
    assert model.config._attn_implementation == "eager"
    large = json.loads((IMAGE_DIR / "configs" / "bert-large.json").read_text())
    assert (large["num_hidden_layers"], large["hidden_size"], large["num_attention_heads"]) == (24, 1024, 16)
    assert (large["intermediate_size"], large["vocab_size"], large["max_position_embeddings"]) == (4096, 30522, 512)
    assert large["type_vocab_size"] == 2


def test_bf16_precision_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = pretrain_bert.Runtime(torch.device("cpu"), 0, 1, 0)
    assert pretrain_bert.autocast_factory(False, cpu)[1] == "fp32"
    ctx, label = pretrain_bert.autocast_factory(True, cpu)
    assert label == "bf16 autocast (cpu)"
    with ctx():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16

    fake_xla = pretrain_bert.Runtime(torch.device("cpu"), 0, 1, 0, xm=object())
    monkeypatch.delenv("XLA_USE_BF16", raising=False)
    monkeypatch.delenv("XLA_DOWNCAST_BF16", raising=False)
    assert pretrain_bert.autocast_factory(True, fake_xla, (2, 9))[1] == "bf16 autocast (xla)"
    monkeypatch.setenv("XLA_DOWNCAST_BF16", "1")
    ctx, label = pretrain_bert.autocast_factory(True, fake_xla, (2, 1))
    assert ctx is contextlib.nullcontext and "XLA_DOWNCAST_BF16" in label  # old torch-xla: the variable does it
    assert pretrain_bert.autocast_factory(True, fake_xla, (2, 9))[1].startswith("bf16 autocast (xla)")


# ------------------------------------------------------------------------------------------------ LAMB


def lamb_step(param: list[float], grad: list[float], **kwargs: float) -> list[float]:
    p = torch.nn.Parameter(torch.tensor(param, dtype=torch.float64))
    p.grad = torch.tensor(grad, dtype=torch.float64)
    lamb.Lamb([p], **kwargs).step()
    return p.detach().tolist()


def test_lamb_first_step_matches_hand_computation() -> None:
    # Step 1 with bias correction: m_hat = g, v_hat = g^2, so u = g / (|g| + eps) = (1, 1) / (1 + eps).
    # Trust ratio ||p|| / ||u|| = 5 (1 + eps) / sqrt(2); the step is lr * 5 / sqrt(2) on each coordinate.
    moved = lamb_step([3.0, 4.0], [1.0, 1.0], lr=0.1, eps=1e-6)
    delta = 0.1 * 5.0 / math.sqrt(2.0)
    assert moved == pytest.approx([3.0 - delta, 4.0 - delta], rel=1e-6)


def test_lamb_weight_decay_alone_shrinks_by_lr() -> None:
    # Zero gradient: u = wd * p, trust ratio = 1 / wd, so p <- p - lr * p.
    assert lamb_step([3.0, 4.0], [0.0, 0.0], lr=0.1, weight_decay=0.01) == pytest.approx([2.7, 3.6], rel=1e-6)


def test_lamb_zero_weights_use_trust_ratio_one_and_clamp() -> None:
    eps = 1e-6
    assert lamb_step([0.0, 0.0], [2.0, -2.0], lr=0.1, eps=eps) == pytest.approx(
        [-0.1 * 2 / (2 + eps), 0.1 * 2 / (2 + eps)], rel=1e-6
    )
    # With the ratio capped at 1 the first example moves by lr * u instead of lr * 5 / sqrt(2).
    assert lamb_step([3.0, 4.0], [1.0, 1.0], lr=0.1, eps=eps, clamp_trust_ratio=True) == pytest.approx(
        [3.0 - 0.1 / (1 + eps), 4.0 - 0.1 / (1 + eps)], rel=1e-6
    )


def test_lamb_reduces_a_regression_loss_and_round_trips_state() -> None:
    torch.manual_seed(0)
    x = torch.randn(64, 8)
    y = x @ torch.randn(8, 1) + 0.5
    model = torch.nn.Linear(8, 1)
    opt = lamb.Lamb(model.parameters(), lr=0.05, weight_decay=0.0)

    def loss_fn() -> torch.Tensor:
        return torch.nn.functional.mse_loss(model(x), y)

    start = loss_fn().item()
    for _ in range(60):
        opt.zero_grad()
        loss_fn().backward()
        opt.step()
    assert loss_fn().item() < 0.1 * start

    # A copy restored from the state dict takes exactly the same next step.
    twin = torch.nn.Linear(8, 1)
    twin.load_state_dict(model.state_dict())
    twin_opt = lamb.Lamb(twin.parameters(), lr=0.05, weight_decay=0.0)
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    buffer.seek(0)
    twin_opt.load_state_dict(torch.load(buffer, weights_only=True))
    for m, o in ((model, opt), (twin, twin_opt)):
        o.zero_grad()
        torch.nn.functional.mse_loss(m(x), y).backward()
        o.step()
    torch.testing.assert_close(twin.weight, model.weight, rtol=0, atol=0)


def test_lamb_rejects_bad_hyperparameters() -> None:
    p = [torch.nn.Parameter(torch.zeros(2))]
    with pytest.raises(ValueError):
        lamb.Lamb(p, lr=-1.0)
    with pytest.raises(ValueError):
        lamb.Lamb(p, betas=(1.0, 0.9))


# ------------------------------------------------------------------------------------------------ CPU smoke runs


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two synthetic shards that fit configs/bert-tiny.json (vocab 1024, 128 positions)."""
    root = tmp_path_factory.mktemp("bert-data")
    for index, rows in enumerate((96, 70)):
        make_synthetic_shard.main(
            [
                "--output",
                str(root / f"synthetic_training_{index}.hdf5"),
                "--vocab_size",
                "1024",
                "--seq_len",
                "64",
                "--max_predictions",
                "10",
                "--num_samples",
                str(rows),
                "--seed",
                str(index),
            ]
        )
    return root


def run_training(
    data: Path, output: Path, *extra: str, nproc: int = 0, status: int = 0, **environment: str
) -> tuple[str, list[tuple[int, float, float]]]:
    """Runs the script (under torchrun when ``nproc`` > 0, with the variables ``environment``), which must exit with
    ``status``; returns stdout and the (step, loss, lr) logged."""
    launcher = [sys.executable]
    if nproc:
        launcher += ["-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc_per_node", str(nproc)]
    command = [
        *launcher,
        str(SCRIPT),
        "--device",
        "cpu",
        "--model_config",
        str(TINY_CONFIG),
        "--data_dir",
        str(data),
        "--output_dir",
        str(output),
        "--batch_size",
        "4",
        "--grad_accum_usteps",
        "2",
        "--warmup_steps",
        "1",
        "--lr",
        "1e-3",
        *extra,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **environment}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env, cwd=str(output.parent)
    )
    assert done.returncode == status, (
        f"exit {done.returncode}\nSTDOUT:\n{done.stdout[-4000:]}\nSTDERR:\n{done.stderr[-4000:]}"
    )
    steps = [(int(m.group(1)), float(m.group(3)), float(m.group(4))) for m in STEP_LINE.finditer(done.stdout)]
    return done.stdout, steps


def checkpoint_steps(output: Path) -> list[int]:
    return [step for step, _ in pretrain_bert.list_checkpoints(str(output))]


def tensorboard_loss_steps(output: Path) -> list[int]:
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    mux = EventMultiplexer().AddRunsFromDirectory(str(output / "tensorboard"))
    mux.Reload()
    steps: list[int] = []
    for run in mux.Runs():
        tags = mux.Runs()[run].get("scalars", [])
        for tag in ("train/learning_rate", "train/sequences_per_second"):
            assert tag in tags
        steps += [event.step for event in mux.Scalars(run, "train/loss")] if "train/loss" in tags else []
    return sorted(steps)


def test_cpu_smoke_two_workers_then_resume(data_dir: Path, tmp_path: Path) -> None:
    output = tmp_path / "out"
    stdout, steps = run_training(data_dir, output, "--max_steps", "4", "--checkpoint_every", "2", nproc=2)

    assert "rank 0 of 2" in stdout
    assert [s for s, _, _ in steps] == [1, 2, 3, 4]
    assert all(math.isfinite(loss) and loss > 0 for _, loss, _ in steps)
    # Peak 1e-3 after one warmup step, then linear decay to 0 at step 4.
    assert [lr for _, _, lr in steps] == pytest.approx([1e-3, 1e-3, 1e-3 * 2 / 3, 1e-3 / 3], rel=1e-3)
    assert checkpoint_steps(output) == [2, 4]
    assert not list(output.glob("*.tmp"))
    assert list((output / "tensorboard").glob("events.out.tfevents.*"))
    assert tensorboard_loss_steps(output) == [1, 2, 3, 4]
    ckpt = pretrain_bert.load_checkpoint(pretrain_bert.checkpoint_path(str(output), 4))
    assert ckpt["step"] == 4 and ckpt["micro_batches"] == 8 and ckpt["world_size"] == 2
    assert {"model", "optimizer", "scheduler", "rng"} <= set(ckpt)
    assert ckpt["scheduler"]["last_epoch"] == 4

    progress = tmp_path / "progress"
    watch = {**ProgressWatch().env(), PROGRESS_FILE_ENV: str(progress)}
    stdout, steps = run_training(
        data_dir, output, "--max_steps", "6", "--checkpoint_every", "2", "--keep_checkpoints", "2", nproc=2, **watch
    )
    assert "resumed from step 4" in stdout
    assert progress.read_text().split()[0] == "6", "the resumed run reports the run's own step count"
    probe = subprocess.run(["sh", "-c", LIVENESS_SCRIPT], env={**watch, "PATH": "/usr/bin:/bin"}, timeout=30)
    assert probe.returncode == 0, "the liveness probe reads what the script wrote"
    assert [s for s, _, _ in steps] == [5, 6]
    assert all(math.isfinite(loss) for _, loss, _ in steps)
    assert [lr for _, _, lr in steps] == pytest.approx(
        [1e-3 * 2 / 5, 1e-3 / 5], rel=1e-3
    )  # the schedule of max_steps 6
    assert checkpoint_steps(output) == [4, 6]
    assert tensorboard_loss_steps(output) == [1, 2, 3, 4, 5, 6]


def test_resume_reproduces_an_uninterrupted_run(data_dir: Path, tmp_path: Path) -> None:
    """4 steps + resume gives the same losses as 6 steps in one go (model, LAMB state, RNG and data position)."""
    common = ["--max_steps", "6", "--checkpoint_every", "0", "--optimizer", "lamb", "--bf16"]
    _, first = run_training(data_dir, tmp_path / "split", *common, "--steps_this_run", "4")
    assert [s for s, _, _ in first] == [1, 2, 3, 4]
    assert checkpoint_steps(tmp_path / "split") == [4]  # the end of a run is always checkpointed
    stdout, second = run_training(data_dir, tmp_path / "split", *common)
    assert "resumed from step 4" in stdout and "precision: bf16 autocast (cpu)" in stdout
    _, whole = run_training(data_dir, tmp_path / "whole", *common)

    assert [s for s, _, _ in first + second] == [s for s, _, _ in whole] == [1, 2, 3, 4, 5, 6]
    for (_, resumed, resumed_lr), (_, straight, straight_lr) in zip(first + second, whole, strict=True):
        assert resumed == pytest.approx(straight, abs=1e-5)
        assert resumed_lr == pytest.approx(straight_lr, rel=1e-6)

    stdout, again = run_training(data_dir, tmp_path / "split", *common)
    assert again == [] and "nothing to do" in stdout


def test_a_stop_file_stops_every_rank_after_the_step_with_a_checkpoint_and_the_run_resumes_there(
    data_dir: Path, tmp_path: Path
) -> None:
    """The stop file (the launch script's answer to SIGTERM) stops both workers after their first step, agreed in
    the step's all-reduce, with a checkpoint of that step; torchrun reports the workers' failure as its own (1)."""
    common = ["--max_steps", "4", "--checkpoint_every", "0"]
    stop = tmp_path / "stop"
    stop.touch()
    stdout, first = run_training(
        data_dir, tmp_path / "out", *common, nproc=2, status=1, **{pretrain_bert.STOP_FILE_ENV: str(stop)}
    )
    assert [s for s, _, _ in first] == [1] and "stopping at step 1: a stop was requested" in stdout
    assert checkpoint_steps(tmp_path / "out") == [1], "the stop's checkpoint, not the run's end"
    ckpt = pretrain_bert.load_checkpoint(pretrain_bert.checkpoint_path(str(tmp_path / "out"), 1))
    assert ckpt["step"] == 1 and ckpt["micro_batches"] == 2 and ckpt["world_size"] == 2
    stdout, second = run_training(data_dir, tmp_path / "out", *common, nproc=2)
    assert "resumed from step 1" in stdout and [s for s, _, _ in second] == [2, 3, 4]


def test_a_stopped_process_exits_143_and_resumes_to_the_uninterrupted_runs_losses(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One process (a checkpoint restores rank 0's random state on every rank, so only one process reproduces an
    uninterrupted run to the bit): stopped after step 1, then resumed, it logs the same losses."""
    stop = tmp_path / "stop"
    monkeypatch.delenv(pretrain_bert.STOP_FILE_ENV, raising=False)
    assert not pretrain_bert.stop_requested()
    monkeypatch.setenv(pretrain_bert.STOP_FILE_ENV, str(stop))
    assert not pretrain_bert.stop_requested()
    stop.touch()
    assert pretrain_bert.stop_requested()

    common = ["--max_steps", "4", "--checkpoint_every", "0", "--optimizer", "lamb"]
    _, first = run_training(
        data_dir, tmp_path / "split", *common, status=143, **{pretrain_bert.STOP_FILE_ENV: str(stop)}
    )
    assert checkpoint_steps(tmp_path / "split") == [1]
    _, second = run_training(data_dir, tmp_path / "split", *common, **{pretrain_bert.STOP_FILE_ENV: ""})
    _, whole = run_training(data_dir, tmp_path / "whole", *common, **{pretrain_bert.STOP_FILE_ENV: ""})
    assert [s for s, _, _ in first + second] == [s for s, _, _ in whole] == [1, 2, 3, 4]
    for (_, resumed, _), (_, straight, _) in zip(first + second, whole, strict=True):
        assert resumed == pytest.approx(straight, abs=1e-5)
