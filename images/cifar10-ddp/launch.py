"""Start ``train_cifar10.py`` under torchrun from the SageMaker or the Kubernetes contract: one image, both runtimes.

The launcher reads the contract of the runtime it is started in, builds one ``torchrun`` command
(``python -m torch.distributed.run``, with the interpreter running this file) and replaces itself with it
(``os.execvp``). The training script knows neither contract: it only sees torchrun's ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` and its own command line. Standard library only.

SageMaker (custom training container, started as ``<image> train``), under ``--sagemaker-root`` (default ``/opt/ml``):

* ``input/config/resourceconfig.json``: ``current_host``, ``hosts``, ``network_interface_name``. The node rank is the
  index of ``current_host`` in ``hosts`` *as listed*, and the master is ``hosts[0]``: this relies on SageMaker writing
  the same list, in the same order, on every host (``algo-1``, ``algo-2``, ...). The list is not sorted (``algo-10``
  would sort before ``algo-2``). Several hosts: static rendezvous at ``hosts[0]:29500``; one host: ``--standalone``
  (localhost, a free port). ``GLOO_SOCKET_IFNAME`` and ``NCCL_SOCKET_IFNAME`` are set to ``network_interface_name``
  unless the job's environment already sets them.
* ``input/config/hyperparameters.json`` (every value a JSON string): each key becomes ``--key value`` for the script,
  with ``_`` in keys turned into ``-`` (``batch_size`` -> ``--batch-size``). A value that is itself JSON-encoded (as
  the SageMaker Python SDK's framework estimators write strings, ``"\\"gloo\\""``) is decoded first. Launcher-only
  keys are not passed on: ``nproc_per_node`` or ``nproc-per-node`` (processes per host; default: the number of NVIDIA
  GPUs in ``/dev``, else 1) and every ``sagemaker_*`` key. A missing file means no hyperparameters.
* ``input/data/<channel>`` (``--channel``, default ``training``): the script's ``--data-dir``.
* ``model``: the script's ``--output-dir`` (model.pt and metrics.json, uploaded by SageMaker at the end), and
  ``checkpoints``: its ``--checkpoint-dir`` (synced with S3 when the job has a checkpoint configuration, so a
  restarted or spot-interrupted job resumes from the last epoch). Hyperparameters may not set these three flags.
  Arguments after ``--``, if any, are appended after the hyperparameters.

Kubernetes (arguments after ``--`` are the script's, e.g. ``launch.py -- --data-dir /data/cifar10 --epochs 3``):

* Kubeflow Trainer v2 ``TrainJob``: ``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR``,
  ``PET_MASTER_PORT``.
* Kubeflow Training Operator v1 ``PyTorchJob``: ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK`` (the node rank),
  ``WORLD_SIZE``, ``PET_NODE_RANK``, ``PET_NNODES`` and, when ``nprocPerNode`` is set, ``PET_NPROC_PER_NODE``.

* ``TRAINING_HYPERPARAMETERS`` (optional, set by the hybrid workflow): a JSON object of string values, mapped to
  script arguments exactly as SageMaker's ``hyperparameters.json`` (after the arguments of ``--``, so they win), so
  one run request gives the same arguments on both runtimes.

``PET_*`` is read first and the plain name is the fallback (``RANK`` for the node rank); when both are set they must
agree. ``WORLD_SIZE`` is not used: torchrun sets the workers' own. Without ``PET_NPROC_PER_NODE`` the processes per
node are the NVIDIA GPUs in ``/dev``, else 1; without a port, 29500. Elastic ranges (``PET_NNODES=1:4``) are rejected.

``--runtime auto`` picks SageMaker when the first argument is ``train`` or ``resourceconfig.json`` exists, Kubernetes
when ``PET_NNODES`` or ``MASTER_ADDR`` is set, and otherwise a local run: one node, one process, ``--standalone``, the
script's arguments from after ``--``. ``--dry-run`` prints the command and the environment it adds, as JSON, instead of
running it. Every missing, malformed or inconsistent input exits with status 2 and one line naming the file or
variable and its value.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SCRIPT = os.path.join(SCRIPT_DIR, "train_cifar10.py")
DEFAULT_SAGEMAKER_ROOT = "/opt/ml"
DEFAULT_CHANNEL = "training"
SAGEMAKER_MASTER_PORT = 29500
DEFAULT_MASTER_PORT = 29500
HYPERPARAMETERS_ENV = "TRAINING_HYPERPARAMETERS"
LAUNCHER_ONLY_HYPERPARAMETERS = frozenset({"nproc_per_node"})
SCRIPT_FLAGS_SET_BY_LAUNCHER = frozenset({"data-dir", "output-dir", "checkpoint-dir"})
SOCKET_IFNAME_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
GPU_DEVICE = re.compile(r"^nvidia\d+$")


class ContractError(Exception):
    """The runtime's contract (files or environment variables) is missing, malformed or inconsistent."""


