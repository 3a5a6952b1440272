"""NodeCapacity: how the instances of a node group are bought."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Optional

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks

from trainium_eks.core.validation import Problems, is_concrete

_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{8,17}$")


class CapacityKind(Enum):
    """The three ways a managed node group can buy accelerated instances."""

    ON_DEMAND = "on-demand"
    CAPACITY_BLOCK = "capacity-block"
    CAPACITY_RESERVATION = "capacity-reservation"


@dataclass(frozen=True)
class NodeCapacity:
    """How a node group buys its instances: on demand, from an EC2 Capacity Block for ML, or from an On-Demand
    Capacity Reservation. Build one with :meth:`on_demand`, :meth:`capacity_block` or :meth:`capacity_reservation`.

    - On demand: node group capacity type ``ON_DEMAND``; open reservations of the account still apply.
    - Capacity Block for ML: capacity type ``CAPACITY_BLOCK``; the launch template targets the block's reservation
      id with market type ``capacity-block``. Instances run only inside the block's time window.
    - On-Demand Capacity Reservation: capacity type ``ON_DEMAND``; the launch template targets the reservation id,
      so instances launch only into it.

    Sources: Amazon EKS user guide, "Create a managed node group with Capacity Blocks for ML"
    (https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html); EC2 user guide, "Launch instances
    into an existing Capacity Reservation" and "Capacity Blocks for ML".
    """

    kind: CapacityKind
    reservation_id: Optional[str] = None

    @classmethod
    def on_demand(cls) -> "NodeCapacity":
        """On-demand instances (the default)."""
        return cls(CapacityKind.ON_DEMAND)

    @classmethod
    def capacity_block(cls, reservation_id: str) -> "NodeCapacity":
        """Instances of the EC2 Capacity Block for ML whose reservation id (``cr-...``) is given."""
        return cls(CapacityKind.CAPACITY_BLOCK, reservation_id)

    @classmethod
    def capacity_reservation(cls, reservation_id: str) -> "NodeCapacity":
        """Instances of the On-Demand Capacity Reservation whose id (``cr-...``) is given."""
        return cls(CapacityKind.CAPACITY_RESERVATION, reservation_id)

    @property
    def eks_capacity_type(self) -> eks.CapacityType:
        """The node group's capacity type."""
        if self.kind is CapacityKind.CAPACITY_BLOCK:
            return eks.CapacityType.CAPACITY_BLOCK
        return eks.CapacityType.ON_DEMAND

    def capacity_reservation_specification(
        self,
    ) -> Optional[ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty]:
        """The launch template's reservation target, or None on demand."""
        if self.kind is CapacityKind.ON_DEMAND:
            return None
        return ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty(
            capacity_reservation_target=ec2.CfnLaunchTemplate.CapacityReservationTargetProperty(
                capacity_reservation_id=self.reservation_id
            )
        )

    def instance_market_options(self) -> Optional[ec2.CfnLaunchTemplate.InstanceMarketOptionsProperty]:
        """The launch template's market options: ``capacity-block`` for a Capacity Block, else None."""
        if self.kind is CapacityKind.CAPACITY_BLOCK:
            return ec2.CfnLaunchTemplate.InstanceMarketOptionsProperty(market_type="capacity-block")
        return None

    def check(self, problems: Problems, setting: str = "capacity") -> None:
        """Record a problem when the kind is not a :class:`CapacityKind` or a reservation id is missing or
        malformed."""
        if not isinstance(self.kind, CapacityKind):
            kinds = ", ".join(f"NodeCapacity.{kind.name.lower()}()" for kind in CapacityKind)
            problems.add(setting, self.kind, f"a NodeCapacity made by {kinds}")
            return
        if self.kind is CapacityKind.ON_DEMAND:
            return
        if (
            not isinstance(self.reservation_id, str)
            or not self.reservation_id
            or (is_concrete(self.reservation_id) and not _RESERVATION_ID.fullmatch(self.reservation_id))
        ):
            problems.add(
                setting,
                self.reservation_id,
                f"a {self.kind.value} needs its reservation id, like cr-0123456789abcdef0",
            )
