"""What an update cannot change in place: the Availability Zone of nodes whose subnets the stack creates, and the
size of an FSx for Lustre file system downward. Both compare the plan with the previous deploy's, with no AWS
call, and fail the update in its first minute instead of at the resource that cannot change."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional

from .aws_context import AwsContext
from .results import FAIL, PASS, CheckResult


def _previous_nodes(context: AwsContext, name: str) -> Optional[Mapping[str, Any]]:
    previous = context.previous or {}
    return next((node for node in previous.get("nodes", []) if node.get("name") == name), None)


def moves_zone(context: AwsContext, node: Mapping[str, Any]) -> bool:
    """Whether the zone check applies to ``node``: the previous deploy had nodes of the same name, both plans name
    their AZ ID, and both say the stack itself creates their subnet (``subnetCreated``; an existing subnet, or
    another stack's, is not replaced by this one, and plans of versions before the key do not say)."""
    before = _previous_nodes(context, node["name"])
    return bool(
        before
        and before.get("availabilityZoneId")
        and node.get("availabilityZoneId")
        and before.get("subnetCreated")
        and node.get("subnetCreated")
    )


def check_zone_move(context: AwsContext, node: Mapping[str, Any]) -> CheckResult:
    """The nodes stay in the AZ ID of the previous deploy. A move replaces the subnets the stack created for them
    (``AvailabilityZoneId`` is create-only), and CloudFormation creates each replacement, with the same CIDR block,
    before it deletes the old subnet: EC2 refuses it (``InvalidSubnet.Conflict``, Amazon EC2 API Reference, Error
    codes), failing the update at its first subnet. The AZ follows the instance types where none is set (the
    default app's ``kubeflowAzId`` and ``composerAzId``), so a new type that the AZ does not offer moves it."""
    name = f"zone-move/{node['name']}"
    before = _previous_nodes(context, node["name"])
    assert before is not None
    old, new = before["availabilityZoneId"], node["availabilityZoneId"]
    types = ", ".join(sorted({nodes["instanceType"] for nodes in context.plan["nodes"]}))
    if old == new:
        return CheckResult(name, PASS, f"{node['name']} stay in {new}")
    return CheckResult(
        name,
        FAIL,
        f"{node['name']} would move from {old} to {new} (the plan's instance types: {types}): the stack's subnets "
        f"would be replaced with their CIDR blocks, which EC2 refuses while the old subnets stand "
        f"(InvalidSubnet.Conflict)",
        f"keep {old}: set the nodes' AZ ID to {old} (trainiumAzId, kubeflowAzId or composerAzId in the default app) "
        f"with instance types {old} offers; to move, destroy the stack (its file system is retained) and deploy it "
        f"again in {new}",
    )


def lustre_sizes(plan: Optional[Mapping[str, Any]]) -> List[int]:
    """The storage of each FSx for Lustre file system of ``plan``, in GiB, in the plan's order."""
    return [int(fs["storageGib"]) for fs in (plan or {}).get("fileSystems", []) if fs.get("kind") == "lustre"]


def check_lustre_growth(context: AwsContext, index: int) -> CheckResult:
    """The ``index``-th FSx for Lustre file system of the plan is at least as large as the previous deploy's: FSx
    for Lustre storage can only be increased (FSx for Lustre user guide, "Managing storage capacity": "You can only
    increase the amount of storage capacity"), so a smaller size fails the update at the file system."""
    name = f"lustre-storage/{index}"
    old, new = lustre_sizes(context.previous)[index], lustre_sizes(context.plan)[index]
    if new >= old:
        return CheckResult(name, PASS, f"{new} GiB, from {old} GiB")
    return CheckResult(
        name,
        FAIL,
        f"{new} GiB is less than the file system's {old} GiB: FSx for Lustre storage only grows",
        f"keep {old} GiB or more (lustreStorageGiB in the default app)",
    )
