"""torchrun's rendezvous, for real: two agents (as two nodes) on 127.0.0.1 meet through c10d (the default) and through
etcd (the option, against Debian's etcd-server started here with --enable-v2), with the etcd client the BERT image
pins, and run an all-reduce over gloo. A client release or torch change that breaks the rendezvous fails here.

The torch here is the test environment's (2.13, CPU); the image's is the Neuron DLC's 2.9, which cannot be installed
offline. python-etcd and urllib3 are the image's pins (versions.ETCD_CLIENT), checked below.
"""

import importlib.metadata
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.apps import REPO
from trainium_eks.facts import versions

ALL_REDUCE = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} sum {value.item():g}", flush=True)
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def two_agents(tmp_path: Path, *rendezvous: str) -> str:
    """Start two torchrun agents of one process each with ``rendezvous`` arguments; their combined output."""
    script = tmp_path / "all_reduce.py"
    script.write_text(ALL_REDUCE)
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1"]
    command += [*rendezvous, "--rdzv_id", "rehearsal", str(script)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    agents = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        for _ in range(2)
    ]
    outputs = []
    for agent in agents:
        out, _ = agent.communicate(timeout=240)
        outputs.append(out)
        assert agent.returncode == 0, out[-3000:]
    return "\n".join(outputs)


def test_c10d_two_agents_meet_and_all_reduce(tmp_path):
    out = two_agents(tmp_path, "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{free_port()}")
    assert "rank 0 of 2 sum 3" in out and "rank 1 of 2 sum 3" in out


@pytest.fixture
def etcd_server(tmp_path):
    """Debian's etcd-server (3.4, the v2 API enabled) on 127.0.0.1; .ci/run installs it."""
    binary = shutil.which("etcd")
    if binary is None:
        pytest.fail("etcd is not installed: apt-get install etcd-server (.ci/run does it)")
    client, peer = free_port(), free_port()
    process = subprocess.Popen(
        [
            binary,
            "--enable-v2",
            "--data-dir",
            str(tmp_path / "etcd"),
            "--name",
            "rehearsal",
            "--listen-client-urls",
            f"http://127.0.0.1:{client}",
            "--advertise-client-urls",
            f"http://127.0.0.1:{client}",
            "--listen-peer-urls",
            f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{peer}",
            "--initial-cluster",
            f"rehearsal=http://127.0.0.1:{peer}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{client}/version", timeout=2) as answer:
                assert b"etcdserver" in answer.read()
            break
        except OSError:
            assert time.monotonic() < deadline and process.poll() is None, "etcd did not start"
            time.sleep(0.2)
    yield client
    process.terminate()
    process.wait(timeout=10)


def test_etcd_two_agents_meet_and_all_reduce_with_the_images_client(tmp_path, etcd_server):
    out = two_agents(tmp_path, "--rdzv_backend", "etcd", "--rdzv_endpoint", f"127.0.0.1:{etcd_server}")
    assert "rank 0 of 2 sum 3" in out and "rank 1 of 2 sum 3" in out


def test_the_etcd_client_pins_are_the_same_in_the_image_the_tests_and_versions():
    dockerfile = (REPO / "images" / "bert-pretrain" / "Dockerfile").read_text()
    requirements = (REPO / "requirements-dev.txt").read_text()
    for pin in versions.ETCD_CLIENT:
        assert re.search(rf"^\s+{re.escape(pin.requirement)} \\$", dockerfile, re.MULTILINE), pin.requirement
        assert re.search(rf"^{re.escape(pin.requirement)}$", requirements, re.MULTILINE), pin.requirement
        assert importlib.metadata.version(pin.package) == pin.version, "the tests run the pinned client"
