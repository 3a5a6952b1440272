"""Tests of images/cifar10-ddp/launch.py: the torchrun command it builds from the SageMaker and Kubernetes contracts.

The unit tests build launches from fake SageMaker trees (``--sagemaker-root`` under ``tmp_path``) and from explicit
environments; every bad contract must exit with status 2 and name the file or variable and its value. Two CPU smoke
runs go through the launcher for real, one per contract, and train one short epoch.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.apps import REPO

IMAGE_DIR = REPO / "images" / "cifar10-ddp"
LAUNCHER = IMAGE_DIR / "launch.py"
SCRIPT = str(IMAGE_DIR / "train_cifar10.py")
RUN_TIMEOUT_S = 300
CONTRACT_VARIABLES = (
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "GLOO_SOCKET_IFNAME",
    "NCCL_SOCKET_IFNAME",
)


def load_module(name: str, path: Path) -> Any:
    """The module at ``path``, imported under ``name`` (the image folder is not a package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


launch = load_module("cifar10_launch", LAUNCHER)
make_synthetic_cifar = load_module("cifar10_make_synthetic", IMAGE_DIR / "make_synthetic_cifar.py")
REAL_COUNT_GPUS = launch.count_gpus


@pytest.fixture(autouse=True)
def no_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    """No contract variable from the test machine, and no GPUs (``count_gpus`` is patched to 0)."""
    for name in CONTRACT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(launch, "count_gpus", lambda dev_dir="/dev": 0)


def sagemaker_root(
    root: Path,
    *,
    hosts: Any = ("algo-1",),
    current: Any = "algo-1",
    hyperparameters: Any = None,
    interface: str = "eth0",
    channel: str | None = "training",
) -> Path:
    """A fake ``/opt/ml`` tree: resource config, optional hyperparameters, and the channel folder."""
    config = root / "input" / "config"
    config.mkdir(parents=True)
    resource = {"current_host": current, "hosts": list(hosts), "network_interface_name": interface}
    (config / "resourceconfig.json").write_text(json.dumps(resource))
    if hyperparameters is not None:
        (config / "hyperparameters.json").write_text(json.dumps(hyperparameters))
    if channel is not None:
        (root / "input" / "data" / channel).mkdir(parents=True)
    return root


def dry_run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """``launch.main`` of ``argv`` with ``--dry-run``: the printed launch, parsed; the run must succeed."""
    cut = argv.index("--") if "--" in argv else len(argv)
    assert launch.main([*argv[:cut], "--dry-run", *argv[cut:]]) == 0
    return json.loads(capsys.readouterr().out)


def flags(command: list[str]) -> dict[str, str]:
    """The torchrun options of ``command`` (before the script) as a dict; ``--standalone`` maps to ``""``."""
    head = command[3 : command.index(SCRIPT)]
    options, i = {}, 0
    while i < len(head):
        if head[i] == "--standalone":
            options["--standalone"], i = "", i + 1
        else:
            options[head[i]], i = head[i + 1], i + 2
    return options


def script_args(command: list[str]) -> list[str]:
    """What ``command`` passes to the training script."""
    return command[command.index(SCRIPT) + 1 :]


def fails_with(argv: list[str], capsys: pytest.CaptureFixture[str], *fragments: str) -> str:
    """Runs ``launch.main(argv)``; it must exit 2 with one line on stderr holding every fragment."""
    assert launch.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("launch.py: error: "), captured.err
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


# ------------------------------------------------------------------------------------------------ SageMaker


def test_sagemaker_single_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = sagemaker_root(tmp_path / "ml")
    launched = dry_run(["train", "--sagemaker-root", str(root)], capsys)
    assert launched["runtime"] == "sagemaker"
    command = launched["command"]
    assert command[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert flags(command) == {"--standalone": "", "--nnodes": "1", "--node_rank": "0", "--nproc_per_node": "1"}
    assert script_args(command) == [
        "--data-dir",
        str(root / "input" / "data" / "training"),
        "--output-dir",
        str(root / "model"),
        "--checkpoint-dir",
        str(root / "checkpoints"),
    ]
    assert launched["env"] == {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0"}
    # The resource config alone selects SageMaker too (no "train" argument).
    assert dry_run(["--sagemaker-root", str(root)], capsys)["command"] == command


@pytest.mark.parametrize(("current", "rank"), [("algo-1", "0"), ("algo-2", "1"), ("algo-3", "2")])
def test_sagemaker_multi_host_rank_is_the_index_in_hosts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], current: str, rank: str
) -> None:
    root = sagemaker_root(tmp_path / "ml", hosts=["algo-1", "algo-2", "algo-3"], current=current, interface="ens5")
    launched = dry_run(["train", "--sagemaker-root", str(root)], capsys)
    assert flags(launched["command"]) == {
        "--nnodes": "3",
        "--node_rank": rank,
        "--nproc_per_node": "1",
        "--master_addr": "algo-1",
        "--master_port": "29500",
    }
    assert launched["env"] == {"GLOO_SOCKET_IFNAME": "ens5", "NCCL_SOCKET_IFNAME": "ens5"}


def test_sagemaker_hosts_are_used_as_listed_not_sorted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = [f"algo-{i}" for i in range(1, 12)]
    root = sagemaker_root(tmp_path / "ml", hosts=hosts, current="algo-10")
    assert flags(dry_run(["train", "--sagemaker-root", str(root)], capsys)["command"])["--node_rank"] == "9"


def test_sagemaker_hyperparameters_become_script_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hyperparameters = {
        "epochs": "3",
        "batch_size": "64",
        "lr": "0.01",
        "backend": '"gloo"',  # as the SageMaker Python SDK's framework estimators encode strings
        "momentum": "0.9",
        "nproc_per_node": "2",
        "sagemaker_program": '"train_cifar10.py"',
        "sagemaker_region": '"us-west-2"',
        "sagemaker_submit_directory": '"s3://bucket/source.tar.gz"',
    }
    root = sagemaker_root(tmp_path / "ml", hyperparameters=hyperparameters)
    launched = dry_run(
        ["train", "--sagemaker-root", str(root), "--channel", "training", "--", "--num-workers", "2"], capsys
    )
    command = launched["command"]
    assert flags(command)["--nproc_per_node"] == "2"
    assert script_args(command)[6:] == [
        "--epochs",
        "3",
        "--batch-size",
        "64",
        "--lr",
        "0.01",
        "--backend",
        "gloo",
        "--momentum",
        "0.9",
        "--num-workers",
        "2",
    ]
    assert not any(arg.startswith(("--sagemaker", "--nproc")) for arg in script_args(command))


def test_sagemaker_channel_and_gpu_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = sagemaker_root(tmp_path / "ml", channel="cifar")
    monkeypatch.setattr(launch, "count_gpus", lambda dev_dir="/dev": 4)
    command = dry_run(["train", "--sagemaker-root", str(root), "--channel", "cifar"], capsys)["command"]
    assert flags(command)["--nproc_per_node"] == "4"
    assert script_args(command)[:2] == ["--data-dir", str(root / "input" / "data" / "cifar")]


def test_sagemaker_keeps_socket_interfaces_set_by_the_job(tmp_path: Path) -> None:
    root = sagemaker_root(tmp_path / "ml", interface="eth0")
    built = launch.sagemaker_launch(
        str(root), channel="training", script=SCRIPT, extra_args=[], environ={"NCCL_SOCKET_IFNAME": "^lo,docker"}
    )
    assert built.env == {"GLOO_SOCKET_IFNAME": "eth0"}


def test_gpu_count_reads_nvidia_device_files(tmp_path: Path) -> None:
    for name in ("nvidia0", "nvidia1", "nvidia10", "nvidiactl", "nvidia-uvm", "nvidia-modeset", "null"):
        (tmp_path / name).write_text("")
    assert REAL_COUNT_GPUS(str(tmp_path)) == 3  # the fixture patches launch.count_gpus, not this reference
    assert REAL_COUNT_GPUS(str(tmp_path / "absent")) == 0


@pytest.mark.parametrize(
    ("resource", "hyperparameters", "fragments"),
    [
        (
            {"current_host": "algo-3", "hosts": ["algo-1", "algo-2"]},
            None,
            ["resourceconfig.json", "current_host 'algo-3' is not in hosts ['algo-1', 'algo-2']"],
        ),
        (
            {"current_host": "algo-1", "hosts": []},
            None,
            ["resourceconfig.json", "hosts must be a non-empty list", "[]"],
        ),
        ({"current_host": "algo-1"}, None, ["resourceconfig.json", "hosts must be a non-empty list", "None"]),
        (
            {"current_host": "algo-1", "hosts": ["algo-1", "algo-1"]},
            None,
            ["resourceconfig.json", "lists a host twice"],
        ),
        (
            {"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": ""},
            None,
            ["resourceconfig.json", "network_interface_name must be a non-empty string"],
        ),
        ("not json {", None, ["resourceconfig.json is not readable JSON"]),
        (["algo-1"], None, ["resourceconfig.json must hold a JSON object", "['algo-1']"]),
        (
            {"current_host": "algo-1", "hosts": ["algo-1"]},
            {"nproc_per_node": "two"},
            ["hyperparameters.json: nproc_per_node must be an integer, got 'two'"],
        ),
        (
            {"current_host": "algo-1", "hosts": ["algo-1"]},
            {"nproc_per_node": "0"},
            ["hyperparameters.json: nproc_per_node must be >= 1, got '0'"],
        ),
        (
            {"current_host": "algo-1", "hosts": ["algo-1"]},
            {"epochs": 3},
            ["hyperparameters.json: the value of 'epochs' must be a string", "got 3"],
        ),
        (
            {"current_host": "algo-1", "hosts": ["algo-1"]},
            {"data_dir": "/elsewhere"},
            ["hyperparameters.json: 'data_dir' is set by the launcher"],
        ),
        (
            {"current_host": "algo-1", "hosts": ["algo-1"]},
            {"bad key": "1"},
            ["hyperparameters.json: 'bad key' is not a usable hyperparameter name"],
        ),
        ({"current_host": "algo-1", "hosts": ["algo-1"]}, ["epochs"], ["hyperparameters.json must hold a JSON object"]),
    ],
)
def test_sagemaker_bad_contracts_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], resource: Any, hyperparameters: Any, fragments: list[str]
) -> None:
    root = sagemaker_root(tmp_path / "ml")
    config = root / "input" / "config"
    (config / "resourceconfig.json").write_text(resource if isinstance(resource, str) else json.dumps(resource))
    if hyperparameters is not None:
        (config / "hyperparameters.json").write_text(json.dumps(hyperparameters))
    line = fails_with(["train", "--sagemaker-root", str(root), "--dry-run"], capsys, *fragments)
    assert str(config) in line  # the full path of the file at fault


