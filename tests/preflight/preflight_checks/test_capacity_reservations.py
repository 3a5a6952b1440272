"""Capacity reservations and Capacity Blocks, and the line of an On-Demand gang in a placement group."""

from __future__ import annotations

from typing import Any, Dict

import pytest

from tests.support.preflight_aws import END, START
from tests.support.preflight_aws import aws_context as _context
from tests.support.preflight_aws import node as _node
from tests.support.preflight_aws import plan as _plan


def _reservation(**overrides: Any) -> Dict[str, Any]:
    reservation = {
        "CapacityReservationId": "cr-0123456789abcdef0",
        "InstanceType": "trn1.32xlarge",
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": "us-west-2d",
        "AvailabilityZoneId": "usw2-az4",
        "TotalInstanceCount": 2,
        "AvailableInstanceCount": 2,
        "State": "active",
        "ReservationType": "capacity-block",
        "StartDate": START,
        "EndDate": END,
    }
    reservation.update(overrides)
    return {key: value for key, value in reservation.items() if value is not None}


def _reservation_result(checks, mixed, node=None, previous=None, error=None, **overrides):
    ec2 = mixed.stub("ec2")
    expected = {"CapacityReservationIds": ["cr-0123456789abcdef0"]}
    if error:
        ec2.add_client_error("describe_capacity_reservations", error, "no such reservation", 400, None, expected)
    else:
        ec2.add_response(
            "describe_capacity_reservations", {"CapacityReservations": [_reservation(**overrides)]}, expected
        )
    node = node or _node(capacityType="capacity-block", capacityReservationId="cr-0123456789abcdef0")
    result = checks.check_capacity_reservation(_context(checks, mixed, _plan(node), previous=previous), node)
    mixed.assert_no_pending_responses()
    return result


def test_an_active_capacity_block_passes(checks, mixed):
    result = _reservation_result(checks, mixed)
    assert (result.status, result.message) == (
        "pass",
        "Capacity Block cr-0123456789abcdef0 is active until 2030-01-20 11:30 UTC: 2 of 2 trn1.32xlarge free",
    )


@pytest.mark.parametrize("state", ["scheduled", "payment-pending"])
def test_a_capacity_block_not_yet_started_passes_for_karpenter(checks, mixed, state):
    result = _reservation_result(checks, mixed, State=state)
    assert result.status == "pass"
    assert f"is {state}: nodes can launch from 2030-01-06 11:30 UTC until 2030-01-20 11:30 UTC" in result.message
    assert "Karpenter launches them when pods ask for them" in result.message


def test_a_capacity_block_not_yet_started_fails_for_a_node_group(checks, mixed):
    node = _node(capacityType="capacity-block", capacityReservationId="cr-0123456789abcdef0", provisioning="node-group")
    result = _reservation_result(checks, mixed, node=node, State="scheduled")
    assert result.status == "fail"
    assert "the managed node group launches its 2 nodes during the deploy" in result.message
    assert result.advice.startswith("deploy after 2030-01-06 11:30 UTC")


@pytest.mark.parametrize("state", ["expired", "cancelled", "failed", "payment-failed"])
def test_an_ended_reservation_fails(checks, mixed, state):
    result = _reservation_result(checks, mixed, State=state)
    assert result.status == "fail" and f"its state is {state}" in result.message


def test_a_reservation_that_does_not_match_the_nodes_fails_with_each_difference(checks, mixed):
    result = _reservation_result(
        checks, mixed, InstanceType="p5.48xlarge", AvailabilityZoneId="usw2-az1", TotalInstanceCount=1,
        ReservationType="default",
    )  # fmt: skip
    assert result.status == "fail"
    for part in (
        "it holds p5.48xlarge, the nodes are trn1.32xlarge",
        "it is in usw2-az1, the nodes in usw2-az4",
        "it is an On-Demand Capacity Reservation, not a Capacity Block",
        "it holds 1 instances, the plan launches up to 2",
    ):
        assert part in result.message


def test_an_unknown_reservation_fails(checks, mixed):
    result = _reservation_result(checks, mixed, error="InvalidCapacityReservationId.NotFound")
    assert (result.status, result.message) == (
        "fail",
        "cr-0123456789abcdef0 is not a capacity reservation of this account in us-west-2",
    )


def test_a_busy_reservation_fails_on_create_and_is_unknown_on_update(checks, mixed):
    node = _node(capacityType="reservation", capacityReservationId="cr-0123456789abcdef0")
    busy = {"ReservationType": "default", "AvailableInstanceCount": 0, "EndDate": None}
    created = _reservation_result(checks, mixed, node=node, **busy)
    assert created.status == "fail" and created.message.startswith(
        "Capacity Reservation cr-0123456789abcdef0 is active: 0 of 2 trn1.32xlarge free"
    )
    updated = _reservation_result(checks, mixed, node=node, previous=_plan(node), **busy)
    assert updated.status == "unknown"


@pytest.mark.parametrize(
    "node, then",
    [
        ({}, "gives back the nodes it holds and tries again"),
        ({"provisioning": "node-group"}, "the node group's creation fails the deploy"),
    ],
)
def test_an_on_demand_gang_in_a_placement_group_is_one_unknown_line_saying_what_happens_when_ec2_refuses_part(
    checks, mixed, node, then
):
    plan = _plan(_node(**node))
    (result,) = [check() for name, check in checks.planned_checks(_context(checks, mixed, plan)) if "gang" in name]
    assert result.status == "unknown" and then in result.message and "\n" not in result.message
    if not node:  # the Lambda cannot import the library: its text must follow the release program's defaults
        from trainium_eks.manifests.jobs.job_release_program import CAPACITY_SETTINGS

        timeout, attempts = CAPACITY_SETTINGS["timeout"][1], CAPACITY_SETTINGS["attempts"][1]
        assert f"{timeout // 60} minutes by default, {attempts} attempts" in result.message
    assert result.message.startswith("no EC2 call says ahead whether 2 x trn1.32xlarge fit in one cluster placement")


@pytest.mark.parametrize(
    "node",
    [
        {"count": 1},
        {"efaInterfaces": 0},
        {"capacityType": "capacity-block", "capacityReservationId": "cr-0123456789abcdef0"},
    ],
    ids=["one node", "no EFA, no placement group", "reserved"],
)
def test_no_gang_line_for_one_node_nodes_without_a_placement_group_or_reserved_nodes(checks, mixed, node):
    names = [name for name, _ in checks.planned_checks(_context(checks, mixed, _plan(_node(**node))))]
    assert not [name for name in names if name.startswith("gang-capacity/")]
