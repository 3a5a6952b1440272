"""The free addresses of an existing subnet, against moto."""

from __future__ import annotations

import pytest

from tests.support.preflight_aws import aws_context as _context
from tests.support.preflight_aws import node as _node
from tests.support.preflight_aws import plan as _plan


@pytest.fixture
def subnets(aws):
    """Two /24 subnets of a new VPC in us-west-2: one in usw2-az4 (us-west-2d), one in usw2-az2 (us-west-2a)."""
    import boto3

    ec2 = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="t", aws_secret_access_key="t")
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    az4 = ec2.create_subnet(VpcId=vpc, CidrBlock="10.20.1.0/24", AvailabilityZone="us-west-2d")["Subnet"]
    az2 = ec2.create_subnet(VpcId=vpc, CidrBlock="10.20.2.0/24", AvailabilityZone="us-west-2a")["Subnet"]
    assert (az4["AvailabilityZoneId"], az4["AvailableIpAddressCount"]) == ("usw2-az4", 251)
    yield {"az4": az4["SubnetId"], "az2": az2["SubnetId"]}
    ec2.delete_subnet(SubnetId=az4["SubnetId"])
    ec2.delete_subnet(SubnetId=az2["SubnetId"])
    ec2.delete_vpc(VpcId=vpc)


def test_free_addresses_cover_each_node_and_a_warm_interface(checks, mixed, subnets):
    # trn1.32xlarge: 50 addresses per interface; each node takes 1 + 50.
    fits = _plan(_node(subnetId=subnets["az4"], count=4))
    result = checks.check_subnet_addresses(_context(checks, mixed, fits), subnets["az4"])
    assert result.status == "pass"
    assert result.message == f"{subnets['az4']} (usw2-az4) has 251 free IPv4 addresses; AcceleratedNodes take 204"
    short = _plan(_node(subnetId=subnets["az4"], count=4), _node(name="More", subnetId=subnets["az4"], count=1))
    result = checks.check_subnet_addresses(_context(checks, mixed, short), subnets["az4"])
    assert result.status == "fail"
    assert result.message.endswith("AcceleratedNodes, More take 255: 4 short")
    # On an update the previous deploy's nodes may hold addresses: not a failure.
    previous = _plan(_node(subnetId=subnets["az4"], count=4))
    result = checks.check_subnet_addresses(_context(checks, mixed, short, previous=previous), subnets["az4"])
    assert result.status == "unknown"


def test_a_subnet_in_another_az_or_missing_fails(checks, mixed, subnets):
    plan = _plan(_node(subnetId=subnets["az2"]))
    result = checks.check_subnet_addresses(_context(checks, mixed, plan), subnets["az2"])
    assert (result.status, result.message) == (
        "fail",
        f"{subnets['az2']} is in usw2-az2, but AcceleratedNodes launch in usw2-az4",
    )
    missing = checks.check_subnet_addresses(_context(checks, mixed), "subnet-0123456789abcdef0")
    assert (missing.status, missing.message) == ("fail", "subnet-0123456789abcdef0 is not a subnet of us-west-2")