def test_sagemaker_missing_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "empty"
    fails_with(
        ["train", "--sagemaker-root", str(missing)],
        capsys,
        f"{missing / 'input' / 'config' / 'resourceconfig.json'} does not exist",
    )
    root = sagemaker_root(tmp_path / "ml", channel=None)
    fails_with(
        ["train", "--sagemaker-root", str(root)],
        capsys,
        f"channel directory {root / 'input' / 'data' / 'training'} does not exist",
    )


def test_hyperparameter_values_are_decoded_like_the_sagemaker_toolkit() -> None:
    decode = launch.hyperparameter_value
    assert [decode(v) for v in ('"gloo"', "gloo", "3", " 0.01", "1e-3", "true", "[1, 2]", '""')] == [
        "gloo",
        "gloo",
        "3",
        "0.01",
        "1e-3",
        "true",
        "[1, 2]",
        "",
    ]


# ------------------------------------------------------------------------------------------------ Kubernetes


def kubernetes(environ: dict[str, str], *argv: str) -> Any:
    """The launch that ``launch.py argv`` builds in the environment ``environ``."""
    args, extra = launch.parse_args(list(argv))
    return launch.build_launch(args, extra, environ)


def test_trainjob_v2_variables() -> None:
    environ = {
        "PET_NNODES": "2",
        "PET_NPROC_PER_NODE": "4",
        "PET_NODE_RANK": "1",
        "PET_MASTER_ADDR": "cifar-node-0-0.cifar",
        "PET_MASTER_PORT": "29500",
    }
    built = kubernetes(environ, "--", "--data-dir", "/data/cifar10", "--epochs", "3")
    assert built.runtime == "kubernetes" and built.env == {}
    assert flags(built.command) == {
        "--nnodes": "2",
        "--node_rank": "1",
        "--nproc_per_node": "4",
        "--master_addr": "cifar-node-0-0.cifar",
        "--master_port": "29500",
    }
    assert script_args(built.command) == ["--data-dir", "/data/cifar10", "--epochs", "3"]


