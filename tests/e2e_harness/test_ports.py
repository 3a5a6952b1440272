"""The e2e harness hands each test process ports of its own (e2e/cluster.py ``free_port``)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from e2e.cluster import PortAllocator, worker_port_block
from e2e.processes import HarnessError


def test_two_workers_never_hand_out_the_same_port_and_no_block_is_in_the_ephemeral_range():
    low, _high = (int(value) for value in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    blocks = [worker_port_block(f"gw{index}") for index in range(10)] + [worker_port_block("")]
    for index, block in enumerate(blocks[:10]):
        assert block.stop <= low
        for other in blocks[index + 1 : 10]:
            assert not set(block) & set(other)
    assert blocks[-1] == blocks[0]  # one process alone (no xdist) takes the first block
    with pytest.raises(HarnessError, match="at most 10 workers"):
        worker_port_block("gw10")


def a_free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_allocator_hands_out_its_ports_in_turn_skipping_one_that_is_bound():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        held = holder.getsockname()[1]
        free = a_free_port()
        ports = PortAllocator([held, free])
        assert [ports.take(), ports.take()] == [free, free]
    assert [ports.take(), ports.take()] == [held, free]


def test_the_allocator_fails_when_no_port_of_its_block_can_be_bound():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        ports = PortAllocator([holder.getsockname()[1]])
        with pytest.raises(HarnessError, match="no port"):
            ports.take()
