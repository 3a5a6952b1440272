"""The floor a fabric acceptance run must clear: a fraction of the node's EFA link rate.

**Ceiling.** nccl-tests' bus bandwidth is normalised so that it "should reflect the speed of the hardware bottleneck:
NVLink, PCI, QPI, or network" and can be compared "with the hardware peak bandwidth, independently of the number of
ranks used" (NVIDIA/nccl-tests ``doc/PERFORMANCE.md``, a0b82b2); nccom-test computes it the same way (all-reduce
factor ``2(r-1)/r``, aws-neuron-sdk ``tools/neuron-sys-tools/nccom-test.rst``). Across nodes the bottleneck is the
network: in a ring all-reduce each node sends ``2(n-1)/n`` of the message over its links, which is the bus bandwidth
times the time, so the bus bandwidth tends to the node's link rate, ``efa_link_gbps / 8`` GB/s
(:attr:`~trainium_eks.facts.catalog.InstanceFacts.efa_link_gbps`: trn1.32xlarge 800 Gbps, trn1n 1600, trn2 3200,
p4d 400, p5 3200). Hierarchical algorithms (Neuron's reduce within a node over NeuronLink first) send less over the
network than a flat ring, so on few nodes the figure can come near or above the link rate: it is a reference for the
floor, not a bound a run must stay under.

**No published target.** Neuron publishes no expected multi-node nccom-test figure. Its user guide shows one 2 x
trn1 run (64 ranks, fp32, 1 GiB: bus bandwidth 47.09 GiB/s = 50.6 GB/s = 405 Gbps, 51 % of 800 Gbps) under "should
not be considered up-to-date": an example of the format and of the order of magnitude, not a specification.

**The default, 0.25 of the link rate at the largest message size measured** (trn1.32xlarge: 200 Gbps, 25 GB/s):

- low enough for a healthy but untuned first run: half of the guide's example (no P4d/P5 figure was verified for this
  library either; the same fraction applies, and a run below it on those types is far from its hardware);
- high enough that a TCP path fails on the types this library is for: one TCP flow is limited to 5 Gbps between
  instances outside a cluster placement group, 10 Gbps within one and 25 Gbps with ENA Express (EC2 user guide,
  "Amazon EC2 instance network bandwidth", ec2-instance-network-bandwidth.html); the trn1.32xlarge floor is 8 to 40
  times that, the trn2 and p5 floors (800 Gbps) 32 to 160 times. NCCL's socket transport opens 2 threads x 8 sockets
  per connection on AWS (NVIDIA/nccl ``src/transport/net_socket.cc``, vendor 0x1d0f), so on the 40 Gbps types
  (g5.12xlarge, g6.12xlarge: floor 10 Gbps) a fallback could come near the floor; there the transport check of the
  log (``Using network Socket``, :mod:`~trainium_eks.manifests.jobs.fabric_program`) is what catches it. The floor's
  job is a degraded EFA path: interfaces missing, a node in another AZ or placement group, a misconfigured device
  mapping.

The first real run sets the baseline: record its bus bandwidth (``python -m trainium_eks fabric``), then raise the
fraction (the ``fraction`` of :func:`fabric_floor_gbps`, a setting of the fabric check) to just below it, so that later
runs catch a fabric that got worse.
"""

from __future__ import annotations

import math
from typing import Any

from trainium_eks.core.validation import Problems
from trainium_eks.facts.catalog import InstanceFacts

DEFAULT_FABRIC_FLOOR_FRACTION = 0.25
"""The share of the node's EFA link rate the all-reduce bus bandwidth must reach at the largest message size (see the
module docstring for the reasoning); the first real run sets the baseline."""


def fabric_floor_gbps(instance: InstanceFacts, fraction: float = DEFAULT_FABRIC_FLOOR_FRACTION) -> float:
    """The floor of ``instance``'s fabric check in Gbps: ``fraction`` of its EFA link rate. Raises ValueError for a
    type without a link rate (no EFA: no fabric to check) or a fraction outside (0, 1]."""
    problems = Problems("fabric floor")
    check_fabric_floor(problems, "fraction", fraction)
    problems.raise_if_any()
    if instance.efa_link_gbps <= 0:
        raise ValueError(f"{instance.name} has no EFA link rate in the catalog: it has no EFA, so no fabric to check")
    return instance.efa_link_gbps * fraction


def check_fabric_floor(problems: Problems, setting: str, fraction: Any) -> bool:
    """``fraction`` is a number above 0 and at most 1: the share of the EFA link rate a fabric check must reach."""
    if (
        isinstance(fraction, (int, float))
        and not isinstance(fraction, bool)
        and math.isfinite(fraction)
        and 0 < fraction <= 1
    ):
        return True
    problems.add(
        setting,
        fraction,
        f"a fraction of the EFA link rate above 0 and at most 1 (default {DEFAULT_FABRIC_FLOOR_FRACTION}: the bus "
        "bandwidth a fabric check must reach, as a share of the node's link rate; the first real run sets the "
        "baseline)",
    )
    return False