def test_pytorchjob_v1_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    environ = {
        "MASTER_ADDR": "cifar-master-0",
        "MASTER_PORT": "23456",
        "PET_MASTER_ADDR": "cifar-master-0",
        "PET_MASTER_PORT": "23456",
        "WORLD_SIZE": "3",
        "RANK": "2",
        "PET_NODE_RANK": "2",
        "PET_NNODES": "3",
    }
    built = kubernetes(environ, "--", "--epochs", "1")
    assert flags(built.command) == {
        "--nnodes": "3",
        "--node_rank": "2",
        "--nproc_per_node": "1",  # no nprocPerNode and no GPU
        "--master_addr": "cifar-master-0",
        "--master_port": "23456",
    }
    # Without PET_NODE_RANK / PET_MASTER_*: RANK and MASTER_* are used; the GPUs give the processes per node.
    monkeypatch.setattr(launch, "count_gpus", lambda dev_dir="/dev": 8)
    reduced = {k: v for k, v in environ.items() if k not in ("PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")}
    assert flags(kubernetes(reduced).command) == {
        "--nnodes": "3",
        "--node_rank": "2",
        "--nproc_per_node": "8",
        "--master_addr": "cifar-master-0",
        "--master_port": "23456",
    }


def test_runtime_detection(tmp_path: Path) -> None:
    nowhere = ["--sagemaker-root", str(tmp_path / "no-sagemaker")]
    assert kubernetes({}, *nowhere).runtime == "local"
    local = kubernetes({}, *nowhere, "--", "--epochs", "1")
    assert flags(local.command) == {"--standalone": "", "--nnodes": "1", "--node_rank": "0", "--nproc_per_node": "1"}
    assert script_args(local.command) == ["--epochs", "1"]
    pytorchjob = {"MASTER_ADDR": "m", "PET_NNODES": "1", "RANK": "0"}
    assert kubernetes(pytorchjob, *nowhere).runtime == "kubernetes"
    sagemaker_root(tmp_path / "ml")
    assert kubernetes(pytorchjob, "--sagemaker-root", str(tmp_path / "ml")).runtime == "sagemaker"
    assert kubernetes(pytorchjob, "--sagemaker-root", str(tmp_path / "ml"), "--runtime", "kubernetes").runtime == (
        "kubernetes"
    )


