"""Capacity reservations and Capacity Blocks, and what an On-Demand gang in a placement group may meet."""

from __future__ import annotations

from typing import Any, List, Mapping

from botocore.exceptions import ClientError

from .aws_context import AwsContext, error_code
from .results import FAIL, PASS, UNKNOWN, CannotCheck, CheckResult, date_text

_RESERVATION_WAITING = frozenset({"scheduled", "payment-pending", "pending", "assessing", "delayed"})
_RESERVATION_GONE = frozenset(
    {"expired", "cancelled", "cancelling", "failed", "payment-failed", "unsupported", "unavailable"}
)


def check_capacity_reservation(context: AwsContext, node: Mapping[str, Any]) -> CheckResult:
    """The Capacity Block or On-Demand Capacity Reservation can hold the nodes (``ec2:DescribeCapacityReservations``:
    ``InstanceType``, ``AvailabilityZoneId``, ``InstancePlatform``, ``TotalInstanceCount``,
    ``AvailableInstanceCount``, ``State``, ``ReservationType``, ``StartDate``; EC2 API reference, CapacityReservation).

    Instances launch only into an ``active`` reservation: a Capacity Block's instances run only inside its time window
    (EC2 user guide, "Capacity Blocks for ML"; launches before the start date get an insufficient-capacity error,
    EC2 user guide, "Tutorial: Configure your EC2 Fleet to launch instances into Capacity Blocks"). A reservation not
    yet started (``scheduled``, ``payment-pending``, ``pending``, ``assessing``, ``delayed``) passes for nodes that
    Karpenter launches when pods ask for them (they launch from the start date), and fails for a managed node group
    (``"provisioning": "node-group"``), whose nodes are launched during the deploy. An ended one fails.
    """
    name = f"capacity-reservation/{node['name']}"
    reservation_id = node["capacityReservationId"]
    try:
        found = context.call("ec2", "describe_capacity_reservations", CapacityReservationIds=[reservation_id]).get(
            "CapacityReservations", []
        )
    except ClientError as error:
        if not error_code(error).startswith("InvalidCapacityReservationId"):
            raise
        found = []
    if not found:
        return CheckResult(
            name,
            FAIL,
            f"{reservation_id} is not a capacity reservation of this account in {context.region}",
            "give the ID of a Capacity Block or Capacity Reservation of this account and region (or one shared "
            "with it)",
        )
    reservation = found[0]
    problems: List[str] = []
    if reservation.get("InstanceType") != node["instanceType"]:
        problems.append(f"it holds {reservation.get('InstanceType')}, the nodes are {node['instanceType']}")
    zone_id = node["availabilityZoneId"]
    if zone_id and reservation.get("AvailabilityZoneId") != zone_id:
        problems.append(f"it is in {reservation.get('AvailabilityZoneId')}, the nodes in {zone_id}")
    platform = reservation.get("InstancePlatform")
    if platform and platform != "Linux/UNIX":
        problems.append(f"its platform is {platform}; EKS nodes' AMIs are Linux/UNIX")
    reservation_type = reservation.get("ReservationType") or "default"
    if node["capacityType"] == "capacity-block" and reservation_type != "capacity-block":
        problems.append("it is an On-Demand Capacity Reservation, not a Capacity Block (capacityType reservation)")
    if node["capacityType"] == "reservation" and reservation_type == "capacity-block":
        problems.append("it is a Capacity Block, not an On-Demand Capacity Reservation (capacityType capacity-block)")
    total = int(reservation.get("TotalInstanceCount") or 0)
    available = int(reservation.get("AvailableInstanceCount") or 0)
    if total < node["count"]:
        problems.append(f"it holds {total} instances, the plan launches up to {node['count']}")
    state = reservation.get("State", "")
    kind = "Capacity Block" if reservation_type == "capacity-block" else "Capacity Reservation"
    if state in _RESERVATION_GONE:
        problems.append(f"its state is {state}")
    if problems:
        return CheckResult(
            name,
            FAIL,
            f"{kind} {reservation_id}: " + "; ".join(problems),
            "fix the reservation ID, instance type, AZ or node count so that they match the reservation",
        )
    start, end = date_text(reservation.get("StartDate")), date_text(reservation.get("EndDate"))
    window = f" until {end}" if end else ""
    if state in _RESERVATION_WAITING:
        if node.get("provisioning") == "node-group":
            return CheckResult(
                name,
                FAIL,
                f"{kind} {reservation_id} is {state}: it starts {start or 'later'}{window}, and the managed node "
                f"group launches its {node['count']} nodes during the deploy",
                f"deploy after {start or 'it starts'}, or launch the nodes with Karpenter (provisioning karpenter)",
            )
        return CheckResult(
            name,
            PASS,
            f"{kind} {reservation_id} is {state}: nodes can launch from {start or 'its start'}{window}; Karpenter "
            "launches them when pods ask for them, so the deploy does not wait for it",
        )
    if state != "active":
        raise CannotCheck(f"{kind} {reservation_id} is in state {state!r}, which this preflight does not know")
    held = reservation.get("InstanceType")
    message = f"{kind} {reservation_id} is active{window}: {available} of {total} {held} free"
    if available < node["count"]:
        if context.previous is not None:
            return CheckResult(
                name,
                UNKNOWN,
                message + f"; the plan launches up to {node['count']} (some in use may be this stack's own nodes)",
                "check that the instances using it are this stack's nodes",
            )
        return CheckResult(
            name,
            FAIL,
            message + f"; the plan launches up to {node['count']}",
            "stop the other instances running in it, or lower the node count",
        )
    return CheckResult(name, PASS, message)


def check_gang_capacity(context: AwsContext, node: Mapping[str, Any]) -> CheckResult:
    """Whether all the nodes of an on-demand gang fit in its cluster placement group cannot be checked ahead: EC2 has
    no call that answers it, only the launch does (and may place some of the nodes), and its own advice is to
    reserve capacity in the group (EC2 user guide, "Placement group rules and limitations": "If you plan to launch
    instances into a cluster placement group, we recommend that you reserve capacity explicitly in the cluster
    placement group"). Always ``unknown``, in one line, with what happens when EC2 refuses part of the gang."""
    count, instance_type = node["count"], node["instanceType"]
    if node.get("provisioning", "karpenter") == "node-group":
        then = "the node group's creation fails the deploy if EC2 refuses any of them"
    else:
        then = (
            "a gang EC2 refuses in part gives back the nodes it holds and tries again (its release's "
            "capacity-timeout, 30 minutes by default, 3 attempts)"
        )
    return CheckResult(
        f"gang-capacity/{node['name']}",
        UNKNOWN,
        f"no EC2 call says ahead whether {count} x {instance_type} fit in one cluster placement group on demand; "
        f"{then}",
        "to be sure of them, reserve them: a Capacity Block or an ODCR in the placement group "
        "(NodeCapacity.capacity_block / capacity_reservation)",
    )
