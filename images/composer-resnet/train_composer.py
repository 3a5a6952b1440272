"""Train a CIFAR-10 ResNet with MosaicML Composer, applying a recipe of Composer speed-up algorithms.

One process per device. On one machine::

    python train_composer.py --data-dir /data/cifar10 --output-dir /data/output/resnet56-mild \\
        --recipe '[{"name": "BlurPool", "kwargs": {}}, {"name": "LabelSmoothing", "kwargs": {"smoothing": 0.08}}]'

On several nodes, under Composer's launcher (one process per GPU, or ``-n`` processes on CPU nodes)::

    composer -n 8 --world_size 16 --node_rank "$NODE_RANK" --master_addr "$MASTER_ADDR" --master_port 29500 \\
        train_composer.py --data-dir ... --output-dir ...

The recipe (``--recipe`` or ``--recipe-file``) is a JSON list of ``{"name": <class in composer.algorithms>,
"kwargs": {...}}``, as ``trainium_eks.workloads.composer_recipe.ComposerRecipe.to_json()`` writes it; ``[]`` (the
default) is the baseline. The device is the GPU when CUDA is available, else the CPU. The data is CIFAR-10's python
version under ``--data-dir`` (see ``resnet_cifar.py``); it is never downloaded. Checkpoints go to
``<output-dir>/checkpoints`` at the end of every epoch (and at a stop, below), and the run resumes from the latest one
when started again with the same ``--output-dir`` and ``--run-name`` (Composer's autoresume), at the batch that
checkpoint ends; ``--load-path`` starts a new run from a checkpoint. Rank 0 prints one JSON line at the end
(wall-clock time, epochs, final test accuracy, the algorithms applied and what they changed) and writes it to
``<output-dir>/run-summary.json``. The accuracy after every epoch and the fit time travel in the checkpoints, so the
summary of a resumed run covers its earlier attempts too.

Once the file ``$TRAINIUM_EKS_STOP_FILE`` names exists for any rank (the container was told to stop:
trainium_eks.manifests.jobs.graceful_stop), the ranks stop together at the end of the batch in progress, write a
checkpoint of that batch and exit with status 143 (:data:`STOPPED_EXIT`), without evaluating or writing a summary;
started again, the run resumes from that batch.

Only this module's argument and recipe parsing and :func:`stop_requested` are importable without Composer (the
library's tests use them); Composer, PyTorch and the model are imported when training starts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

SUMMARY_FILE = "run-summary.json"
PROGRESS_FILE_ENV = "TRAINIUM_EKS_PROGRESS_FILE"
"""Where a training step is reported, when set (:func:`report_progress`)."""
STOP_FILE_ENV = "TRAINIUM_EKS_STOP_FILE"
"""The file whose existence asks the run to stop, when set (:func:`stop_requested`)."""
STOPPED_EXIT = 143
"""The exit status of a run stopped on request: 128 + SIGTERM. Not 0, which would count as a finished run: the failed
pod makes Volcano restart the gang, which resumes from the stop's checkpoint."""
# Composer's settings for ResNet-56 on CIFAR-10 (composer/yamls/models/resnet56_cifar10.yaml, Composer <= 0.11):
# global batch 1024, decoupled SGDW with lr 1.2 and momentum 0.9, 160 epochs, 5 of warm-up, the learning rate divided
# by 10 at half and three quarters of the run. Weight decay 5e-4 as in the Mosaic ResNet recipes: that file's 2e-3
# makes Composer 0.32.1 warn that it is too high for decoupled weight decay.
DEFAULTS = {"epochs": 160, "batch_size": 1024, "lr": 1.2, "momentum": 0.9, "weight_decay": 5.0e-4, "warmup": "5ep"}


