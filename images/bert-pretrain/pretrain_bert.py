"""BERT phase-1 pretraining (masked LM + next-sentence prediction) on pre-tokenized HDF5 shards.

Runs data-parallel under ``torchrun`` (``python -m torch.distributed.run``), one process per worker:

* on AWS Trainium / Neuron, when ``torch_xla`` is importable: XLA device, process group backend ``xla``
  (``init_method="xla://"``), gradients all-reduced with ``xm.reduce_gradients`` before the optimizer step, and the
  lazy graph cut with ``mark_step`` after every micro-step and every optimizer step;
* elsewhere on the CPU: ``gloo`` process group and ``DistributedDataParallel``.

The model is ``transformers.BertForPreTraining`` built from a local JSON config (``--model_config``); nothing is
downloaded. Each rank reads its own contiguous slice of every shard (see :class:`ShardStream`), so the ranks never see
the same sample within an epoch and all of them take the same number of micro-batches.

Rank 0 logs one line per optimizer step, writes TensorBoard scalars to ``<output_dir>/tensorboard`` and checkpoints to
``<output_dir>/ckpt_<step>.pt`` (atomically: temporary file, then ``os.replace``), keeping the last
``--keep_checkpoints``. On start every rank resumes from the newest checkpoint in ``--output_dir``, if there is one.

Once the file ``$TRAINIUM_EKS_STOP_FILE`` names exists on any rank's machine (the trainium-eks launch script writes it
when the container is told to stop: its node drains, or its job restarts), every rank stops after the optimizer step
in progress: the ranks agree on it in the loss's all-reduce of every step, rank 0 writes a checkpoint at that step,
and every rank exits with status 143 (128 + SIGTERM), so that the job counts the pod as failed and restarts it, to
resume from that checkpoint.

Example (CPU, two workers, synthetic data)::

    python make_synthetic_shard.py --output ./scratch/data/synthetic_training_0.hdf5 --vocab_size 1024 --seq_len 64 \
        --max_predictions 10 --num_samples 256
    python -m torch.distributed.run --standalone --nnodes 1 --nproc_per_node 2 pretrain_bert.py \
        --model_config configs/bert-tiny.json --data_dir ./scratch/data --output_dir ./scratch/out \
        --batch_size 4 --grad_accum_usteps 2 --max_steps 4 --warmup_steps 1 --checkpoint_every 2
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import math
import os
import random
import re
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import h5py
import numpy as np
import torch
import torch.distributed as dist

LOG_PREFIX = "[pretrain_bert]"
IGNORE_INDEX = -100
SHARD_DATASETS = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "next_sentence_labels",
)
SHARD_SUFFIXES = (".hdf5", ".h5")
CHECKPOINT_RE = re.compile(r"^ckpt_(\d+)\.pt$")
CHECKPOINT_FORMAT = 1
SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
PROGRESS_FILE_ENV = "TRAINIUM_EKS_PROGRESS_FILE"
"""Where a training step is reported, when set (:func:`report_progress`)."""
STOP_FILE_ENV = "TRAINIUM_EKS_STOP_FILE"
"""The file whose existence asks the training to stop at its next step, when set (:func:`stop_requested`)."""
STOPPED_EXIT = 143
"""The exit status of a run stopped that way: 128 + SIGTERM, not 0, so the job restarts and resumes it."""
STOP_FLAG_BASE = 2.0
"""What a rank not asked to stop adds to the step's all-reduce (one asked adds one more)."""


def log(message: str) -> None:
    """Prints one log line, flushed at once so that ``kubectl logs`` shows it immediately."""
    print(f"{LOG_PREFIX} {message}", flush=True)


def report_progress(step: int) -> None:
    """Writes ``<step> <unix time>`` to the file ``$TRAINIUM_EKS_PROGRESS_FILE`` names, from the local rank 0 of each
    container, replacing it whole: the trainium-eks liveness probe reads it, and stops a container whose steps stop
    (trainium_eks.manifests.jobs.progress_watch). Nothing when the variable is unset."""
    path = os.environ.get(PROGRESS_FILE_ENV)
    if not path or os.environ.get("LOCAL_RANK", "0") != "0":
        return
    with open(path + ".tmp", "w") as file:
        file.write(f"{step} {int(time.time())}\n")
    os.replace(path + ".tmp", path)


