"""own_resources: a stack's own subnets and VPCs, not another stack's of the same logical ID, nor a plain ID."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2

from tests.support.apps import new_app
from trainium_eks.core.own_resources import own_resources


def two_stacks_with_the_same_vpc():
    app = new_app()
    first, second = cdk.Stack(app, "First"), cdk.Stack(app, "Second")
    return first, ec2.Vpc(first, "Vpc", max_azs=1), second, ec2.Vpc(second, "Vpc", max_azs=1)


def test_a_stacks_own_subnet_and_vpc_are_found_in_the_order_asked():
    first, vpc, _, _ = two_stacks_with_the_same_vpc()
    subnet = vpc.private_subnets[0]
    found = own_resources(first, [vpc.vpc_id, subnet.subnet_id, vpc.vpc_id], [ec2.CfnSubnet, ec2.CfnVPC])
    assert [resource.node.path for resource in found] == ["First/Vpc/Resource", "First/Vpc/PrivateSubnet1/Subnet"]


def test_another_stacks_subnet_of_the_same_logical_id_is_not_the_stacks_own():
    first, vpc, second, own_vpc = two_stacks_with_the_same_vpc()
    theirs, ours = vpc.private_subnets[0], own_vpc.private_subnets[0]
    assert second.resolve(theirs.subnet_id) == second.resolve(ours.subnet_id)  # the same Ref in Second
    assert own_resources(second, [theirs.subnet_id], [ec2.CfnSubnet]) == []
    assert [r.node.path for r in own_resources(second, [ours.subnet_id], [ec2.CfnSubnet])] == [
        "Second/Vpc/PrivateSubnet1/Subnet"
    ]


def test_a_plain_id_and_a_resource_of_another_type_are_not_found():
    first, vpc, _, _ = two_stacks_with_the_same_vpc()
    imported = ec2.Subnet.from_subnet_id(first, "Imported", "subnet-0123456789abcdef0")
    assert own_resources(first, [imported.subnet_id, "subnet-1"], [ec2.CfnSubnet]) == []
    assert own_resources(first, [vpc.vpc_id], [ec2.CfnSubnet]) == []
    joined = f"{vpc.private_subnets[0].subnet_id}/x"  # a token inside a longer string refers to nothing as a whole
    assert own_resources(first, [joined], [ec2.CfnSubnet]) == []