@dataclass
class Launch:
    """What the launcher runs: the runtime it detected, the command and the variables it adds to the environment."""

    runtime: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> str:
        """The launch as one JSON line (``--dry-run``)."""
        return json.dumps({"runtime": self.runtime, "command": self.command, "env": self.env}, sort_keys=True)


# --------------------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------------------


def count_gpus(dev_dir: str = "/dev") -> int:
    """The NVIDIA GPUs visible in the container: the ``nvidia<N>`` device files in ``dev_dir``.

    The NVIDIA container runtime mounts one such file per GPU given to the container (``nvidiactl`` and
    ``nvidia-uvm`` do not count). No CUDA library is loaded, so the launcher stays standard-library only.
    """
    try:
        names = os.listdir(dev_dir)
    except OSError:
        return 0
    return sum(1 for name in names if GPU_DEVICE.match(name))


def parse_int(value: Any, source: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an int within bounds, or :class:`ContractError` naming ``source`` (a file key or a variable)."""
    text = str(value).strip()
    if not re.fullmatch(r"[+-]?\d+", text):
        raise ContractError(f"{source} must be an integer, got {value!r}")
    number = int(text)
    if minimum is not None and number < minimum:
        raise ContractError(f"{source} must be >= {minimum}, got {value!r}")
    if maximum is not None and number > maximum:
        raise ContractError(f"{source} must be <= {maximum}, got {value!r}")
    return number


def read_json(path: str, *, required: bool) -> Any:
    """The JSON document at ``path``; None when it is absent and not ``required``."""
    if not os.path.isfile(path):
        if required:
            raise ContractError(f"{path} does not exist")
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as error:
        raise ContractError(f"{path} is not readable JSON: {error}") from None


def torchrun(
    *,
    nnodes: int,
    nproc_per_node: int,
    node_rank: int,
    master: tuple[str, int] | None,
    script: str,
    script_args: Sequence[str],
) -> list[str]:
    """The torchrun command; ``master`` None means ``--standalone`` (one node, local rendezvous on a free port)."""
    command = [sys.executable, "-m", "torch.distributed.run"]
    if master is None:
        command.append("--standalone")
    command += ["--nnodes", str(nnodes), "--node_rank", str(node_rank), "--nproc_per_node", str(nproc_per_node)]
    if master is not None:
        command += ["--master_addr", master[0], "--master_port", str(master[1])]
    return [*command, script, *script_args]


# --------------------------------------------------------------------------------------------------------------------
# SageMaker
# --------------------------------------------------------------------------------------------------------------------


def hyperparameter_value(raw: str) -> str:
    """A hyperparameter's command-line value: a JSON-encoded string or scalar is decoded, anything else kept as is."""
    try:
        decoded = json.loads(raw)
    except ValueError:
        return raw
    if isinstance(decoded, str):
        return decoded
    if isinstance(decoded, bool):
        return str(decoded).lower()
    if isinstance(decoded, (int, float)):
        return raw.strip()
    return raw


def hyperparameter_args(hyperparameters: Mapping[str, Any], path: str) -> tuple[list[str], int | None]:
    """The script arguments from ``hyperparameters`` (a parsed ``hyperparameters.json``) and ``nproc_per_node``."""
    args: list[str] = []
    nproc = None
    for key, value in hyperparameters.items():
        if not isinstance(value, str):
            raise ContractError(
                f"{path}: the value of {key!r} must be a string (SageMaker writes strings), got {value!r}"
            )
        if key.replace("-", "_") in LAUNCHER_ONLY_HYPERPARAMETERS:
            nproc = parse_int(hyperparameter_value(value), f"{path}: {key}", minimum=1)
            continue
        if key.startswith("sagemaker_"):
            continue
        flag = key.lstrip("-").replace("_", "-")
        if not flag or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]*", flag):
            raise ContractError(f"{path}: {key!r} is not a usable hyperparameter name")
        if flag in SCRIPT_FLAGS_SET_BY_LAUNCHER:
            raise ContractError(f"{path}: {key!r} is set by the launcher from the SageMaker paths; remove it")
        args += [f"--{flag}", hyperparameter_value(value)]
    return args, nproc