def stop_requested() -> bool:
    """True once the file ``$TRAINIUM_EKS_STOP_FILE`` names exists: the trainium-eks launch script writes it when the
    container receives SIGTERM (trainium_eks.manifests.jobs.graceful_stop). False when the variable is unset."""
    path = os.environ.get(STOP_FILE_ENV)
    return bool(path) and os.path.exists(path)


class StopRequested(Exception):
    """The run stopped at ``step``, after its checkpoint there, because a rank's stop file appeared."""

    def __init__(self, step: int) -> None:
        super().__init__(f"stopped at step {step}")
        self.step = step


# --------------------------------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------------------------------


def masked_lm_labels(seq_len: int, positions: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Builds MLM labels of shape ``[N, seq_len]``: ``-100`` everywhere except at the masked positions.

    ``positions`` and ``ids`` have shape ``[N, max_predictions]`` and are zero-padded; position 0 holds [CLS] and is
    never masked, so a zero position is padding and is ignored wherever it appears.
    """
    positions = np.asarray(positions, dtype=np.int64)
    ids = np.asarray(ids, dtype=np.int64)
    if positions.shape != ids.shape or positions.ndim != 2:
        raise ValueError(
            f"masked_lm_positions {positions.shape} and masked_lm_ids {ids.shape} must be equal 2-D shapes"
        )
    if positions.size and (positions.min() < 0 or positions.max() >= seq_len):
        raise ValueError(f"masked_lm_positions must lie in [0, {seq_len}), found {positions.min()}..{positions.max()}")
    labels = np.full((positions.shape[0], seq_len), IGNORE_INDEX, dtype=np.int64)
    rows, cols = np.nonzero(positions != 0)
    labels[rows, positions[rows, cols]] = ids[rows, cols]
    return labels


def shard_num_samples(path: str) -> int:
    """Number of sequences in a shard, read from the HDF5 metadata only."""
    with h5py.File(path, "r") as f:
        missing = [name for name in SHARD_DATASETS if name not in f]
        if missing:
            raise ValueError(f"{path} is not a BERT phase-1 shard: missing datasets {missing}")
        return int(f["input_ids"].shape[0])


def read_shard(path: str, start: int = 0, stop: int | None = None) -> dict[str, torch.Tensor]:
    """Reads rows ``[start, stop)`` of a phase-1 shard as the keyword arguments of ``BertForPreTraining``.

    Returns int64 tensors ``input_ids``, ``token_type_ids``, ``attention_mask``, ``labels`` (``[N, seq]``, -100
    except at masked positions) and ``next_sentence_label`` (``[N]``).
    """
    with h5py.File(path, "r") as f:
        missing = [name for name in SHARD_DATASETS if name not in f]
        if missing:
            raise ValueError(f"{path} is not a BERT phase-1 shard: missing datasets {missing}")
        arrays = {name: np.asarray(f[name][start:stop]) for name in SHARD_DATASETS}
    input_ids = arrays["input_ids"].astype(np.int64)
    labels = masked_lm_labels(input_ids.shape[1], arrays["masked_lm_positions"], arrays["masked_lm_ids"])
    return {
        "input_ids": torch.from_numpy(input_ids),
        "token_type_ids": torch.from_numpy(arrays["segment_ids"].astype(np.int64)),
        "attention_mask": torch.from_numpy(arrays["input_mask"].astype(np.int64)),
        "labels": torch.from_numpy(labels),
        "next_sentence_label": torch.from_numpy(arrays["next_sentence_labels"].astype(np.int64).reshape(-1)),
    }


def list_shards(data_dir: str, pattern: str = "*") -> list[str]:
    """The ``<pattern>.hdf5`` and ``<pattern>.h5`` files directly in ``data_dir``, sorted by name."""
    files = sorted(
        path
        for suffix in SHARD_SUFFIXES
        for path in glob.glob(os.path.join(os.path.expanduser(data_dir), f"{pattern}{suffix}"))
        if os.path.isfile(path)
    )
    if not files:
        wanted = " or ".join(pattern + suffix for suffix in SHARD_SUFFIXES)
        raise FileNotFoundError(f"no shard files matching {wanted} in {data_dir!r}")
    return files


class ShardStream:
    """Deterministic, resumable stream of this rank's micro-batches over all shards, epoch after epoch.

    Every epoch visits the shards in an order shuffled by ``(seed, epoch)``, the same on all ranks. Of a shard with
    ``n`` rows, rank ``r`` reads only rows ``[r * n // W, (r + 1) * n // W)`` (``W`` = world size; the last
    ``n % W`` rows are skipped), shuffles them by ``(seed, epoch, shard index, rank)`` and cuts them into full
    micro-batches. So every rank yields the same number of micro-batches, as data-parallel training needs, and a
    stream restarted with ``iter_from(k)`` continues exactly where one that had yielded ``k`` batches stood.
    """

    def __init__(
        self,
        files: Sequence[str],
        *,
        batch_size: int,
        rank: int,
        world_size: int,
        seed: int,
        vocab_size: int | None = None,
        max_positions: int | None = None,
    ) -> None:
        if batch_size < 1 or world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"invalid batch_size={batch_size}, rank={rank}, world_size={world_size}")
        self.files = sorted(files)
        self.batch_size = batch_size
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.vocab_size = vocab_size
        self.max_positions = max_positions
        self.sizes = {path: shard_num_samples(path) for path in self.files}
        self.batches_per_file = {path: (n // world_size) // batch_size for path, n in self.sizes.items()}
        self.batches_per_epoch = sum(self.batches_per_file.values())
        if self.batches_per_epoch == 0:
            total = sum(self.sizes.values())
            raise ValueError(
                f"the {len(self.files)} shard(s) hold {total} samples: too few for one micro-batch of "
                f"{batch_size} per worker with {world_size} workers (each shard needs at least "
                f"{batch_size * world_size} samples)"
            )

    def file_order(self, epoch: int) -> list[str]:
        """The shard order of ``epoch`` (identical on every rank)."""
        order = np.random.default_rng([self.seed, epoch]).permutation(len(self.files))
        return [self.files[i] for i in order]

    def rank_rows(self, num_samples: int) -> tuple[int, int]:
        """The ``[start, stop)`` rows of a shard with ``num_samples`` rows that belong to this rank."""
        per_rank = num_samples // self.world_size
        start = self.rank * per_rank
        return start, start + per_rank

    def _check(self, path: str, data: dict[str, torch.Tensor]) -> None:
        if self.vocab_size is not None and data["input_ids"].numel():
            top = int(data["input_ids"].max())
            if top >= self.vocab_size:
                raise ValueError(f"{path}: token id {top} does not fit the model's vocab_size {self.vocab_size}")
        if self.max_positions is not None and data["input_ids"].shape[1] > self.max_positions:
            raise ValueError(
                f"{path}: sequence length {data['input_ids'].shape[1]} exceeds the model's "
                f"max_position_embeddings {self.max_positions}"
            )

    def iter_from(self, consumed: int = 0) -> Iterator[tuple[int, dict[str, torch.Tensor]]]:
        """Yields ``(epoch, batch)`` forever, skipping the first ``consumed`` micro-batches without reading them."""
        epoch, skip = divmod(consumed, self.batches_per_epoch)
        while True:
            for file_index, path in enumerate(self.file_order(epoch)):
                num_batches = self.batches_per_file[path]
                if skip >= num_batches:
                    skip -= num_batches
                    continue
                start, stop = self.rank_rows(self.sizes[path])
                data = read_shard(path, start, stop)
                self._check(path, data)
                rng = np.random.default_rng([self.seed, epoch, file_index, self.rank])
                order = torch.from_numpy(rng.permutation(stop - start))
                for b in range(skip, num_batches):
                    index = order[b * self.batch_size : (b + 1) * self.batch_size]
                    yield epoch, {name: tensor[index] for name, tensor in data.items()}
                skip = 0
            epoch += 1


# --------------------------------------------------------------------------------------------------------------------
# Devices and process groups
# --------------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Runtime:
    """Where this process runs: device, place in the world, and the XLA module when on Neuron."""

    device: torch.device
    rank: int
    world_size: int
    local_rank: int
    xm: Any = None  # torch_xla.core.xla_model on XLA devices, else None
    mark_step_fn: Callable[[], None] | None = None

    @property
    def xla(self) -> bool:
        """True on an XLA (Neuron) device."""
        return self.xm is not None

    @property
    def is_main(self) -> bool:
        """True on global rank 0, the rank that logs and writes."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """True when a process group is initialised."""
        return dist.is_available() and dist.is_initialized()

    def mark_step(self) -> None:
        """Cuts and runs the pending lazy graph on XLA; nothing on CPU."""
        if self.mark_step_fn is not None:
            self.mark_step_fn()

    def barrier(self) -> None:
        """Waits for every rank."""
        if self.xla and self.world_size > 1:
            self.xm.rendezvous("pretrain_bert.barrier")
        elif self.distributed:
            dist.barrier()

    def mean_over_ranks(self, value: torch.Tensor) -> torch.Tensor:
        """Average of ``value`` over all ranks."""
        if self.world_size == 1:
            return value
        if self.xla:
            return self.xm.all_reduce(self.xm.REDUCE_SUM, value, scale=1.0 / self.world_size)
        reduced = value.clone()
        dist.all_reduce(reduced, op=dist.ReduceOp.SUM)
        return reduced / self.world_size


def xla_available() -> bool:
    """True when ``torch_xla`` can be imported (Neuron images ship it through torch-neuronx)."""
    try:
        import torch_xla  # noqa: F401
    except ImportError:
        return False
    return True


def init_runtime(device: str = "auto") -> Runtime:
    """Sets up the device and, under torchrun, the process group from RANK/WORLD_SIZE/MASTER_ADDR/... .

    ``device`` is ``auto`` (XLA when ``torch_xla`` is importable, else CPU), ``xla`` or ``cpu``.
    """
    use_xla = device == "xla" or (device == "auto" and xla_available())
    env_world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_xla:
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.xla_backend  # registers the "xla" process-group backend
        import torch_xla.runtime as xr

        if env_world > 1 and not dist.is_initialized():
            dist.init_process_group("xla", init_method="xla://")
        xla_device = torch_xla.device() if hasattr(torch_xla, "device") else xm.xla_device()
        mark_step = torch_xla.sync if hasattr(torch_xla, "sync") else xm.mark_step
        return Runtime(
            device=torch.device(xla_device),
            rank=xr.global_ordinal(),
            world_size=xr.world_size(),
            local_rank=xr.local_ordinal(),
            xm=xm,
            mark_step_fn=mark_step,
        )
    if env_world > 1 and not dist.is_initialized():
        dist.init_process_group("gloo")
    if dist.is_initialized():
        return Runtime(torch.device("cpu"), dist.get_rank(), dist.get_world_size(), local_rank)
    return Runtime(torch.device("cpu"), 0, 1, local_rank)


# --------------------------------------------------------------------------------------------------------------------
# Model, optimizer, schedule
# --------------------------------------------------------------------------------------------------------------------


def build_model(config_path: str, attn_implementation: str | None = None) -> torch.nn.Module:
    """A freshly initialised ``BertForPreTraining`` from a local JSON config (no hub access).

    ``attn_implementation`` (e.g. ``"eager"``) overrides the attention kernel that transformers picks by default.
    """
    from transformers import BertConfig, BertForPreTraining

    model = BertForPreTraining(BertConfig.from_json_file(config_path))
    if attn_implementation is not None:
        model.set_attn_implementation(attn_implementation)
    return model


def build_optimizer(model: torch.nn.Module, name: str, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """LAMB or AdamW, with no weight decay on biases and LayerNorm weights."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for param_name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param_name.endswith("bias") or "layernorm" in param_name.lower():
            no_decay.append(param)
        else:
            decay.append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if name == "lamb":
        from lamb import Lamb

        return Lamb(groups, lr=lr, betas=(0.9, 0.999), eps=1e-6)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-6)
    raise ValueError(f"unknown optimizer {name!r}: choose lamb or adamw")