def test_hyperparameters_of_the_hybrid_workflow_reach_the_script_as_on_sagemaker() -> None:
    environ = {
        "PET_NNODES": "1",
        "PET_NPROC_PER_NODE": "2",
        "PET_NODE_RANK": "0",
        "PET_MASTER_ADDR": "m",
        launch.HYPERPARAMETERS_ENV: json.dumps({"epochs": "5", "batch_size": "128"}),
    }
    built = kubernetes(environ, "--", "--data-dir", "/data/cifar10", "--epochs", "3")
    assert built.command[-6:] == ["--epochs", "3", "--epochs", "5", "--batch-size", "128"], "later values win"
    for bad in ("not json", json.dumps(["--epochs", "5"]), json.dumps({"data_dir": "/elsewhere"})):
        with pytest.raises(launch.ContractError):
            kubernetes({**environ, launch.HYPERPARAMETERS_ENV: bad}, "--")


@pytest.mark.parametrize(
    ("environ", "fragments"),
    [
        (
            {"PET_NNODES": "2", "PET_NODE_RANK": "2", "PET_MASTER_ADDR": "m"},
            ["PET_NODE_RANK='2' must be < PET_NNODES='2'"],
        ),
        (
            {"PET_NNODES": "two", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "m"},
            ["PET_NNODES must be an integer, got 'two'"],
        ),
        ({"PET_NNODES": "0", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "m"}, ["PET_NNODES must be >= 1, got '0'"]),
        ({"PET_NNODES": "1:4", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "m"}, ["PET_NNODES='1:4' is an elastic range"]),
        ({"PET_NNODES": "2", "PET_NODE_RANK": "-1", "PET_MASTER_ADDR": "m"}, ["PET_NODE_RANK must be >= 0, got '-1'"]),
        (
            {"PET_NNODES": "2", "PET_NODE_RANK": "x", "PET_MASTER_ADDR": "m"},
            ["PET_NODE_RANK must be an integer, got 'x'"],
        ),
        (
            {"PET_NNODES": "2", "PET_NODE_RANK": "1", "RANK": "0", "MASTER_ADDR": "m"},
            ["PET_NODE_RANK='1' and RANK='0' disagree"],
        ),
        ({"PET_NNODES": "2", "PET_MASTER_ADDR": "m"}, ["neither PET_NODE_RANK nor RANK is set"]),
        ({"PET_NNODES": "2", "PET_NODE_RANK": "0"}, ["neither PET_MASTER_ADDR nor MASTER_ADDR is set"]),
        ({"MASTER_ADDR": "m", "RANK": "0", "WORLD_SIZE": "2"}, ["PET_NNODES is not set"]),
        (
            {"PET_NNODES": "2", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "m", "PET_NPROC_PER_NODE": "auto"},
            ["PET_NPROC_PER_NODE must be an integer, got 'auto'"],
        ),
        (
            {"PET_NNODES": "2", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "m", "PET_MASTER_PORT": "70000"},
            ["PET_MASTER_PORT must be <= 65535, got '70000'"],
        ),
        (
            {"PET_NNODES": "2", "PET_NODE_RANK": "0", "MASTER_ADDR": "m", "MASTER_PORT": "http"},
            ["MASTER_PORT must be an integer, got 'http'"],
        ),
        (
            {"PET_NNODES": "2", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "a", "MASTER_ADDR": "b"},
            ["PET_MASTER_ADDR='a' and MASTER_ADDR='b' disagree"],
        ),
    ],
)
def test_kubernetes_bad_contracts_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    environ: dict[str, str],
    fragments: list[str],
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    fails_with(["--runtime", "kubernetes", "--sagemaker-root", str(tmp_path), "--dry-run"], capsys, *fragments)


