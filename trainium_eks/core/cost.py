"""The cost of a training system per hour, by component, as the constructs compute it and the stacks output it.

Every figure is an on-demand list price (:mod:`trainium_eks.facts.catalog` for instances,
:mod:`trainium_eks.facts.pricing` for the rest), for the stack's region. Where the library has no verified price (a
region outside the catalog's, a gap of the catalog, a region that is a token), a component has no number: it is never
guessed, the construct warns at synth (``trainium-eks:noPrice``), and every total that lacks it says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from aws_cdk import Annotations, CfnOutput, Stack, Token
from constructs import IConstruct

from trainium_eks.facts.pricing import gp3_usd_per_hour, hourly_price

NO_PRICE_WARNING = "trainium-eks:noPrice"


@dataclass(frozen=True)
class CostLine:
    """One billed component of a training system.

    :param component: What bills, such as ``"EKS control plane"``.
    :param quantity: How much of it, such as ``"2 x m7i.xlarge"`` or ``"1200 GiB"``.
    :param usd_per_hour: On-demand USD per hour, or None where the library has no verified price.
    :param idle: Whether it bills while no job runs (control plane, system nodes, NAT gateways, storage, standing
        node groups); nodes that Karpenter launches for a job are not idle cost: they are what a run adds.
    :param tail_hours: How long the component keeps billing after a run ends (a Karpenter pool's idle timeout, before
        it removes the empty nodes). Default: 0.
    """

    component: str
    quantity: str
    usd_per_hour: Optional[float]
    idle: bool
    tail_hours: float = 0.0

    def for_hours(self, hours: float) -> Optional[float]:
        """What the component costs over ``hours``, USD, or None without a price."""
        return None if self.usd_per_hour is None else self.usd_per_hour * hours


@dataclass(frozen=True)
class CostTotal:
    """The sum of some cost lines: what is known, and what is missing from it.

    :param usd_per_hour: Sum of the lines that have a price.
    :param missing: Components without a price (the sum is then a lower bound).
    """

    usd_per_hour: float
    missing: Sequence[str]


def total(lines: Sequence[CostLine]) -> CostTotal:
    """The sum of ``lines``, naming the lines without a price."""
    return CostTotal(
        usd_per_hour=sum(line.usd_per_hour for line in lines if line.usd_per_hour is not None),
        missing=tuple(line.component for line in lines if line.usd_per_hour is None),
    )


def stack_region(scope: IConstruct) -> Optional[str]:
    """The region of ``scope``'s stack, or None when it is a token (an environment-agnostic stack)."""
    region = Stack.of(scope).region
    return None if Token.is_unresolved(region) else region


def nodes_usd_per_hour(region: Optional[str], instance_type: str, count: int, root_volume_gib: int) -> Optional[float]:
    """``count`` on-demand instances of ``instance_type`` with their gp3 root volumes, USD per hour in ``region``;
    None when either price is unknown there (or the region is None)."""
    if region is None:
        return None
    instance = hourly_price(instance_type, region)
    volumes = gp3_usd_per_hour(region, count * root_volume_gib)
    return None if instance is None or volumes is None else instance * count + volumes


def priced(scope: IConstruct, what: str, usd_per_hour: Optional[float]) -> Optional[float]:
    """``usd_per_hour``, after a synth warning on ``scope`` when it is None (``what`` names the component)."""
    if usd_per_hour is None:
        region = stack_region(scope)
        where = f"region {region}" if region else "an environment-agnostic stack (no region at synth)"
        Annotations.of(scope).add_warning_v2(
            NO_PRICE_WARNING,
            f"No verified on-demand price of {what} in {where}: its cost per hour is left out of the stack's "
            "cost outputs and of `python -m trainium_eks cost` (prices: trainium_eks/facts/pricing.py, each with its "
            "source).",
        )
    return usd_per_hour


def add_cost_outputs(stack: Stack, lines: Sequence[CostLine]) -> None:
    """Two outputs: ``IdleClusterUsdPerHour`` (what bills while no job runs: standing node groups included) and
    ``TrainingNodesUsdPerHour`` (what a running job adds: the nodes Karpenter launches for it; 0 when every training
    node stands), each the sum of the lines with a price; the description lists every line and names what the sum
    lacks."""
    region = stack_region(stack) or "the stack's region"
    for id_, idle, title in (
        ("IdleClusterUsdPerHour", True, "Idle cluster"),
        ("TrainingNodesUsdPerHour", False, "Training nodes"),
    ):
        group = [line for line in lines if line.idle is idle]
        summed = total(group)
        parts = (
            "; ".join(
                f"{line.component} ({line.quantity}) "
                + ("no verified price" if line.usd_per_hour is None else f"{line.usd_per_hour:.3f}")
                for line in group
            )
            or "nothing (every training node stands and is counted in IdleClusterUsdPerHour)"
        )
        lacking = f" Lower bound: without {', '.join(summed.missing)}." if summed.missing else ""
        CfnOutput(
            stack,
            id_,
            value=f"{summed.usd_per_hour:.2f}",
            description=f"{title}, on-demand USD per hour in {region}: {parts}.{lacking}"[:1024],
        )