def lr_factor(step: int, *, warmup_steps: int, max_steps: int, power: float = 1.0) -> float:
    """Multiplier of the peak learning rate at optimizer step ``step`` (0-based).

    Linear warmup from ``1/warmup_steps`` to 1 over the first ``warmup_steps`` steps, then polynomial decay
    ``((max_steps - step) / (max_steps - warmup_steps)) ** power`` down to 0 at ``max_steps`` (``power=1``: linear).
    """
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    if max_steps <= warmup_steps:
        return 1.0
    remaining = max(0.0, (max_steps - step) / (max_steps - warmup_steps))
    return remaining**power


def build_scheduler(
    optimizer: torch.optim.Optimizer, *, warmup_steps: int, max_steps: int, power: float
) -> torch.optim.lr_scheduler.LambdaLR:
    """A LambdaLR over :func:`lr_factor`.

    The schedule is a closure, so a checkpoint's scheduler state carries only the step count: resuming with a new
    ``--max_steps`` continues on the new schedule.
    """

    def factor(step: int) -> float:
        return lr_factor(step, warmup_steps=warmup_steps, max_steps=max_steps, power=power)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def set_schedule_step(scheduler: torch.optim.lr_scheduler.LambdaLR, step: int) -> None:
    """Moves the schedule to ``step`` optimizer steps done and writes that learning rate into the optimizer.

    Used on resume instead of ``scheduler.load_state_dict``, which would bring back the old run's base learning rate
    and leave the optimizer's current ``lr`` at the value of the old schedule.
    """
    scheduler.last_epoch = step
    lrs = [base * fn(step) for base, fn in zip(scheduler.base_lrs, scheduler.lr_lambdas, strict=True)]
    for group, lr in zip(scheduler.optimizer.param_groups, lrs, strict=True):
        group["lr"] = lr
    scheduler._last_lr = lrs  # what get_last_lr() reports


