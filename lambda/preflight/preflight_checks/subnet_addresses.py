"""The free IPv4 addresses of an existing subnet, against what the nodes placed in it take."""

from __future__ import annotations

from typing import Any, Mapping

from botocore.exceptions import ClientError

from .aws_context import AwsContext, error_code
from .results import FAIL, PASS, UNKNOWN, CannotCheck, CheckResult


def node_addresses(context: AwsContext, node: Mapping[str, Any]) -> int:
    """The IPv4 addresses of the subnet that ``node['count']`` nodes take: per node, one primary address for each
    interface that takes one (``ipInterfaces``), plus one interface's worth of warm addresses
    (``NetworkInfo.Ipv4AddressesPerInterface``), since the VPC CNI's default ``WARM_ENI_TARGET=1`` keeps "a full ENI"
    of available IPs on each node (aws/amazon-vpc-cni-k8s, ``docs/eni-and-ip-target.md``). A lower bound: pods beyond
    the first interface's addresses make the CNI attach more."""
    facts = context.instance_type(node["instanceType"])
    if facts is None:
        raise CannotCheck(f"{node['instanceType']} is not an instance type of {context.region}")
    per_interface = int(facts.get("NetworkInfo", {}).get("Ipv4AddressesPerInterface", 0))
    return node["count"] * (node["ipInterfaces"] + per_interface)


def check_subnet_addresses(context: AwsContext, subnet_id: str) -> CheckResult:
    """The existing subnet is in the nodes' AZ ID and has the free IPv4 addresses every node group placed in it takes
    (``ec2:DescribeSubnets``: ``AvailabilityZoneId``, ``AvailableIpAddressCount``; :func:`node_addresses`)."""
    name = f"subnet-addresses/{subnet_id}"
    nodes = [node for node in context.plan["nodes"] if node["subnetId"] == subnet_id]
    try:
        subnets = context.call("ec2", "describe_subnets", SubnetIds=[subnet_id]).get("Subnets", [])
    except ClientError as error:
        if error_code(error) != "InvalidSubnetID.NotFound":
            raise
        subnets = []
    if not subnets:
        return CheckResult(
            name, FAIL, f"{subnet_id} is not a subnet of {context.region}", "give an existing subnet of the region"
        )
    subnet = subnets[0]
    wrong = [
        f"{node['name']} launch in {node['availabilityZoneId']}"
        for node in nodes
        if node["availabilityZoneId"] and node["availabilityZoneId"] != subnet.get("AvailabilityZoneId")
    ]
    if wrong:
        return CheckResult(
            name,
            FAIL,
            f"{subnet_id} is in {subnet.get('AvailabilityZoneId')}, but " + ", ".join(wrong),
            "give a subnet of the nodes' AZ ID, or set availabilityZoneId to the subnet's",
        )
    needed = sum(node_addresses(context, node) for node in nodes)
    free = int(subnet.get("AvailableIpAddressCount", 0))
    previous = sum(
        node_addresses(context, node)
        for node in (context.previous or {}).get("nodes", [])
        if node.get("subnetId") == subnet_id and context.instance_type(node["instanceType"]) is not None
    )
    names = ", ".join(node["name"] for node in nodes)
    message = f"{subnet_id} ({subnet.get('AvailabilityZoneId')}) has {free} free IPv4 addresses; {names} take {needed}"
    if needed <= free:
        return CheckResult(name, PASS, message)
    # The free count already leaves out what the stack's running nodes hold: on an update they may hold some.
    if needed - min(previous, needed) <= free:
        return CheckResult(
            name,
            UNKNOWN,
            message + f"; it fits only if the previous deploy's nodes hold {needed - free} of them",
            "free addresses in the subnet, or make sure the stack's nodes are running and hold them",
        )
    return CheckResult(
        name,
        FAIL,
        message + f": {needed - free} short",
        "use a larger subnet, fewer nodes, efa-only interfaces (fewer ipInterfaces), or set the VPC CNI's "
        "WARM_IP_TARGET/MINIMUM_IP_TARGET",
    )