def parse_recipe(text: str) -> List[Dict[str, Any]]:
    """The algorithms of a recipe: a JSON list of ``{"name": str, "kwargs": object}`` (``kwargs`` may be left out).

    :returns: ``[{"name": ..., "kwargs": {...}}, ...]`` in recipe order, ``kwargs`` always present.
    :raises ValueError: when ``text`` is not such a list, or names an algorithm twice.
    """
    try:
        items = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"the recipe is not JSON: {err}") from err
    if not isinstance(items, list):
        raise ValueError('the recipe must be a JSON list of {"name": ..., "kwargs": {...}}')
    recipe = []
    for index, item in enumerate(items):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and set(item) <= {"name", "kwargs"}
            and isinstance(item.get("kwargs", {}), dict)
        ):
            raise ValueError(f'recipe[{index}] must be {{"name": <string>, "kwargs": <object>}}, not {item!r}')
        recipe.append({"name": item["name"], "kwargs": dict(item.get("kwargs", {}))})
    names = [item["name"] for item in recipe]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"each algorithm at most once; repeated: {', '.join(repeated)}")
    return recipe


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data-dir", type=Path, required=True, help="holds cifar-10-batches-py/, or is that folder (never downloaded)"
    )
    parser.add_argument("--output-dir", type=Path, required=True, help="checkpoints/ and run-summary.json go here")
    recipe = parser.add_mutually_exclusive_group()
    recipe.add_argument("--recipe", default="[]", help="the recipe as JSON (default: [], the baseline)")
    recipe.add_argument("--recipe-file", type=Path, help="a file holding the recipe's JSON")
    parser.add_argument("--arch", choices=("resnet20", "resnet56"), default="resnet56", help="default: resnet56")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--epochs", type=int, default=DEFAULTS["epochs"], help="default: %(default)s")
    length.add_argument(
        "--max-duration", help="training length as a Composer time string, e.g. 160ep or 8000ba (instead of --epochs)"
    )
    parser.add_argument(
        "--scale-schedule-ratio",
        type=float,
        default=1.0,
        help="train this share of the schedule (Composer's scale_schedule_ratio: the duration and the learning-rate "
        "milestones; MosaicML's mild recipe uses 0.4); default %(default)s",
    )
    parser.add_argument("--batch-size", type=int, default=DEFAULTS["batch_size"], help="global; default %(default)s")
    parser.add_argument("--eval-batch-size", type=int, default=1024, help="global; default %(default)s")
    parser.add_argument("--lr", type=float, default=DEFAULTS["lr"], help="peak learning rate; default %(default)s")
    parser.add_argument("--momentum", type=float, default=DEFAULTS["momentum"], help="default %(default)s")
    parser.add_argument(
        "--weight-decay", type=float, default=DEFAULTS["weight_decay"], help="decoupled; default %(default)s"
    )
    parser.add_argument(
        "--warmup", default=DEFAULTS["warmup"], help="warm-up as a Composer time string; default %(default)s"
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="data-loader workers per process (CPU cores per GPU); default 2"
    )
    parser.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto", help="default: gpu if CUDA")
    parser.add_argument("--precision", help="Composer precision (fp32, amp_fp16, amp_bf16); default: Composer's")
    parser.add_argument("--run-name", default="composer-resnet", help="autoresume key; default %(default)s")
    parser.add_argument("--load-path", help="checkpoint to start from when there is none to resume in --output-dir")
    parser.add_argument("--keep-checkpoints", type=int, default=2, help="newest checkpoints kept; -1 keeps all")
    parser.add_argument("--max-train-batches", type=int, help="batches per epoch (smoke tests); default: all")
    parser.add_argument("--max-eval-batches", type=int, help="test batches per evaluation; default: all")
    parser.add_argument("--seed", type=int, default=17, help="default %(default)s")
    return parser


def cifar_files(data_dir: Path) -> Dict[str, List[Path]]:
    """The CIFAR-10 batch files (python version) in ``data_dir/cifar-10-batches-py``, or in ``data_dir`` itself when
    it has no such folder (the library's staging job unpacks the archive's one folder as ``data_dir``):
    ``{"train": [...], "test": [...]}``."""
    nested = data_dir / "cifar-10-batches-py"
    folder = nested if nested.is_dir() else data_dir
    return {"train": [folder / f"data_batch_{i}" for i in range(1, 6)], "test": [folder / "test_batch"]}