# --------------------------------------------------------------------------------------------------------------------
# Checkpoints and random state
# --------------------------------------------------------------------------------------------------------------------


def checkpoint_path(output_dir: str, step: int) -> str:
    """Path of the checkpoint written after optimizer step ``step``."""
    return os.path.join(output_dir, f"ckpt_{step:08d}.pt")


def list_checkpoints(output_dir: str) -> list[tuple[int, str]]:
    """``(step, path)`` of every complete checkpoint in ``output_dir``, oldest first (temporary files excluded)."""
    if not os.path.isdir(output_dir):
        return []
    found = []
    for name in os.listdir(output_dir):
        match = CHECKPOINT_RE.match(name)
        if match:
            found.append((int(match.group(1)), os.path.join(output_dir, name)))
    return sorted(found)


def latest_checkpoint(output_dir: str) -> str | None:
    """The newest checkpoint in ``output_dir``, or None."""
    found = list_checkpoints(output_dir)
    return found[-1][1] if found else None


def prune_checkpoints(output_dir: str, keep: int) -> list[str]:
    """Deletes all but the newest ``keep`` checkpoints; returns the deleted paths."""
    found = list_checkpoints(output_dir)
    doomed = [path for _, path in found[: max(0, len(found) - keep)]]
    for path in doomed:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
    return doomed


