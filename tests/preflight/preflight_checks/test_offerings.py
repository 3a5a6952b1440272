"""The AZ, the instance type and its offering, against moto."""

from __future__ import annotations

from tests.support.preflight_aws import aws_context as _context
from tests.support.preflight_aws import by_check
from tests.support.preflight_aws import node as _node
from tests.support.preflight_aws import plan as _plan


def test_the_az_id_and_the_offering_pass_in_the_plans_region(checks, aws, mixed):
    context = _context(checks, mixed)
    zone = checks.check_availability_zone(context, "usw2-az4")
    assert (zone.status, zone.message) == ("pass", "usw2-az4 is us-west-2d, available, in us-west-2")
    assert checks.check_offering(context, _node()).status == "pass"


def test_a_wrong_region_is_one_clear_failure(checks, aws, mixed):
    results = checks.run_checks(_plan(kubernetesVersion=None), mixed, region="eu-west-1")
    found = by_check(results)
    zone = found["availability-zone/usw2-az4"]
    assert zone.status == "fail"
    assert zone.message == "usw2-az4 is not an AZ of eu-west-1"
    assert zone.advice.startswith("deploy to us-west-2 or set availabilityZoneId")
    assert "offering/AcceleratedNodes" not in found  # the zone's failure says it all


def test_a_region_agnostic_plan_names_the_region_of_the_az_id(checks, aws, mixed):
    context = _context(checks, mixed, _plan(region=None), region="eu-west-1")
    zone = checks.check_availability_zone(context, "usw2-az4")
    assert zone.advice.startswith("deploy to us-west-2")
    assert checks.region_of_zone_id("apne1-az4") == "ap-northeast-1"
    assert checks.region_of_zone_id("use1-az6") == "us-east-1"
    assert checks.region_of_zone_id("local") is None


def test_an_az_id_without_the_type_fails_naming_those_with_it(checks, aws, mixed):
    result = checks.check_offering(_context(checks, mixed), _node(availabilityZoneId="usw2-az2"))
    assert result.status == "fail"
    assert result.message == "trn1.32xlarge is not offered in usw2-az2 (us-west-2)"
    assert result.advice == "set availabilityZoneId to one of usw2-az1, usw2-az4"


def test_nodes_in_several_azs_are_checked_in_the_region(checks, aws, mixed):
    result = checks.check_offering(_context(checks, mixed), _node(instanceType="m7i.xlarge", availabilityZoneId=None))
    assert (result.status, result.message) == ("pass", "m7i.xlarge is offered in us-west-2")


def test_offerings_are_read_over_every_page(checks, mixed):
    ec2 = mixed.stub("ec2")
    expected = {
        "LocationType": "availability-zone-id",
        "Filters": [
            {"Name": "instance-type", "Values": ["trn1.32xlarge"]},
            {"Name": "location", "Values": ["usw2-az4"]},
        ],
    }
    ec2.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": [], "NextToken": "p2"}, expected)
    offering = {"InstanceType": "trn1.32xlarge", "LocationType": "availability-zone-id", "Location": "usw2-az4"}
    ec2.add_response(
        "describe_instance_type_offerings", {"InstanceTypeOfferings": [offering]}, {**expected, "NextToken": "p2"}
    )
    result = checks.check_offering(_context(checks, mixed), _node())
    assert result.status == "pass"
    mixed.assert_no_pending_responses()


def test_the_instance_type_has_the_plans_efa_interfaces(checks, aws, mixed):
    context = _context(checks, mixed)
    assert checks.check_instance_type(context, _node()).message == "trn1.32xlarge: 128 vCPUs, 8 of 8 EFA interfaces"
    too_many = checks.check_instance_type(context, _node(efaInterfaces=16))
    assert (too_many.status, too_many.message) == (
        "fail",
        "trn1.32xlarge has at most 8 EFA interfaces; the plan gives each node 16",
    )
    no_efa = checks.check_instance_type(context, _node(instanceType="m5.large", efaInterfaces=1))
    assert no_efa.status == "fail" and "m5.large has no EFA" in no_efa.message
    unknown = checks.check_instance_type(context, _node(instanceType="trn9.99xlarge"))
    assert (unknown.status, unknown.message) == ("fail", "EC2 does not know trn9.99xlarge in us-west-2")
