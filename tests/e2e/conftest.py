"""Fixtures of the tests on the real control plane: the built binaries (``make e2e-build``), the kubectl layer's
tools, and a fresh test cluster per test, stopped at its end (its logs kept when the test failed)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from e2e.build import built_binaries, cache_root
from e2e.cluster import TestCluster
from e2e.layer import layer_tools

LONGEST_FIRST = (
    ("test_lifecycle.py", "test_a_stacks_life_keeps_every_promise_and_its_seed_jobs_complete[TrainiumEks]"),
    ("test_node_loss.py", ""),
    ("test_gang_capacity.py", ""),
    ("test_arrival_order.py", ""),
    ("test_lifecycle.py", "test_a_stacks_life_keeps_every_promise_and_its_seed_jobs_complete"),
    ("test_deploy.py", ""),
)
"""The tests that take longest, by file and name prefix, longest first (on two workers on 2026-12-06: TrainiumEks's
walk 1,200 s, the node loss 881 s, the partial launch failure 420 s, the reverse order 287 s, the other walks 285 and
208 s, the deploys 84 to 200 s; every other test under 70 s), so that the workers of ``make e2e`` end near together:
pytest-xdist's ``load`` scheduling deals out the first tests in turn, then one at a time to a worker that runs dry."""


def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """Orders the tests longest first (:data:`LONGEST_FIRST`), the rest in collection order."""

    def rank(item: pytest.Item) -> int:
        for position, (file, name) in enumerate(LONGEST_FIRST):
            if item.path.name == file and item.name.startswith(name):
                return position
        return len(LONGEST_FIRST)

    items.sort(key=rank)


@pytest.fixture(scope="session", autouse=True)
def stop_on_sigterm() -> Iterator[None]:
    """A SIGTERM (a CI timeout, ``kill``) ends the run through pytest's teardown, which stops every process."""

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    yield
    signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="session")
def binaries() -> Dict[str, Path]:
    """Every component's binary; the run fails (it does not skip) when they are not built."""
    found = built_binaries()
    if found is None:
        pytest.fail("the e2e components are not built for their pinned versions: run `make e2e-build` first")
    return found


@pytest.fixture(scope="session")
def tools() -> Dict[str, Path]:
    """kubectl and helm of the kubectl layer."""
    return layer_tools(cache_root())


@pytest.fixture
def cluster(binaries, tmp_path, request) -> Iterator[TestCluster]:
    """A started test cluster in ``tmp_path``; a test marked ``job_seconds(N)`` gets one whose job pods run N
    seconds before they succeed (:class:`e2e.cluster.TestCluster`)."""
    if os.environ.get("TRAINIUM_EKS_E2E_NETNS") != "1":
        pytest.fail("the e2e tests run inside a network namespace with only loopback up: use `make e2e`")
    marker = request.node.get_closest_marker("job_seconds")
    with TestCluster(binaries, tmp_path / "cluster", job_seconds=marker.args[0] if marker else 0) as started:
        yield started
