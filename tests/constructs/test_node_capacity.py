"""NodeCapacity: the node group capacity type, launch template targets and reservation-id checks of each kind."""

import aws_cdk as cdk
import pytest
from aws_cdk import aws_eks_v2 as eks

from trainium_eks.constructs.node_capacity import CapacityKind, NodeCapacity
from trainium_eks.core.validation import ConfigurationError, Problems

RESERVATION = "cr-0123456789abcdef0"


def problems_of(capacity, setting="capacity"):
    problems = Problems("nodes")
    capacity.check(problems, setting)
    return list(problems)


def test_on_demand_targets_nothing_and_has_nothing_to_check():
    capacity = NodeCapacity.on_demand()
    assert (capacity.kind, capacity.reservation_id) == (CapacityKind.ON_DEMAND, None)
    assert capacity.eks_capacity_type == eks.CapacityType.ON_DEMAND
    assert capacity.capacity_reservation_specification() is None
    assert capacity.instance_market_options() is None
    assert problems_of(capacity) == []
    assert capacity == NodeCapacity.on_demand(), "a value: node groups compare it to the default"


def test_a_capacity_block_is_its_own_capacity_type_and_market_and_targets_its_reservation():
    capacity = NodeCapacity.capacity_block(RESERVATION)
    assert capacity.kind is CapacityKind.CAPACITY_BLOCK
    assert capacity.eks_capacity_type == eks.CapacityType.CAPACITY_BLOCK
    target = capacity.capacity_reservation_specification().capacity_reservation_target
    assert target.capacity_reservation_id == RESERVATION
    assert capacity.instance_market_options().market_type == "capacity-block"
    assert problems_of(capacity) == []


def test_a_capacity_reservation_is_on_demand_capacity_launched_only_into_the_reservation():
    capacity = NodeCapacity.capacity_reservation(RESERVATION)
    assert capacity.kind is CapacityKind.CAPACITY_RESERVATION
    assert capacity.eks_capacity_type == eks.CapacityType.ON_DEMAND
    target = capacity.capacity_reservation_specification().capacity_reservation_target
    assert target.capacity_reservation_id == RESERVATION
    assert capacity.instance_market_options() is None, "no capacity-block market for an ordinary reservation"
    assert capacity != NodeCapacity.on_demand()


@pytest.mark.parametrize(
    "reservation_id", [None, "", "cr-0123", "cr-0123456789ABCDEF0", "ocr-01234567", RESERVATION * 2]
)
@pytest.mark.parametrize("build", [NodeCapacity.capacity_block, NodeCapacity.capacity_reservation])
def test_a_missing_or_malformed_reservation_id_is_one_problem_naming_the_setting_and_the_kind(build, reservation_id):
    capacity = build(reservation_id)
    assert problems_of(capacity, "trainiumCapacity") == [
        f"trainiumCapacity={reservation_id!r}: a {capacity.kind.value} needs its reservation id, like {RESERVATION}"
    ]
    problems = Problems("Stack/Nodes")
    capacity.check(problems)
    with pytest.raises(ConfigurationError, match=r"^Stack/Nodes: 1 configuration problem:\n  - capacity="):
        problems.raise_if_any()


def test_an_id_of_eight_hex_digits_and_a_token_are_accepted():
    assert problems_of(NodeCapacity.capacity_block("cr-01234567")) == []
    token = cdk.Token.as_string(cdk.Fn.ref("ReservationId"))
    assert problems_of(NodeCapacity.capacity_reservation(token)) == [], "a parameter is only known at deploy"


def test_a_reservation_id_with_a_trailing_newline_and_a_kind_that_is_not_a_capacity_kind_are_refused():
    (problem,) = problems_of(NodeCapacity.capacity_block(RESERVATION + "\n"))
    assert "needs its reservation id" in problem
    (problem,) = problems_of(NodeCapacity("on-demand"))
    assert problem.startswith("capacity='on-demand': a NodeCapacity made by NodeCapacity.on_demand()")
