"""Subnets as EC2 holds them: no two subnets of a VPC overlap.

``CreateSubnet`` refuses a CIDR block that overlaps one of the VPC's subnets, with ``InvalidSubnet.Conflict`` ("The
specified CIDR block conflicts with that of another subnet in your VPC"; Amazon EC2 API Reference, Error codes,
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html). A subnet whose Availability Zone
changes is replaced (``AvailabilityZone`` and ``AvailabilityZoneId`` are create-only), and CloudFormation creates
the replacement in the update phase, before the cleanup phase deletes the old subnet (:mod:`.cfn_changes`): a
replacement that keeps its CIDR block, or takes one another subnet still holds, fails the update.

:func:`conflicting_subnets` finds those creations in a plan.
"""

from __future__ import annotations

import ipaddress
from typing import List

from rehearsal.scenario import ScenarioResult, deployed_resources

SUBNET = "AWS::EC2::Subnet"

Network = ipaddress.IPv4Network


def conflicting_subnets(result: ScenarioResult) -> List[str]:
    """Every subnet the update phase creates whose CIDR block overlaps a subnet of the same VPC that still stands:
    one of the old deployment the update phase has not deleted (a replaced subnet's old copy stands until the
    cleanup phase), or one created earlier in the plan."""
    standing = {
        logical_id: (str(properties.get("VpcId")), ipaddress.ip_network(properties["CidrBlock"]))
        for logical_id, resource_type, properties in deployed_resources(result, old=True)
        if resource_type == SUBNET and properties.get("CidrBlock")
    }
    found = []
    for index, step in enumerate(result.plan.steps):
        if step.phase != "update" or step.resource_type != SUBNET:
            continue
        if step.operation == "Delete":
            standing.pop(step.logical_id, None)
            continue
        if step.operation != "Create" or not step.properties.get("CidrBlock"):
            continue
        vpc, cidr = str(step.properties.get("VpcId")), ipaddress.ip_network(step.properties["CidrBlock"])
        for other, (other_vpc, other_cidr) in sorted(standing.items()):
            if other_vpc == vpc and cidr.overlaps(other_cidr):
                held = "its own old copy" if other == step.logical_id else other
                found.append(
                    f"step {index + 1} (Create {step.logical_id}) asks for {cidr}, which {held} still holds "
                    f"({other_cidr}): EC2 refuses it (InvalidSubnet.Conflict)"
                )
        standing[f"{step.logical_id} (new)"] = (vpc, cidr)
    return found