def sagemaker_launch(
    root: str,
    *,
    channel: str,
    script: str,
    extra_args: Sequence[str],
    environ: Mapping[str, str],
    dev_dir: str = "/dev",
) -> Launch:
    """The launch for the SageMaker training contract under ``root`` (normally ``/opt/ml``)."""
    config_path = os.path.join(root, "input", "config", "resourceconfig.json")
    config = read_json(config_path, required=True)
    if not isinstance(config, dict):
        raise ContractError(f"{config_path} must hold a JSON object, got {config!r}")
    hosts = config.get("hosts")
    current = config.get("current_host")
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) and h for h in hosts):
        raise ContractError(f"{config_path}: hosts must be a non-empty list of host names, got {hosts!r}")
    if len(set(hosts)) != len(hosts):
        raise ContractError(f"{config_path}: hosts lists a host twice: {hosts!r}")
    if current not in hosts:
        raise ContractError(f"{config_path}: current_host {current!r} is not in hosts {hosts!r}")
    interface = config.get("network_interface_name")
    if interface is not None and (not isinstance(interface, str) or not interface):
        raise ContractError(f"{config_path}: network_interface_name must be a non-empty string, got {interface!r}")

    params_path = os.path.join(root, "input", "config", "hyperparameters.json")
    hyperparameters = read_json(params_path, required=False) or {}
    if not isinstance(hyperparameters, dict):
        raise ContractError(f"{params_path} must hold a JSON object, got {hyperparameters!r}")
    hp_args, nproc = hyperparameter_args(hyperparameters, params_path)
    if nproc is None:
        nproc = count_gpus(dev_dir) or 1

    data_dir = os.path.join(root, "input", "data", channel)
    if not os.path.isdir(data_dir):
        raise ContractError(f"channel directory {data_dir} does not exist (is the job's input channel {channel!r}?)")

    script_args = [
        "--data-dir",
        data_dir,
        "--output-dir",
        os.path.join(root, "model"),
        "--checkpoint-dir",
        os.path.join(root, "checkpoints"),
        *hp_args,
        *extra_args,
    ]
    master = (hosts[0], SAGEMAKER_MASTER_PORT) if len(hosts) > 1 else None
    command = torchrun(
        nnodes=len(hosts),
        nproc_per_node=nproc,
        node_rank=hosts.index(current),
        master=master,
        script=script,
        script_args=script_args,
    )
    env = {name: interface for name in SOCKET_IFNAME_VARIABLES if interface and name not in environ}
    return Launch("sagemaker", command, env)


# --------------------------------------------------------------------------------------------------------------------
# Kubernetes
# --------------------------------------------------------------------------------------------------------------------


def _one_of(environ: Mapping[str, str], primary: str, fallback: str) -> tuple[str, str] | None:
    """``(variable, value)`` of ``primary``, else of ``fallback``; both set and different is an error."""
    first, second = environ.get(primary), environ.get(fallback)
    if first is not None and second is not None and first.strip() != second.strip():
        raise ContractError(f"{primary}={first!r} and {fallback}={second!r} disagree")
    if first is not None:
        return primary, first
    if second is not None:
        return fallback, second
    return None


def kubernetes_launch(
    environ: Mapping[str, str], *, script: str, script_args: Sequence[str], dev_dir: str = "/dev"
) -> Launch:
    """The launch for the Kubeflow TrainJob (v2) or PyTorchJob (v1) environment ``environ``."""
    nnodes_text = environ.get("PET_NNODES")
    if nnodes_text is None:
        raise ContractError("PET_NNODES is not set (Kubeflow TrainJob and PyTorchJob set it on every node)")
    if ":" in nnodes_text:
        raise ContractError(f"PET_NNODES={nnodes_text!r} is an elastic range; this launcher runs a fixed node count")
    nnodes = parse_int(nnodes_text, "PET_NNODES", minimum=1)

    rank_var = _one_of(environ, "PET_NODE_RANK", "RANK")
    if rank_var is None:
        raise ContractError("neither PET_NODE_RANK nor RANK is set")
    node_rank = parse_int(rank_var[1], rank_var[0], minimum=0)
    if node_rank >= nnodes:
        raise ContractError(f"{rank_var[0]}={rank_var[1]!r} must be < PET_NNODES={nnodes_text!r}")

    nproc_text = environ.get("PET_NPROC_PER_NODE")
    if nproc_text is not None:
        nproc = parse_int(nproc_text, "PET_NPROC_PER_NODE", minimum=1)
    else:
        nproc = count_gpus(dev_dir) or 1

    addr_var = _one_of(environ, "PET_MASTER_ADDR", "MASTER_ADDR")
    if addr_var is None or not addr_var[1].strip():
        raise ContractError("neither PET_MASTER_ADDR nor MASTER_ADDR is set to a host name")
    port_var = _one_of(environ, "PET_MASTER_PORT", "MASTER_PORT")
    port = DEFAULT_MASTER_PORT if port_var is None else parse_int(port_var[1], port_var[0], minimum=1, maximum=65535)

    command = torchrun(
        nnodes=nnodes,
        nproc_per_node=nproc,
        node_rank=node_rank,
        master=(addr_var[1].strip(), port),
        script=script,
        script_args=[*script_args, *environment_hyperparameters(environ)],
    )
    return Launch("kubernetes", command)


