"""Data-parallel training of the small CNN of the PyTorch CIFAR-10 tutorial, under ``torchrun``.

The model is the tutorial's ``Net`` (the one the Kubeflow workshop trained): conv 3->6 (5x5), max-pool 2, conv 6->16
(5x5), max-pool 2, then fully connected 400->120->84->10 with ReLUs. Images are scaled to [-1, 1] per channel, as the
tutorial's ``Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))`` does; there is no augmentation.

Data: CIFAR-10 "python version" (https://www.cs.toronto.edu/~kriz/cifar.html), i.e. the folder
``cifar-10-batches-py`` with ``data_batch_1`` ... ``data_batch_5`` and ``test_batch``: pickled dicts holding
``b"data"`` (uint8, N x 3072, channel-major 32x32 images) and ``b"labels"`` (N ints in 0..9). ``--data-dir`` is the
folder holding ``cifar-10-batches-py`` or that folder itself. Nothing is ever downloaded. The files are Python
pickles, which can run any code when loaded: they are read with an unpickler that builds NumPy arrays, dicts, lists,
bytes and numbers and refuses every other class (:class:`BatchUnpickler`), so a file planted on the shared volume
cannot run code in a later run.

Processes: one per device, started by ``torchrun`` (``python -m torch.distributed.run``), which sets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``; the process group is built from them
(``--backend auto``: ``nccl`` when CUDA is available, else ``gloo``). On a GPU node each process uses
``cuda:LOCAL_RANK``. Run without ``torchrun``, the script trains in one process without a process group.
Each epoch a ``DistributedSampler`` gives every rank its share of the training set (seeded, reshuffled per epoch);
the test set is split by rank and the accuracy summed over all ranks.

Outputs (rank 0): one line per epoch, ``epoch=<n> train_loss=<l> test_accuracy=<a>`` (grep-able, e.g. by SageMaker
metric definitions), a final line holding the metrics as JSON, and in ``--output-dir`` the files ``metrics.json`` and
``model.pt`` (the model's state dict). After every epoch rank 0 writes ``checkpoint.pt`` in ``--checkpoint-dir``
(default: ``--output-dir``) atomically: a temporary file in the same folder, fsynced, then ``os.replace``. On start
rank 0 reads that checkpoint, when it exists, and broadcasts it, so that every rank resumes from the same state (also
where the folder is local to the first host, as SageMaker's ``/opt/ml/checkpoints`` is) and a restarted job continues
where the checkpoint is: with the next epoch, or within an epoch after a stop. The checkpoint records the run it
belongs to (``--run-id``, by default the environment variable ``TRAINING_RUN_ID``, which the hybrid workflow sets to
its execution's ARN; none when unset), and a checkpoint of another run is refused, not resumed: a run never continues
from another run's weights, optimizer state and epoch, whatever put the two in one folder.

Stop on request (trainium_eks.manifests.jobs.graceful_stop): the container's launch script creates the file
``$TRAINIUM_EKS_STOP_FILE`` names when Kubernetes sends the container SIGTERM (the workers get no signal). After every
optimizer step, and its report to ``$TRAINIUM_EKS_PROGRESS_FILE``, the ranks agree in one all-reduce whether any of them
sees that file; when one does, rank 0 writes ``checkpoint.pt`` at that step and logs ``stopping at step N (epoch E,
batch B of the epoch)``, and every rank exits with status 143 (128 + SIGTERM: the pod fails, so its gang is restarted),
writing neither ``model.pt`` nor ``metrics.json``. Such a checkpoint also holds the batches done in the epoch, each
rank's loss sum over them, the step count and the torch RNG state at the epoch's start (the epoch's DataLoader draws
its base seed from it). The resumed run skips those batches of the epoch's ``DistributedSampler`` order (seeded by
``--seed`` and the epoch), counts steps on from the checkpoint's, and reports the whole epoch's train loss: a run
stopped and resumed ends with the same model and metrics as one that was not (bitwise on the CPU with gloo). It resumes
only with the number of processes that wrote it.

Example (CPU, two processes)::

    python make_synthetic_cifar.py --output-dir ./scratch/data
    python -m torch.distributed.run --standalone --nproc_per_node 2 train_cifar10.py \
        --data-dir ./scratch/data --output-dir ./scratch/out --epochs 2
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pickle
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

LOG_PREFIX = "[train_cifar10]"
BATCHES_FOLDER = "cifar-10-batches-py"
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
NUM_CLASSES = 10
IMAGE_SHAPE = (3, 32, 32)
IMAGE_BYTES = 3 * 32 * 32
CHECKPOINT_NAME = "checkpoint.pt"
MODEL_NAME = "model.pt"
METRICS_NAME = "metrics.json"
CHECKPOINT_FORMAT = 2
"""Version 2 added the position within an epoch (``batch``, ``step``, ``loss_sums``)."""
RUN_ID_ENV = "TRAINING_RUN_ID"
PROGRESS_FILE_ENV = "TRAINIUM_EKS_PROGRESS_FILE"
"""Where a training step is reported, when set (:func:`report_progress`)."""
STOP_FILE_ENV = "TRAINIUM_EKS_STOP_FILE"
"""The file whose existence asks the training to stop, when set (:func:`stop_requested`)."""
STOPPED_EXIT = 143
"""The exit status of a run that stopped on request: 128 + SIGTERM. Not 0, which would tell Volcano that the pod
succeeded instead of having the gang restarted."""


class DataError(Exception):
    """The CIFAR-10 data is missing or not in the expected format."""


def log(message: str) -> None:
    """Prints one log line, flushed at once so that ``kubectl logs`` and CloudWatch show it immediately."""
    print(f"{LOG_PREFIX} {message}", flush=True)


# --------------------------------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------------------------------


def resolve_batches_dir(data_dir: str) -> str:
    """The folder holding the batch files: ``<data_dir>/cifar-10-batches-py``, or ``data_dir`` itself.

    Raises :class:`DataError` when neither holds every training batch and the test batch.
    """
    nested = os.path.join(data_dir, BATCHES_FOLDER)
    candidate = nested if os.path.isdir(nested) else data_dir
    if not os.path.isdir(candidate):
        raise DataError(f"--data-dir {data_dir!r} is not a directory")
    missing = [name for name in (*TRAIN_FILES, TEST_FILE) if not os.path.isfile(os.path.join(candidate, name))]
    if missing:
        raise DataError(
            f"no CIFAR-10 data in {candidate!r}: missing {', '.join(missing)}. Expected the python version of "
            f"CIFAR-10 ({BATCHES_FOLDER}/ with {', '.join(TRAIN_FILES)} and {TEST_FILE}) in --data-dir or in "
            f"--data-dir/{BATCHES_FOLDER}; this script never downloads it"
        )
    return candidate


class BatchUnpickler(pickle.Unpickler):
    """An unpickler for CIFAR-10 batch files: of all classes and functions a pickle may name, only those that NumPy
    arrays need (``ndarray``, ``dtype``, ``_reconstruct`` under NumPy 1's and 2's module names, and ``_codecs.encode``,
    which pickles of protocol 2 use for bytes) are found; any other name (``os.system``, ``builtins.eval``...) fails
    with ``pickle.UnpicklingError`` before anything is called (Python's ``pickle`` documentation, "Restricting
    Globals")."""

    ALLOWED = frozenset(
        {
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("_codecs", "encode"),
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a CIFAR-10 batch file")
        return super().find_class(module, name)


def read_batch(path: str) -> tuple[np.ndarray, np.ndarray]:
    """Reads one pickled CIFAR-10 batch with :class:`BatchUnpickler`; returns images (uint8, N x 3 x 32 x 32) and
    labels (int64, N)."""
    try:
        with open(path, "rb") as f:
            batch = BatchUnpickler(f, encoding="bytes").load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError) as error:
        raise DataError(f"cannot read CIFAR-10 batch {path!r}: {error}") from error
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise DataError(f"{path!r} is not a CIFAR-10 batch: expected a dict with keys b'data' and b'labels'")
    data = np.asarray(batch[b"data"])
    labels = np.asarray(batch[b"labels"])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != IMAGE_BYTES:
        raise DataError(f"{path!r}: b'data' must be uint8 of shape N x {IMAGE_BYTES}, got {data.dtype} {data.shape}")
    if labels.ndim != 1 or labels.shape[0] != data.shape[0] or not np.issubdtype(labels.dtype, np.integer):
        raise DataError(f"{path!r}: b'labels' must hold {data.shape[0]} integers, got {labels.dtype} {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= NUM_CLASSES):
        raise DataError(f"{path!r}: labels must be in 0..{NUM_CLASSES - 1}, got {labels.min()}..{labels.max()}")
    return data.reshape(-1, *IMAGE_SHAPE), labels.astype(np.int64)


def load_split(batches_dir: str, names: Sequence[str]) -> TensorDataset:
    """The images (uint8) and labels of the batch files ``names`` in ``batches_dir``, as one dataset."""
    parts = [read_batch(os.path.join(batches_dir, name)) for name in names]
    images = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    if images.shape[0] == 0:
        raise DataError(f"{', '.join(names)} in {batches_dir!r} hold no images")
    return TensorDataset(torch.from_numpy(images), torch.from_numpy(labels))


def normalize(images: torch.Tensor) -> torch.Tensor:
    """uint8 images to float in [-1, 1]: ``(x / 255 - 0.5) / 0.5`` on every channel, as in the tutorial."""
    return images.float().div_(255.0).sub_(0.5).div_(0.5)


# --------------------------------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------------------------------


class Net(nn.Module):
    """The CNN of the PyTorch CIFAR-10 tutorial ("Training a classifier")."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (N x 10) of normalised images (N x 3 x 32 x 32)."""
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


# --------------------------------------------------------------------------------------------------------------------
# Process group and device
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Runtime:
    """Where this process runs: its device, its rank and the number of processes."""

    device: torch.device
    rank: int
    world_size: int
    local_rank: int
    distributed: bool

    @property
    def is_main(self) -> bool:
        """True on rank 0, the process that logs and writes files."""
        return self.rank == 0

    def all_sum(self, values: list[float]) -> list[float]:
        """Element-wise sum of ``values`` over all ranks (float64)."""
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        if self.distributed:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor.tolist()

    def gather(self, values: list[float]) -> list[list[float]]:
        """``values`` of every rank, in rank order: an :meth:`all_sum` in which each rank fills only its own slots,
        so every value arrives exactly (adding zeros changes nothing)."""
        size = len(values)
        slots = [0.0] * (size * self.world_size)
        slots[self.rank * size : (self.rank + 1) * size] = values
        summed = self.all_sum(slots)
        return [summed[rank * size : (rank + 1) * size] for rank in range(self.world_size)]

    def barrier(self) -> None:
        """Returns once every rank has called it."""
        if self.distributed:
            dist.barrier()


def _env_int(name: str, default: int) -> int:
    """The integer in environment variable ``name``, or ``default`` when it is unset."""
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise DataError(f"environment variable {name}={value!r} is not an integer") from None


def choose_backend(requested: str, cuda_available: bool) -> str:
    """The process-group backend: ``auto`` is ``nccl`` with CUDA, else ``gloo``; ``nccl`` requires CUDA."""
    if requested == "auto":
        return "nccl" if cuda_available else "gloo"
    if requested == "nccl" and not cuda_available:
        raise DataError("--backend nccl needs CUDA, and no CUDA device is available; use --backend gloo or auto")
    return requested


def init_runtime(backend: str) -> Runtime:
    """Sets up the device and, under torchrun (``WORLD_SIZE`` set), the process group from the torchrun environment."""
    cuda = torch.cuda.is_available()
    backend = choose_backend(backend, cuda)
    local_rank = _env_int("LOCAL_RANK", 0)
    if cuda:
        if local_rank >= torch.cuda.device_count():
            raise DataError(f"LOCAL_RANK={local_rank}, but only {torch.cuda.device_count()} CUDA devices are visible")
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if "WORLD_SIZE" not in os.environ:
        return Runtime(device, 0, 1, local_rank, distributed=False)
    if backend == "nccl":
        dist.init_process_group(backend, device_id=device)
    else:
        dist.init_process_group(backend)
    return Runtime(device, dist.get_rank(), dist.get_world_size(), local_rank, distributed=True)


# --------------------------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------------------------


def atomic_write(path: str, write: Any) -> None:
    """Calls ``write(file)`` on a temporary file in the folder of ``path``, fsyncs it, then renames it to ``path``.

    A reader (or a restarted job) sees the old file or the new one, never a partial file.
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def save_torch(path: str, payload: Any) -> None:
    """``torch.save`` of ``payload`` to ``path``, atomically."""
    atomic_write(path, lambda f: torch.save(payload, f))


def save_json(path: str, payload: Any) -> None:
    """``payload`` as indented JSON at ``path``, atomically."""
    atomic_write(path, lambda f: f.write((json.dumps(payload, indent=2, sort_keys=True) + "\n").encode()))


def load_checkpoint(path: str) -> dict[str, Any] | None:
    """The checkpoint at ``path`` loaded onto the CPU, or None when there is none."""
    if not os.path.isfile(path):
        return None
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    if checkpoint.get("format") == 1:  # written at an epoch's end by the version before stops: upgraded
        steps = sum(entry["steps"] for entry in checkpoint["history"])
        checkpoint.update(format=CHECKPOINT_FORMAT, batch=0, step=steps, loss_sums=None)
    if checkpoint.get("format") != CHECKPOINT_FORMAT:
        raise DataError(
            f"{path!r} is not a checkpoint of this script (format {checkpoint.get('format')!r}; this version reads "
            f"format {CHECKPOINT_FORMAT})"
        )
    return checkpoint


def check_run(checkpoint: dict[str, Any], path: str, run_id: str | None) -> None:
    """Raises :class:`DataError` when ``checkpoint`` (read from ``path``) belongs to another run than ``run_id``
    (a checkpoint without a run belongs to none; so does a run without ``--run-id``)."""
    recorded = checkpoint.get("run")
    if recorded != run_id:
        raise DataError(
            f"{path!r} belongs to run {recorded or '(none)'}, not to this run {run_id or '(none)'}: another run's "
            "model, optimizer state and epoch are not resumed; give this run its own --checkpoint-dir, or remove the "
            "file to start over"
        )


def resume_state(path: str, runtime: Runtime) -> dict[str, Any] | None:
    """The checkpoint at ``path`` as rank 0 reads it, on every rank (broadcast), or None when rank 0 has none.

    A checkpoint that rank 0 cannot load raises :class:`DataError` on every rank, instead of leaving the other ranks
    waiting in the broadcast.
    """
    payload: list[Any] = [None]
    if runtime.is_main:
        try:
            payload[0] = ("ok", load_checkpoint(path))
        except Exception as error:  # any failure must reach the other ranks, or they wait in the broadcast
            payload[0] = ("error", str(error) if isinstance(error, DataError) else f"cannot load {path!r}: {error}")
    if runtime.distributed:
        dist.broadcast_object_list(payload, src=0)
    status, value = payload[0]
    if status == "error":
        raise DataError(value)
    return value


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
    """True when the file ``$TRAINIUM_EKS_STOP_FILE`` names exists: the container's launch script creates it when
    Kubernetes sends the container SIGTERM (a node drained, e.g. by Karpenter at a Capacity Block's end), and the
    launcher and the workers get no signal (trainium_eks.manifests.jobs.graceful_stop). False when the variable is
    unset."""
    path = os.environ.get(STOP_FILE_ENV)
    return bool(path) and os.path.exists(path)


def gang_stop_requested(runtime: Runtime) -> bool:
    """True on every rank when :func:`stop_requested` is true on any rank; a collective, so every rank calls it at
    every step. One node may be ending while the others are not, and the checkpoint and the exit are the gang's."""
    return runtime.all_sum([1.0 if stop_requested() else 0.0])[0] > 0


# --------------------------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class Position:
    """Where the epoch in progress stands: ``batch`` of its batches done, ``step`` optimizer steps of the whole run,
    and this rank's loss sum and image count over the epoch's batches done."""

    batch: int = 0
    step: int = 0
    loss_sum: float = 0.0
    count: int = 0


def train_one_epoch(
    model: nn.Module,
    loader: DataLoader,
    optimizer: torch.optim.Optimizer,
    runtime: Runtime,
    max_steps: int | None,
    position: Position,
) -> bool:
    """The rest of one pass over this rank's share of the training set: its first ``position.batch`` batches, trained
    on before a stop, are read and dropped; each later one is a step that advances ``position``, is reported
    (:func:`report_progress`), and ends with the ranks agreeing whether to stop (:func:`gang_stop_requested`).
    Returns True when they stopped (``position`` is at that step), False at the epoch's end."""
    model.train()
    for images, labels in itertools.islice(loader, position.batch, None):
        if max_steps is not None and position.batch >= max_steps:
            break
        images = normalize(images.to(runtime.device, non_blocking=True))
        labels = labels.to(runtime.device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        position.loss_sum += loss.item() * labels.shape[0]
        position.count += labels.shape[0]
        position.batch += 1
        position.step += 1
        report_progress(position.step)
        if gang_stop_requested(runtime):
            return True
    return False


@torch.no_grad()
def evaluate(model: nn.Module, test_set: TensorDataset, runtime: Runtime, batch_size: int) -> float:
    """Accuracy on the test set; each rank scores every ``world_size``-th image and the counts are summed."""
    model.eval()
    images_all, labels_all = test_set.tensors
    indices = torch.arange(runtime.rank, labels_all.shape[0], runtime.world_size)
    correct = 0
    for start in range(0, indices.shape[0], batch_size):
        chunk = indices[start : start + batch_size]
        images = normalize(images_all[chunk].to(runtime.device))
        labels = labels_all[chunk].to(runtime.device)
        correct += int((model(images).argmax(dim=1) == labels).sum().item())
    total_correct, total = runtime.all_sum([float(correct), float(indices.shape[0])])
    return total_correct / total


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parses and checks the command line (bad values exit with status 2)."""
    parser = argparse.ArgumentParser(
        description="DDP training of the PyTorch CIFAR-10 tutorial CNN (CPU or CUDA).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--data-dir", required=True, help=f"folder holding {BATCHES_FOLDER}/, or that folder")
    parser.add_argument("--output-dir", required=True, help="metrics.json, model.pt (and checkpoints by default)")
    parser.add_argument("--checkpoint-dir", default=None, help="where checkpoint.pt is written and resumed from")
    parser.add_argument(
        "--run-id",
        default=os.environ.get(RUN_ID_ENV) or None,
        help=f"the run the checkpoint belongs to (default: ${RUN_ID_ENV}); another run's checkpoint is refused",
    )
    parser.add_argument("--epochs", type=int, default=3, help="epochs of the whole training (a resume continues)")
    parser.add_argument("--batch-size", type=int, default=64, help="images per step and per process")
    parser.add_argument("--lr", type=float, default=0.01, help="SGD learning rate")
    parser.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    parser.add_argument("--seed", type=int, default=1, help="seeds the model's initialisation and the data order")
    parser.add_argument("--max-steps-per-epoch", type=int, default=None, help="cut every epoch short (smoke tests)")
    parser.add_argument("--num-workers", type=int, default=0, help="DataLoader worker processes per rank")
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto", help="auto: nccl with CUDA")
    args = parser.parse_args(argv)

    problems = []
    for name in ("epochs", "batch_size"):
        if getattr(args, name) < 1:
            problems.append(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.max_steps_per_epoch is not None and args.max_steps_per_epoch < 1:
        problems.append(f"--max-steps-per-epoch must be >= 1, got {args.max_steps_per_epoch}")
    if args.num_workers < 0:
        problems.append(f"--num-workers must be >= 0, got {args.num_workers}")
    if not args.lr > 0:
        problems.append(f"--lr must be > 0, got {args.lr}")
    if not 0 <= args.momentum < 1:
        problems.append(f"--momentum must be in [0, 1), got {args.momentum}")
    if problems:
        parser.error("; ".join(problems))
    if args.checkpoint_dir is None:
        args.checkpoint_dir = args.output_dir
    return args


def train(
    args: argparse.Namespace, runtime: Runtime, train_set: TensorDataset, test_set: TensorDataset
) -> tuple[dict[str, Any], Net] | None:
    """Trains (or resumes) until ``--epochs``; returns the metrics that rank 0 writes and the trained model, or None
    when the ranks stopped on request, once rank 0 has written the checkpoint of that step."""
    torch.manual_seed(args.seed)
    if runtime.device.type == "cuda":
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    net = Net().to(runtime.device)
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum)

    checkpoint_path = os.path.join(args.checkpoint_dir, CHECKPOINT_NAME)
    checkpoint = resume_state(checkpoint_path, runtime)
    start_epoch, history, position = 0, [], Position()
    if checkpoint is not None:
        check_run(checkpoint, checkpoint_path, args.run_id)
        start_epoch, history = checkpoint["epoch"], list(checkpoint["history"])
        position = Position(batch=checkpoint["batch"], step=checkpoint["step"])
        if position.batch:
            if checkpoint["world_size"] != runtime.world_size:
                raise DataError(
                    f"{checkpoint_path!r} was written in the middle of epoch {start_epoch + 1} by "
                    f"{checkpoint['world_size']} processes, and this run has {runtime.world_size}: each process's "
                    f"share of the epoch and its loss sum depend on their number, so run it with "
                    f"{checkpoint['world_size']} processes, or remove the file to start over"
                )
            loss_sum, count = checkpoint["loss_sums"][runtime.rank]
            position.loss_sum, position.count = loss_sum, int(count)
        net.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        torch.set_rng_state(checkpoint["torch_rng_state"])
        if checkpoint["seed"] != args.seed and runtime.is_main:
            log(f"note: the checkpoint was written with --seed {checkpoint['seed']}; continuing with {args.seed}")
        if runtime.is_main and position.batch:
            log(
                f"resumed from step {position.step} (epoch {start_epoch + 1}, batch {position.batch} of the epoch): "
                f"{checkpoint_path}"
            )
        elif runtime.is_main:
            log(f"resumed from epoch {start_epoch} ({checkpoint_path})")
    model = DistributedDataParallel(net) if runtime.distributed else net

    sampler = DistributedSampler(
        train_set, num_replicas=runtime.world_size, rank=runtime.rank, shuffle=True, seed=args.seed
    )
    loader = DataLoader(
        train_set,
        batch_size=args.batch_size,
        sampler=sampler,
        num_workers=args.num_workers,
        pin_memory=runtime.device.type == "cuda",
    )
    if runtime.is_main:
        log(
            f"rank 0 of {runtime.world_size} on {runtime.device}; {len(train_set)} training and {len(test_set)} "
            f"test images; epochs {start_epoch + 1}..{args.epochs}"
        )
        if start_epoch >= args.epochs:
            log(f"nothing to do: the checkpoint is at epoch {start_epoch} and --epochs is {args.epochs}")

    def save_checkpoint(epochs_done: int, at: Position, rng_state: torch.Tensor, loss_sums: list[list[float]]) -> None:
        """Rank 0's checkpoint: ``epochs_done`` epochs, then ``at`` in the next one (``loss_sums``: each rank's loss
        sum and image count over its batches there, none at an epoch's end), and ``rng_state``, the torch RNG state at
        that epoch's start (its DataLoader draws a seed from it as it starts)."""
        payload = {
            "format": CHECKPOINT_FORMAT,
            "epoch": epochs_done,
            "batch": at.batch,
            "step": at.step,
            "loss_sums": loss_sums,
            "model": net.state_dict(),
            "optimizer": optimizer.state_dict(),
            "seed": args.seed,
            "run": args.run_id,
            "torch_rng_state": rng_state,
            "history": history,
            "world_size": runtime.world_size,
        }
        save_torch(checkpoint_path, payload)

    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)
        epoch_rng_state = torch.get_rng_state()
        started = time.monotonic()
        if train_one_epoch(model, loader, optimizer, runtime, args.max_steps_per_epoch, position):
            loss_sums = runtime.gather([position.loss_sum, float(position.count)])
            if runtime.is_main:
                save_checkpoint(epoch, position, epoch_rng_state, loss_sums)
                log(
                    f"stopping at step {position.step} (epoch {epoch + 1}, batch {position.batch} of the epoch): "
                    f"a stop was requested (${STOP_FILE_ENV})"
                )
            runtime.barrier()  # torchrun stops the other workers once one exits non-zero: not before the save
            return None
        total_loss, total_count = runtime.all_sum([position.loss_sum, float(position.count)])
        train_loss, steps = total_loss / max(total_count, 1.0), position.batch
        accuracy = evaluate(net, test_set, runtime, args.batch_size)
        seconds = time.monotonic() - started
        history.append({"epoch": epoch + 1, "train_loss": train_loss, "test_accuracy": accuracy, "steps": steps})
        position = Position(step=position.step)
        if runtime.is_main:
            print(
                f"epoch={epoch + 1} train_loss={train_loss:.4f} test_accuracy={accuracy:.4f} "
                f"steps={steps} seconds={seconds:.1f}",
                flush=True,
            )
            save_checkpoint(epoch + 1, position, torch.get_rng_state(), [])

    last = history[-1] if history else {}
    return {
        "epochs": len(history),
        "train_loss": last.get("train_loss"),
        "test_accuracy": last.get("test_accuracy"),
        "world_size": runtime.world_size,
        "batch_size_per_process": args.batch_size,
        "lr": args.lr,
        "momentum": args.momentum,
        "seed": args.seed,
        "run": args.run_id,
        "history": history,
    }, net


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: checks the arguments and the data, sets up the process group, trains, writes the outputs."""
    args = parse_args(argv)
    try:
        batches_dir = resolve_batches_dir(args.data_dir)
        train_set = load_split(batches_dir, TRAIN_FILES)
        test_set = load_split(batches_dir, (TEST_FILE,))
        runtime = init_runtime(args.backend)
    except DataError as error:
        print(f"train_cifar10.py: error: {error}", file=sys.stderr, flush=True)
        return 2
    try:
        trained = train(args, runtime, train_set, test_set)
        if trained is None:
            return STOPPED_EXIT
        metrics, net = trained
        if runtime.is_main:
            cpu_state = {name: tensor.detach().cpu() for name, tensor in net.state_dict().items()}
            save_torch(os.path.join(args.output_dir, MODEL_NAME), cpu_state)  # loadable without a GPU
            save_json(os.path.join(args.output_dir, METRICS_NAME), metrics)
            print(json.dumps(metrics, sort_keys=True), flush=True)
    except DataError as error:
        print(f"train_cifar10.py: error: {error}", file=sys.stderr, flush=True)
        return 2
    finally:
        if runtime.distributed:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    exit_code = main()
    # Leave without interpreter finalization. Gloo's worker threads outlive destroy_process_group, and one of them may
    # still be releasing a collective that DDP launched during backward; its captured thread-local state holds a Python
    # object (autograd stashes the contextvars context there), and releasing that while the interpreter finalizes
    # aborts the process ("terminate called without an active exception": 2 runs in 80 of a two-worker CPU smoke run
    # with torch 2.13 before this exit, none in 100 after).
    # Every output is already written, fsynced and renamed; only the standard streams need flushing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
