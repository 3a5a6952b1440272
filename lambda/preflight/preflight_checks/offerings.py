"""The nodes' AZ, instance type and its offering in that AZ."""

from __future__ import annotations

import re
from typing import Any, List, Mapping, Optional

from botocore.exceptions import BotoCoreError, ClientError

from .aws_context import AwsContext
from .results import FAIL, PASS, CannotCheck, CheckResult


def check_availability_zone(context: AwsContext, zone_id: str) -> CheckResult:
    """The AZ ID is one of the region's, available and opted in (``ec2:DescribeAvailabilityZones`` with the
    ``zone-id`` filter and ``AllAvailabilityZones``; EC2 API reference, DescribeAvailabilityZones). AZ IDs name the
    same zone in every account (AWS RAM user guide, "Availability Zone IDs for your AWS resources")."""
    name = f"availability-zone/{zone_id}"
    zones = context.call(
        "ec2",
        "describe_availability_zones",
        Filters=[{"Name": "zone-id", "Values": [zone_id]}],
        AllAvailabilityZones=True,
    ).get("AvailabilityZones", [])
    if not zones:
        context.zones_not_in_region.add(zone_id)
        home = context.plan.get("region") if context.plan.get("region") != context.region else None
        home = home or region_of_zone_id(zone_id)
        where = f"deploy to {home} or set availabilityZoneId" if home else "set availabilityZoneId"
        return CheckResult(
            name,
            FAIL,
            f"{zone_id} is not an AZ of {context.region}",
            f"{where} to an AZ ID of {context.region}",
        )
    zone = zones[0]
    opt_in = zone.get("OptInStatus", "opt-in-not-required")
    if opt_in == "not-opted-in":
        return CheckResult(
            name, FAIL, f"{zone_id} ({zone.get('ZoneName')}) is not opted in", f"opt in to {zone.get('GroupName')}"
        )
    if zone.get("State", "available") != "available":
        return CheckResult(
            name,
            FAIL,
            f"{zone_id} ({zone.get('ZoneName')}) is {zone.get('State')}",
            "wait until it is available, or set availabilityZoneId to another AZ ID",
        )
    return CheckResult(name, PASS, f"{zone_id} is {zone.get('ZoneName')}, available, in {context.region}")


def region_of_zone_id(zone_id: str) -> Optional[str]:
    """The region an AZ ID's prefix names (``usw2-az4`` -> ``us-west-2``), or None when it is not of that form. AZ
    IDs begin with the region's short code (AWS RAM user guide, "Availability Zone IDs"); the decoding is a
    convention, used only in advice."""
    match = re.fullmatch(r"([a-z]{2})(ne|nw|se|sw|e|w|n|s|c)(\d+)-az\d+", zone_id)
    if not match:
        return None
    directions = {
        "e": "east",
        "w": "west",
        "n": "north",
        "s": "south",
        "c": "central",
        "ne": "northeast",
        "nw": "northwest",
        "se": "southeast",
        "sw": "southwest",
    }
    area, direction, number = match.groups()
    return f"{area}-{directions[direction]}-{number}"


def check_instance_type(context: AwsContext, node: Mapping[str, Any]) -> CheckResult:
    """The instance type exists in the region and has the EFA devices the plan gives each node
    (``ec2:DescribeInstanceTypes``: ``NetworkInfo.EfaSupported``, ``NetworkInfo.EfaInfo.MaximumEfaInterfaces``;
    EC2 user guide, "Elastic Fabric Adapter", supported instance types)."""
    name = f"instance-type/{node['name']}"
    instance_type = node["instanceType"]
    facts = context.instance_type(instance_type)
    if facts is None:
        return CheckResult(
            name,
            FAIL,
            f"EC2 does not know {instance_type} in {context.region}",
            "choose an instance type the region has (aws ec2 describe-instance-types)",
        )
    network = facts.get("NetworkInfo", {})
    wanted = node["efaInterfaces"]
    most = int(network.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)) if network.get("EfaSupported") else 0
    vcpus = facts.get("VCpuInfo", {}).get("DefaultVCpus")
    if wanted > most:
        has = f"at most {most} EFA interfaces" if most else "no EFA"
        return CheckResult(
            name,
            FAIL,
            f"{instance_type} has {has}; the plan gives each node {wanted}",
            f"use an instance type with {wanted} EFA interfaces, or fewer EFA interfaces",
        )
    efa = f", {wanted} of {most} EFA interfaces" if wanted else ""
    return CheckResult(name, PASS, f"{instance_type}: {vcpus} vCPUs{efa}")


def check_offering(context: AwsContext, node: Mapping[str, Any]) -> Optional[CheckResult]:
    """The instance type is offered in the node's AZ ID (``ec2:DescribeInstanceTypeOfferings``, ``LocationType``
    ``availability-zone-id``, filters ``instance-type`` and ``location``, all pages), or in the region when the
    nodes span several AZs (``LocationType`` ``region``). EC2 API reference, DescribeInstanceTypeOfferings."""
    name = f"offering/{node['name']}"
    instance_type = node["instanceType"]
    zone_id = node["availabilityZoneId"]
    if zone_id is None:
        offerings = context.pages(
            "ec2",
            "describe_instance_type_offerings",
            "InstanceTypeOfferings",
            LocationType="region",
            Filters=[{"Name": "instance-type", "Values": [instance_type]}],
        )
        if offerings:
            return CheckResult(name, PASS, f"{instance_type} is offered in {context.region}")
        return CheckResult(
            name, FAIL, f"{instance_type} is not offered in {context.region}", "choose another type or region"
        )
    if zone_id in context.zones_not_in_region:
        return None  # availability-zone/<zone> fails already
    offerings = context.pages(
        "ec2",
        "describe_instance_type_offerings",
        "InstanceTypeOfferings",
        LocationType="availability-zone-id",
        Filters=[
            {"Name": "instance-type", "Values": [instance_type]},
            {"Name": "location", "Values": [zone_id]},
        ],
    )
    if any(offering.get("Location") == zone_id for offering in offerings):
        return CheckResult(name, PASS, f"{instance_type} is offered in {zone_id}")
    elsewhere = _zones_offering(context, instance_type)
    advice = (
        f"set availabilityZoneId to one of {', '.join(elsewhere)}"
        if elsewhere
        else f"{context.region} offers {instance_type} in no AZ: choose another region or instance type"
    )
    return CheckResult(name, FAIL, f"{instance_type} is not offered in {zone_id} ({context.region})", advice)


def _zones_offering(context: AwsContext, instance_type: str) -> List[str]:
    """The AZ IDs of the region that offer ``instance_type`` (empty when that cannot be read)."""
    try:
        offerings = context.pages(
            "ec2",
            "describe_instance_type_offerings",
            "InstanceTypeOfferings",
            LocationType="availability-zone-id",
            Filters=[{"Name": "instance-type", "Values": [instance_type]}],
        )
    except (ClientError, BotoCoreError, CannotCheck):
        return []
    return sorted({offering["Location"] for offering in offerings if offering.get("Location")})