def environment_hyperparameters(environ: Mapping[str, str]) -> list[str]:
    """Script arguments from ``TRAINING_HYPERPARAMETERS`` (a JSON object of strings), as from hyperparameters.json."""
    text = environ.get(HYPERPARAMETERS_ENV)
    if not text:
        return []
    try:
        hyperparameters = json.loads(text)
    except ValueError:
        raise ContractError(f"{HYPERPARAMETERS_ENV}={text!r} is not JSON") from None
    if not isinstance(hyperparameters, dict):
        raise ContractError(f"{HYPERPARAMETERS_ENV} must hold a JSON object, got {hyperparameters!r}")
    args, _ = hyperparameter_args(hyperparameters, HYPERPARAMETERS_ENV)
    return args


# --------------------------------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------------------------------


def detect_runtime(requested: str, *, train_verb: bool, sagemaker_root: str, environ: Mapping[str, str]) -> str:
    """The runtime to use: ``requested``, or for ``auto`` the one whose contract is present (else ``local``)."""
    if requested != "auto":
        return requested
    if train_verb or os.path.isfile(os.path.join(sagemaker_root, "input", "config", "resourceconfig.json")):
        return "sagemaker"
    if "PET_NNODES" in environ or "MASTER_ADDR" in environ:
        return "kubernetes"
    return "local"


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """The launcher's own options (before ``--``) and the script's arguments (after it)."""
    argv = list(argv)
    if "--" in argv:
        cut = argv.index("--")
        own, script_args = argv[:cut], argv[cut + 1 :]
    else:
        own, script_args = argv, []
    parser = argparse.ArgumentParser(
        description="Run train_cifar10.py under torchrun from the SageMaker or the Kubernetes (Kubeflow) contract.",
        epilog="Arguments after -- go to the training script.",
    )
    parser.add_argument("verb", nargs="?", choices=("train",), help="SageMaker starts training containers with 'train'")
    parser.add_argument("--runtime", choices=("auto", "sagemaker", "kubernetes"), default="auto")
    parser.add_argument("--sagemaker-root", default=DEFAULT_SAGEMAKER_ROOT, help="root of the SageMaker paths")
    parser.add_argument("--channel", default=DEFAULT_CHANNEL, help="SageMaker input channel holding the data")
    parser.add_argument("--script", default=DEFAULT_SCRIPT, help="training script run by torchrun")
    parser.add_argument("--dry-run", action="store_true", help="print the command as JSON instead of running it")
    return parser.parse_args(own), script_args


def build_launch(args: argparse.Namespace, script_args: Sequence[str], environ: Mapping[str, str]) -> Launch:
    """The launch for the parsed command line and the environment ``environ``."""
    runtime = detect_runtime(
        args.runtime, train_verb=args.verb == "train", sagemaker_root=args.sagemaker_root, environ=environ
    )
    if runtime == "sagemaker":
        return sagemaker_launch(
            args.sagemaker_root, channel=args.channel, script=args.script, extra_args=script_args, environ=environ
        )
    if runtime == "kubernetes":
        return kubernetes_launch(environ, script=args.script, script_args=script_args)
    command = torchrun(
        nnodes=1, nproc_per_node=1, node_rank=0, master=None, script=args.script, script_args=script_args
    )
    return Launch("local", command)


def main(argv: Sequence[str] | None = None) -> int:
    """Builds the launch and execs it (or prints it with ``--dry-run``); a contract error exits with status 2."""
    args, script_args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        launch = build_launch(args, script_args, os.environ)
    except ContractError as error:
        print(f"launch.py: error: {error}", file=sys.stderr, flush=True)
        return 2
    if args.dry_run:
        print(launch.as_json(), flush=True)
        return 0
    exec_launch(launch)


def exec_launch(launch: Launch) -> NoReturn:
    """Logs the launch, adds its variables to the environment and replaces this process with its command."""
    print(
        f"[launch] runtime={launch.runtime} env={json.dumps(launch.env)} exec: {' '.join(launch.command)}", flush=True
    )
    os.environ.update(launch.env)
    os.execvp(launch.command[0], launch.command)


if __name__ == "__main__":
    sys.exit(main())