def read_recipe(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """The recipe given by ``--recipe`` or ``--recipe-file``."""
    text = args.recipe_file.read_text() if args.recipe_file is not None else args.recipe
    return parse_recipe(text)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Train, then print and write the run summary (rank 0). Returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        recipe = read_recipe(args)
    except (OSError, ValueError) as err:
        parser.error(str(err))
    if args.batch_size <= 0 or args.eval_batch_size <= 0:
        parser.error("--batch-size and --eval-batch-size must be positive")
    if not 0 < args.scale_schedule_ratio <= 10:
        parser.error("--scale-schedule-ratio must be in (0, 10]")
    missing = [str(p) for paths in cifar_files(args.data_dir).values() for p in paths if not p.is_file()]
    if missing:
        parser.error(
            "CIFAR-10 (python version) not found, and this script never downloads it: extract cifar-10-python.tar.gz "
            f"into --data-dir on the shared volume. Missing: {', '.join(missing)}"
        )
    started = time.monotonic()
    summary = train(args, recipe)
    if summary is None:
        return STOPPED_EXIT
    summary["wall_clock_s"] = round(time.monotonic() - started, 3)
    if summary.pop("rank") == 0:
        args.output_dir.mkdir(parents=True, exist_ok=True)
        line = json.dumps(summary, sort_keys=True)
        (args.output_dir / SUMMARY_FILE).write_text(line + "\n")
        print(line, flush=True)
    return 0


def train(args: argparse.Namespace, recipe: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Build the data, model, algorithms and Composer trainer, train and evaluate; the summary of the run, or None
    when a stop was requested (:func:`stop_requested`) and the run stopped with a checkpoint, unevaluated."""
    import resnet_cifar
    import torch
    from composer import Trainer
    from composer.models import ComposerClassifier
    from composer.optim import DecoupledSGDW, MultiStepWithWarmupScheduler
    from composer.utils import dist

    device = args.device if args.device != "auto" else ("gpu" if torch.cuda.is_available() else "cpu")
    world_size = dist.get_world_size()
    per_rank = {}
    for flag, size in (("--batch-size", args.batch_size), ("--eval-batch-size", args.eval_batch_size)):
        if size % world_size:
            raise SystemExit(f"{flag} {size} is not a multiple of the world size {world_size}")
        per_rank[flag] = size // world_size

    files = cifar_files(args.data_dir)
    train_set = resnet_cifar.cifar10(files["train"], train=True)
    test_set = resnet_cifar.cifar10(files["test"], train=False)
    loader = dict(num_workers=args.workers, pin_memory=device == "gpu", persistent_workers=args.workers > 0)
    train_loader = torch.utils.data.DataLoader(
        train_set,
        batch_size=per_rank["--batch-size"],
        sampler=dist.get_sampler(train_set, shuffle=True, drop_last=True),
        drop_last=True,
        **loader,
    )
    test_loader = torch.utils.data.DataLoader(
        test_set,
        batch_size=per_rank["--eval-batch-size"],
        sampler=dist.get_sampler(test_set, shuffle=False),
        **loader,
    )

    model = ComposerClassifier(resnet_cifar.build_resnet(args.arch), num_classes=resnet_cifar.NUM_CLASSES)
    modules_before = _module_counts(model)
    algorithms = instantiate_algorithms(recipe)
    calls: Counter = Counter()
    for algorithm in algorithms:
        _count_calls(algorithm, calls)
    evidence = _batch_evidence()
    history = _accuracy_history()
    stop = _graceful_stop()

    optimizer = DecoupledSGDW(model.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    max_duration = args.max_duration or f"{args.epochs}ep"
    trainer = Trainer(
        model=model,
        train_dataloader=train_loader,
        eval_dataloader=test_loader,
        eval_interval=stop.eval_interval,
        max_duration=max_duration,
        algorithms=algorithms,
        optimizers=optimizer,
        schedulers=MultiStepWithWarmupScheduler(t_warmup=args.warmup, milestones=["0.5dur", "0.75dur"], gamma=0.1),
        step_schedulers_every_batch=True,
        scale_schedule_ratio=args.scale_schedule_ratio,
        callbacks=[evidence, history, _progress_reporter(), stop],
        device=device,
        precision=args.precision,
        train_subset_num_batches=args.max_train_batches or -1,
        eval_subset_num_batches=args.max_eval_batches or -1,
        run_name=args.run_name,
        save_folder=str(args.output_dir / "checkpoints"),
        save_interval=stop.save_interval,
        save_num_checkpoints_to_keep=args.keep_checkpoints,
        autoresume=True,
        load_path=args.load_path,
        progress_bar=False,
        log_to_console=True,
        console_log_interval="1ep",
        seed=args.seed,
    )
    modules_after = _module_counts(model)
    model_changes = {
        name: modules_after[name] - modules_before[name]
        for name in sorted(set(modules_before) | set(modules_after))
        if modules_after[name] != modules_before[name]
    }
    start = trainer.state.timestamp
    fit_started = time.monotonic()
    if start.get(trainer.state.max_duration.unit) < trainer.state.max_duration:
        trainer.fit()
    fit_s = time.monotonic() - fit_started
    if stop.stopped:
        trainer.close()  # ends with a barrier: no rank exits before rank 0 has written the checkpoint
        return None
    if "MulticlassAccuracy" not in trainer.state.eval_metric_values:
        trainer.eval()  # resumed from the last checkpoint of a finished run: nothing to train, evaluate it
    end = trainer.state.timestamp
    stem = model.module.stem[0]
    summary = {
        "rank": dist.get_global_rank(),
        "run_name": args.run_name,
        "arch": args.arch,
        "device": device,
        "world_size": world_size,
        "precision": trainer.state.precision.value,
        "max_duration": max_duration,
        "scale_schedule_ratio": args.scale_schedule_ratio,
        "trained_duration": str(trainer.state.max_duration),
        "batch_size": args.batch_size,
        "lr": args.lr,
        "recipe": recipe,
        "algorithms": [type(a).__name__ for a in trainer.state.algorithms],
        "algorithm_calls": dict(sorted(calls.items())),
        "model_changes": model_changes,
        "channels_last": bool(
            stem.weight.is_contiguous(memory_format=torch.channels_last) and not stem.weight.is_contiguous()
        ),
        "soft_target_batches": evidence.soft_target_batches,
        "input_sizes": sorted(evidence.input_sizes),
        "start_epoch": int(start.epoch),
        "epochs": int(end.epoch),
        "batches": int(end.batch),
        "final_accuracy": float(trainer.state.eval_metric_values["MulticlassAccuracy"]),
        "accuracy_by_epoch": history.points,
        "fit_s": round(fit_s, 3),
        "attempts": history.earlier_attempts + 1,
        "total_fit_s": round(history.earlier_fit_s + fit_s, 3),
    }
    trainer.close()
    return summary


def instantiate_algorithms(recipe: List[Dict[str, Any]]) -> list:
    """The ``composer.algorithms`` objects of a parsed recipe.

    :raises SystemExit: naming the algorithm when a name is not an algorithm class of ``composer.algorithms`` or
        its constructor refuses the keyword arguments.
    """
    import composer.algorithms
    from composer.core import Algorithm

    algorithms = []
    for item in recipe:
        cls = getattr(composer.algorithms, item["name"], None)
        if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
            known = sorted(
                n for n in composer.algorithms.__all__ if issubclass(getattr(composer.algorithms, n), Algorithm)
            )
            raise SystemExit(f"{item['name']!r} is not a Composer algorithm; known: {', '.join(known)}")
        try:
            algorithms.append(cls(**item["kwargs"]))
        except (TypeError, ValueError, KeyError) as err:
            raise SystemExit(f"{item['name']}({item['kwargs']}): {err}") from err
    return algorithms


def _module_counts(model: Any) -> Counter:
    """Module class name -> how many the model holds (model surgery changes these)."""
    return Counter(type(m).__name__ for m in model.modules())


def _count_calls(algorithm: Any, calls: Counter) -> None:
    """Count in ``calls`` each time Composer's engine applies ``algorithm`` (it calls ``algorithm.apply``)."""
    apply = algorithm.apply
    name = type(algorithm).__name__

    def counted(event: Any, state: Any, logger: Any) -> Any:
        calls[name] += 1
        return apply(event, state, logger)

    algorithm.apply = counted


def _accuracy_history() -> Any:
    """A Composer callback recording, after each evaluation during a fit, the epoch, the fit seconds of the whole run
    until then and the test accuracy: ``points`` is ``[[epoch, seconds, accuracy], ...]`` (time to an accuracy, as
    MosaicML compares recipes), from the first attempt of the run on."""
    from composer.core import Callback, State
    from composer.loggers import Logger

    class AccuracyHistory(Callback):
        """The accuracy history and the fit clock of a run, carried across restarts in Composer's checkpoints.

        Composer 0.32.1 saves the callbacks' state in every checkpoint and restores it on resume (autoresume or
        ``--load-path``): ``State.state_dict`` in ``composer/core/state.py`` stores ``{type(callback).__qualname__:
        callback.state_dict()}`` under ``"callbacks"``, and ``State.load_state_dict`` there hands each callback whose
        ``__qualname__`` it finds its entry through ``callback.load_state_dict``, while the trainer is built, before
        ``fit_start``. The default of ``Serializable.state_dict`` (``composer/core/serializable.py``), which
        ``Callback`` inherits, is ``{}``: without the two methods below a resumed run would know only its own epochs.

        ``earlier_fit_s`` and ``earlier_attempts`` are the fit seconds and the attempts of the run up to the checkpoint
        this attempt resumed from (0 for a fresh run). Training an attempt did after its last checkpoint, which the next
        attempt does again, is in no checkpoint and so not counted.
        """

        def __init__(self) -> None:
            self.points: List[List[float]] = []
            self.earlier_fit_s = 0.0
            self.earlier_attempts = 0
            self.started: Optional[float] = None

        def fit_seconds(self) -> float:
            """The fit seconds of the run until now: the earlier attempts' and this attempt's since its fit started."""
            return self.earlier_fit_s + (0.0 if self.started is None else time.monotonic() - self.started)

        def fit_start(self, state: State, logger: Logger) -> None:
            self.started = time.monotonic()

        def eval_end(self, state: State, logger: Logger) -> None:
            accuracy = state.eval_metric_values.get("MulticlassAccuracy")
            # An evaluation outside a fit (a resumed run already at its length) repeats the checkpoint's last point.
            if accuracy is not None and self.started is not None:
                elapsed = round(self.fit_seconds(), 3)
                self.points.append([int(state.timestamp.epoch), elapsed, round(float(accuracy), 5)])

        def state_dict(self) -> Dict[str, Any]:
            """What a checkpoint keeps: the points so far, the run's fit seconds until the checkpoint and the attempts
            (this one included); plain numbers and lists, which ``torch.load`` reads without unpickling classes."""
            points = [list(point) for point in self.points]
            return {"points": points, "fit_s": self.fit_seconds(), "attempts": self.earlier_attempts + 1}

        def load_state_dict(self, state: Dict[str, Any]) -> None:
            """Resume the history and the clock of the checkpoint's run; a checkpoint of this script from before the
            history was carried holds ``{}`` here, and the run then counts from this attempt."""
            self.points = [list(point) for point in state.get("points", [])]
            self.earlier_fit_s = float(state.get("fit_s", 0.0))
            self.earlier_attempts = int(state.get("attempts", 0))

    return AccuracyHistory()


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
    """Whether this container was asked to stop: the file ``$TRAINIUM_EKS_STOP_FILE`` names exists. The container's
    launch script creates it when the container is told to stop, e.g. when its node is drained at a Capacity Block's
    end; every rank reads it (trainium_eks.manifests.jobs.graceful_stop). False when the variable is unset."""
    path = os.environ.get(STOP_FILE_ENV)
    return bool(path) and os.path.exists(path)


def _graceful_stop() -> Any:
    """A Composer callback that stops the run at the end of the batch in progress once any rank is asked to
    (:func:`stop_requested`), with a checkpoint of that batch; its ``save_interval`` and ``eval_interval`` are the
    trainer's."""
    import torch
    from composer.core import Callback, Event, State
    from composer.loggers import Logger
    from composer.utils import create_interval_scheduler, dist

    class GracefulStop(Callback):
        """The ranks agree at every batch end whether any of them was asked to stop; if so, the batch's checkpoint is
        saved and the fit ends.

        In Composer 0.32.1 (``Trainer._train_loop`` in ``composer/trainer/trainer.py``) a batch ends with
        ``BATCH_END``, the evaluators, then ``BATCH_CHECKPOINT``, where the trainer's ``CheckpointSaver`` (and EMA,
        before any callback runs) asks ``save_interval`` whether to save; the saver writes the checkpoint and the
        ``latest-rank0.pt`` link autoresume loads, as at an epoch's end. So the flag is agreed at ``BATCH_END``, by a
        collective every rank runs every batch: the save is collective too, and a stop may reach one node only.
        ``state.stop_training()`` then makes this batch the last of the fit. On resume Composer skips the epoch's
        batches up to the checkpoint's (``spin_dataloaders``) and goes on from there.
        """

        def __init__(self) -> None:
            self.stopped = False
            self.every_epoch = create_interval_scheduler("1ep")
            self.every_epoch_and_fit_end = create_interval_scheduler(
                "1ep", checkpoint_events=False, final_events={Event.FIT_END}
            )

        def batch_end(self, state: State, logger: Logger) -> None:
            asked = state.device.tensor_to_device(torch.tensor([int(stop_requested())]))
            if dist.get_world_size() > 1:
                dist.all_reduce(asked, reduce_operation="MAX")
            if not asked.item():
                return
            self.stopped = True
            if dist.get_global_rank() == 0:
                batch = int(state.timestamp.batch)
                print(f"stopping at batch {batch}: a stop was requested (${STOP_FILE_ENV})", flush=True)
            state.stop_training()

        def save_interval(self, state: State, event: Event) -> bool:
            """At the end of every epoch and of the fit, as Composer's ``"1ep"`` (asked first, at every event, as the
            saver asks it), and at the batch of a stop."""
            every_epoch = self.every_epoch(state, event)
            return every_epoch or (self.stopped and event == Event.BATCH_CHECKPOINT)

        def eval_interval(self, state: State, event: Event) -> bool:
            """At the end of every epoch and of the fit, as Composer's ``1``, but never after a stop: the stop's batch
            is the fit's end, which Composer would evaluate, and no checkpoint would keep the result. A stop at an
            epoch's last batch leaves that epoch's end, its evaluation included, to the resumed run."""
            return not self.stopped and self.every_epoch_and_fit_end(state, event)

    return GracefulStop()


def _progress_reporter() -> Any:
    """A Composer callback that reports each finished training batch (:func:`report_progress`), counted as Composer
    counts them (``state.timestamp.batch``: every batch of the run, resumed ones included)."""
    from composer.core import Callback, State
    from composer.loggers import Logger

    class ProgressReporter(Callback):
        def batch_end(self, state: State, logger: Logger) -> None:
            report_progress(int(state.timestamp.batch.value))

    return ProgressReporter()


def _batch_evidence() -> Any:
    """A Composer callback recording what the algorithms did to the batches: soft targets and input sizes."""
    import torch
    from composer.core import Callback, State
    from composer.loggers import Logger

    class BatchEvidence(Callback):
        """Sees each training batch after the algorithms of the same event ran."""

        def __init__(self) -> None:
            self.soft_target_batches = 0
            self.input_sizes: set = set()

        def before_forward(self, state: State, logger: Logger) -> None:
            self.input_sizes.add(int(state.batch_get_item(0).shape[-1]))

        def before_loss(self, state: State, logger: Logger) -> None:
            target = state.batch_get_item(1)
            self.soft_target_batches += int(torch.is_floating_point(target) and target.ndim == 2)

    return BatchEvidence()


if __name__ == "__main__":
    sys.exit(main())