def _fsync_file(path: str) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def save_checkpoint(runtime: Runtime, path: str, payload: dict[str, Any]) -> None:
    """Writes ``payload`` to ``path`` from rank 0, atomically (temporary file, fsync, ``os.replace``).

    Every rank must call it: on XLA ``xm.save`` moves the tensors to the CPU and synchronises all ranks.
    """
    tmp = f"{path}.tmp"
    if runtime.xla:
        runtime.xm.save(payload, tmp, master_only=True, global_master=True)
    elif runtime.is_main:
        with open(tmp, "wb") as f:
            torch.save(payload, f)
    if runtime.is_main:
        _fsync_file(tmp)
        os.replace(tmp, path)
    runtime.barrier()


def load_checkpoint(path: str) -> dict[str, Any]:
    """Loads a checkpoint onto the CPU (plain tensors and Python values only: ``weights_only=True``)."""
    return torch.load(path, map_location="cpu", weights_only=True)


def rng_state(runtime: Runtime) -> dict[str, Any]:
    """The random state of Python, NumPy, torch (and XLA), in types that ``weights_only`` loading accepts."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [kind, torch.from_numpy(np.asarray(keys, dtype=np.int64)), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if runtime.xla:
        state["xla"] = int(runtime.xm.get_rng_state())
    return state


def set_rng_state(runtime: Runtime, state: dict[str, Any]) -> None:
    """Restores a state returned by :func:`rng_state`."""
    random.setstate(_as_tuples(state["python"]))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if runtime.xla and "xla" in state:
        runtime.xm.set_rng_state(state["xla"])


def _as_tuples(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_as_tuples(v) for v in value)
    return value


def seed_everything(seed: int, runtime: Runtime | None = None) -> None:
    """Seeds Python, NumPy and torch (and the XLA device) with ``seed``."""
    seed = seed % (2**32)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if runtime is not None and runtime.xla:
        runtime.xm.set_rng_state(seed)


# --------------------------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------------------------


def autocast_factory(
    bf16: bool, runtime: Runtime, xla_version: tuple[int, int] | None = None
) -> tuple[Callable[[], contextlib.AbstractContextManager], str]:
    """The context manager that wraps the forward pass, and a description of the precision in use.

    On Neuron, bf16 comes from ``XLA_DOWNCAST_BF16=1`` when the job sets it (as the TorchX launcher does) and the
    installed torch-xla still honours it (before 2.8: Neuron ended support for the variable after its 2.24 release);
    otherwise from ``torch.autocast("xla", bfloat16)``, the documented replacement (the two must not be combined).
    On CPU: ``torch.autocast("cpu", bfloat16)``.
    """
    if not bf16:
        return contextlib.nullcontext, "fp32"
    if runtime.xla:
        env_bf16 = os.environ.get("XLA_DOWNCAST_BF16") == "1" or os.environ.get("XLA_USE_BF16") == "1"
        if env_bf16 and xla_version is not None and xla_version < (2, 8):
            return contextlib.nullcontext, "bf16 via XLA_DOWNCAST_BF16/XLA_USE_BF16"
        note = " (XLA_DOWNCAST_BF16 is ignored by this torch-xla)" if env_bf16 else ""
        return (lambda: torch.autocast("xla", dtype=torch.bfloat16)), "bf16 autocast (xla)" + note
    return (lambda: torch.autocast("cpu", dtype=torch.bfloat16)), "bf16 autocast (cpu)"


def torch_xla_version() -> tuple[int, int] | None:
    """(major, minor) of the installed torch-xla, or None when it is missing or unreadable."""
    try:
        import torch_xla
    except ImportError:
        return None
    match = re.match(r"(\d+)\.(\d+)", getattr(torch_xla, "__version__", ""))
    return (int(match.group(1)), int(match.group(2))) if match else None


def str2bool(value: str) -> bool:
    """Parses true/false flags written as ``--flag``, ``--flag True`` or ``--flag false``."""
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "y", "on"):
        return True
    if lowered in ("0", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean, got {value!r}")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parses and checks the command line."""
    parser = argparse.ArgumentParser(
        description="BERT phase-1 pretraining on pre-tokenized HDF5 shards (Neuron/XLA or CPU).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--data_dir", required=True, help="directory holding the *.hdf5 / *.h5 shards")
    parser.add_argument(
        "--shard_pattern",
        default="*",
        help="glob (without suffix) selecting the shards in data_dir, e.g. '*_training_*' to leave out test shards",
    )
    parser.add_argument("--output_dir", required=True, help="checkpoints and TensorBoard logs (shared volume)")
    parser.add_argument(
        "--model_config",
        default=os.path.join(SCRIPT_DIR, "configs", "bert-large.json"),
        help="BertConfig JSON file",
    )
    parser.add_argument("--batch_size", type=int, default=16, help="micro-batch per worker")
    parser.add_argument("--grad_accum_usteps", type=int, default=32, help="micro-steps per optimizer step")
    parser.add_argument("--optimizer", choices=("lamb", "adamw"), default="adamw")
    parser.add_argument("--lr", type=float, default=4e-4, help="peak learning rate")
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--max_grad_norm", type=float, default=1.0, help="global gradient-norm clip; 0 disables")
    parser.add_argument("--warmup_steps", type=int, default=2000, help="linear warmup, in optimizer steps")
    parser.add_argument("--lr_decay_power", type=float, default=1.0, help="1 = linear decay to 0 at max_steps")
    parser.add_argument("--max_steps", type=int, default=28125, help="total optimizer steps of the whole training")
    parser.add_argument(
        "--steps_this_run",
        type=int,
        default=None,
        help="stop after this many optimizer steps in this invocation (e.g. for the precompile job)",
    )
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--bf16", type=str2bool, nargs="?", const=True, default=False, help="bfloat16 compute")
    parser.add_argument("--checkpoint_every", type=int, default=500, help="optimizer steps; 0 = only at the end")
    parser.add_argument("--keep_checkpoints", type=int, default=3, help="newest checkpoints to keep")
    parser.add_argument("--device", choices=("auto", "xla", "cpu"), default="auto", help="auto: XLA if available")
    args = parser.parse_args(argv)

    problems = []
    for name in ("batch_size", "grad_accum_usteps", "max_steps", "keep_checkpoints"):
        if getattr(args, name) < 1:
            problems.append(f"--{name} must be >= 1, got {getattr(args, name)}")
    for name in ("warmup_steps", "checkpoint_every"):
        if getattr(args, name) < 0:
            problems.append(f"--{name} must be >= 0, got {getattr(args, name)}")
    if args.steps_this_run is not None and args.steps_this_run < 1:
        problems.append(f"--steps_this_run must be >= 1, got {args.steps_this_run}")
    if args.lr <= 0:
        problems.append(f"--lr must be > 0, got {args.lr}")
    if not os.path.isfile(args.model_config):
        problems.append(f"--model_config {args.model_config!r} is not a file")
    if problems:
        parser.error("; ".join(problems))
    return args