# ------------------------------------------------------------------------------------------------ end to end (CPU)


def free_port() -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_launcher(argv: list[str], extra_env: dict[str, str]) -> str:
    """Runs launch.py in a subprocess with ``extra_env`` as its only contract variables; returns stdout."""
    env = {k: v for k, v in os.environ.items() if k not in CONTRACT_VARIABLES}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **extra_env)
    done = subprocess.run(
        [sys.executable, str(LAUNCHER), *argv], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env
    )
    assert done.returncode == 0, (
        f"exit {done.returncode}\nSTDOUT:\n{done.stdout[-4000:]}\nSTDERR:\n{done.stderr[-4000:]}"
    )
    return done.stdout


def write_data(folder: Path) -> None:
    """A small synthetic CIFAR-10 set in ``folder``."""
    make_synthetic_cifar.write_dataset(str(folder), num_train=64, num_test=32, seed=3)


def test_sagemaker_contract_end_to_end(tmp_path: Path) -> None:
    hyperparameters = {
        "epochs": "1",
        "batch-size": "8",
        "max_steps_per_epoch": "2",
        "backend": '"gloo"',
        "nproc_per_node": "1",
        "sagemaker_program": '"train_cifar10.py"',
    }
    root = sagemaker_root(tmp_path / "ml", hyperparameters=hyperparameters, interface="lo")
    write_data(root / "input" / "data" / "training")
    stdout = run_launcher(["train", "--sagemaker-root", str(root)], {})
    assert "[launch] runtime=sagemaker" in stdout and '"GLOO_SOCKET_IFNAME": "lo"' in stdout
    assert "rank 0 of 1 on cpu" in stdout and "epoch=1 train_loss=" in stdout
    assert sorted(p.name for p in (root / "model").iterdir()) == ["metrics.json", "model.pt"]
    assert [p.name for p in (root / "checkpoints").iterdir()] == ["checkpoint.pt"]
    assert json.loads((root / "model" / "metrics.json").read_text())["history"][0]["steps"] == 2


def test_kubernetes_contract_end_to_end(tmp_path: Path) -> None:
    write_data(tmp_path / "data")
    out = tmp_path / "out"
    environ = {
        "PET_NNODES": "1",
        "PET_NPROC_PER_NODE": "2",
        "PET_NODE_RANK": "0",
        "PET_MASTER_ADDR": "127.0.0.1",
        "PET_MASTER_PORT": str(free_port()),
    }
    argv = ["--sagemaker-root", str(tmp_path / "no-sagemaker"), "--"]
    argv += ["--data-dir", str(tmp_path / "data"), "--output-dir", str(out), "--epochs", "1", "--batch-size", "8"]
    stdout = run_launcher([*argv, "--max-steps-per-epoch", "2"], environ)
    assert "[launch] runtime=kubernetes" in stdout
    assert "rank 0 of 2 on cpu" in stdout and "epoch=1 train_loss=" in stdout
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "metrics.json", "model.pt"]
    assert json.loads((out / "metrics.json").read_text())["world_size"] == 2
