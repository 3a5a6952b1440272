"""EC2's disjoint subnets of a VPC, on CloudFormation's plan of small templates."""

from __future__ import annotations

from typing import Any, Dict

from rehearsal.subnet_cidrs import conflicting_subnets
from tests.support.destroy import scenario_result

VPC = {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}


def subnet(az_id: str, cidr: str) -> Dict[str, Any]:
    return {
        "Type": "AWS::EC2::Subnet",
        "Properties": {"VpcId": {"Ref": "Vpc"}, "AvailabilityZoneId": az_id, "CidrBlock": cidr},
    }


def template(**subnets: Dict[str, Any]) -> Dict[str, Any]:
    return {"Resources": {"Vpc": VPC, **subnets}}


def test_a_subnet_moved_to_another_zone_with_its_cidr_block_conflicts_with_its_old_copy():
    old = template(Nodes=subnet("usw2-az4", "10.0.128.0/18"))
    (found,) = conflicting_subnets(scenario_result(old, template(Nodes=subnet("usw2-az3", "10.0.128.0/18"))))
    assert found == (
        "step 1 (Create Nodes) asks for 10.0.128.0/18, which its own old copy still holds (10.0.128.0/18): "
        "EC2 refuses it (InvalidSubnet.Conflict)"
    )


def test_a_moved_subnet_with_a_free_block_and_an_unchanged_one_pass():
    old = template(Nodes=subnet("usw2-az4", "10.0.128.0/18"))
    assert conflicting_subnets(scenario_result(old, template(Nodes=subnet("usw2-az3", "10.0.192.0/18")))) == []
    assert conflicting_subnets(scenario_result(old, old)) == []


def test_a_new_subnet_overlapping_another_that_stands_conflicts():
    old = template(Nodes=subnet("usw2-az4", "10.0.128.0/18"))
    new = template(Nodes=subnet("usw2-az4", "10.0.128.0/18"), More=subnet("usw2-az3", "10.0.160.0/19"))
    (found,) = conflicting_subnets(scenario_result(old, new))
    assert "(Create More) asks for 10.0.160.0/19, which Nodes still holds (10.0.128.0/18)" in found