def train(args: argparse.Namespace, runtime: Runtime) -> int:
    """Runs (or resumes) training until ``--max_steps`` or ``--steps_this_run``; returns the last step reached. Raises
    :class:`StopRequested` after the checkpoint of the step at which any rank found its stop file."""
    rank, world = runtime.rank, runtime.world_size
    log(
        f"global_rank={rank} world_size={world} local_rank={runtime.local_rank} device={runtime.device} "
        f"host={socket.gethostname()}"
    )
    if runtime.is_main:
        log(f"rank 0 of {world}: this process logs the loss, writes TensorBoard events and checkpoints")
        log("arguments: " + " ".join(f"--{k} {v}" for k, v in sorted(vars(args).items())))
    extract_graphs_only = bool(os.environ.get("NEURON_EXTRACT_GRAPHS_ONLY"))
    if extract_graphs_only and runtime.is_main:
        log("NEURON_EXTRACT_GRAPHS_ONLY is set (neuron_parallel_compile): no checkpoints are written in this run")

    # Same seed on every rank before building the model, so that all replicas start from identical weights.
    seed_everything(args.seed, runtime)
    # On Neuron use the plain matmul/softmax attention that the Neuron compiler has long handled for BERT.
    model = build_model(args.model_config, "eager" if runtime.xla else None)
    config = model.config

    ckpt_path = latest_checkpoint(args.output_dir)
    state: dict[str, Any] | None = load_checkpoint(ckpt_path) if ckpt_path else None
    step = 0
    consumed = 0
    if state is not None:
        model.load_state_dict(state["model"])
        step = int(state["step"])
        consumed = int(state["micro_batches"])
        saved_layout = (state.get("world_size"), state.get("batch_size"))
        if saved_layout != (world, args.batch_size) and runtime.is_main:
            log(
                f"warning: checkpoint was written with (world_size, batch_size)={saved_layout}, now "
                f"{(world, args.batch_size)}: the data order after the resume differs from an uninterrupted run"
            )

    model.to(runtime.device)
    if runtime.xla and world > 1 and hasattr(runtime.xm, "broadcast_master_param"):
        runtime.xm.broadcast_master_param(model)
    train_model: torch.nn.Module = model
    ddp = False
    if not runtime.xla and runtime.distributed and world > 1:
        train_model = torch.nn.parallel.DistributedDataParallel(model)
        ddp = True

    optimizer = build_optimizer(model, args.optimizer, args.lr, args.weight_decay)
    scheduler = build_scheduler(
        optimizer, warmup_steps=args.warmup_steps, max_steps=args.max_steps, power=args.lr_decay_power
    )
    if state is not None:
        if state.get("optimizer_name") == args.optimizer:
            optimizer.load_state_dict(state["optimizer"])
        elif runtime.is_main:
            log(
                f"warning: checkpoint optimizer is {state.get('optimizer_name')!r}, now {args.optimizer!r}: "
                "starting with fresh optimizer state"
            )
        set_schedule_step(scheduler, int(state["scheduler"].get("last_epoch", step)))
        seed_everything(args.seed + 1_000_003 * step + rank, runtime)
        if runtime.is_main:
            set_rng_state(runtime, state["rng"])
            log(f"resumed from step {step} (checkpoint {ckpt_path}, {consumed} micro-batches consumed per worker)")
        del state
    else:
        seed_everything(args.seed + rank, runtime)  # different dropout masks per rank
        if runtime.is_main:
            log("no checkpoint in output_dir: starting from step 0")

    target = args.max_steps if args.steps_this_run is None else min(args.max_steps, step + args.steps_this_run)
    if step >= target:
        if runtime.is_main:
            log(f"nothing to do: step {step} already reached the target {target} (max_steps {args.max_steps})")
        return step

    stream = ShardStream(
        list_shards(args.data_dir, args.shard_pattern),
        batch_size=args.batch_size,
        rank=rank,
        world_size=world,
        seed=args.seed,
        vocab_size=config.vocab_size,
        max_positions=config.max_position_embeddings,
    )
    autocast, precision = autocast_factory(args.bf16, runtime, torch_xla_version() if runtime.xla else None)
    seqs_per_step = args.batch_size * args.grad_accum_usteps * world
    writer = None
    if runtime.is_main:
        os.makedirs(args.output_dir, exist_ok=True)
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(os.path.join(args.output_dir, "tensorboard"), purge_step=step + 1 if step else None)
        n_params = sum(p.numel() for p in model.parameters())
        log(
            f"model: {n_params / 1e6:.1f}M parameters, {config.num_hidden_layers} layers, hidden {config.hidden_size}; "
            f"precision: {precision}; optimizer: {args.optimizer}"
        )
        log(
            f"data: {len(stream.files)} shard(s), {stream.batches_per_epoch} micro-batches per worker per epoch; "
            f"{seqs_per_step} sequences per optimizer step; training steps {step + 1}..{target}"
        )

    batches = stream.iter_from(consumed)
    train_model.train()
    last_time = time.perf_counter()
    epoch = 0
    stopping = False
    while step < target:
        loss_sum = torch.zeros((), device=runtime.device)
        for micro in range(args.grad_accum_usteps):
            epoch, batch = next(batches)
            batch = {name: tensor.to(runtime.device) for name, tensor in batch.items()}
            sync = train_model.no_sync() if ddp and micro < args.grad_accum_usteps - 1 else contextlib.nullcontext()
            with sync:
                with autocast():
                    loss = train_model(**batch).loss / args.grad_accum_usteps
                loss.backward()
            loss_sum += loss.detach().float()
            consumed += 1
            runtime.mark_step()
        if runtime.xla and world > 1:
            runtime.xm.reduce_gradients(optimizer)
        if args.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
        lr = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        runtime.mark_step()
        step += 1

        # The stop flag travels with the loss (one all-reduce a step) as 2 or 3, never 0 or 1: torch-xla makes a
        # tensor of 0 or 1 a constant of the graph (torch_xla/csrc/tensor.cpp ``IsSpecialScalar``), so a flag of 1
        # would be a graph the pre-compilation never saw. Its mean exceeds 2 by at least 1/world when a rank asks.
        stop_flag = torch.tensor(STOP_FLAG_BASE + stop_requested(), device=runtime.device)
        mean_loss, flag_mean = runtime.mean_over_ranks(torch.stack([loss_sum, stop_flag])).tolist()
        stopping = flag_mean - STOP_FLAG_BASE > 0.5 / world
        report_progress(step)
        now = time.perf_counter()
        throughput = seqs_per_step / max(now - last_time, 1e-9)
        last_time = now
        if runtime.is_main:
            log(
                f"step {step}/{args.max_steps} loss {mean_loss:.5f} lr {lr:.4e} throughput {throughput:.1f} seq/s "
                f"epoch {epoch}"
            )
            if not math.isfinite(mean_loss):
                log(f"warning: non-finite loss at step {step}")
            assert writer is not None
            writer.add_scalar("train/loss", mean_loss, step)
            writer.add_scalar("train/learning_rate", lr, step)
            writer.add_scalar("train/sequences_per_second", throughput, step)

        periodic = args.checkpoint_every > 0 and step % args.checkpoint_every == 0
        if (periodic or step == target or stopping) and not extract_graphs_only:
            path = checkpoint_path(args.output_dir, step)
            payload = {
                "format": CHECKPOINT_FORMAT,
                "step": step,
                "micro_batches": consumed,
                "world_size": world,
                "batch_size": args.batch_size,
                "grad_accum_usteps": args.grad_accum_usteps,
                "optimizer_name": args.optimizer,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "rng": rng_state(runtime),
            }
            save_checkpoint(runtime, path, payload)
            if runtime.is_main:
                removed = prune_checkpoints(args.output_dir, args.keep_checkpoints)
                log(f"saved checkpoint {path}" + (f"; removed {len(removed)} old" if removed else ""))
        if stopping:
            if runtime.is_main:
                log(f"stopping at step {step}: a stop was requested (${STOP_FILE_ENV})")
                assert writer is not None
                writer.flush()
            runtime.barrier()  # no rank exits (and torchrun signals the others) before rank 0 has written it all
            break

    if writer is not None:
        writer.flush()
        writer.close()
    if stopping:
        raise StopRequested(step)
    if runtime.is_main:
        log(f"finished at step {step} (max_steps {args.max_steps})")
    return step


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parses the arguments, sets up the device and process group, trains, tears down."""
    args = parse_args(argv)
    runtime = init_runtime(args.device)
    try:
        train(args, runtime)
    except StopRequested:
        return STOPPED_EXIT
    finally:
        if runtime.distributed:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
