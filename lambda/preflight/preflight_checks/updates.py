"""What an update cannot change in place: the Availability Zone of nodes whose subnets the stack creates, and the
deployment type of an FSx for Lustre file system and its size downward. Both compare the plan with the previous
deploy's, with no AWS call, and fail the update in its first minute instead of at the resource that cannot change."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Tuple

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
    if old == new:
        return CheckResult(name, PASS, f"{node['name']} stay in {new}")
    return CheckResult(
        name,
        FAIL,
        f"{node['name']} would move from {old} to {new} (their instance type: {node['instanceType']}): the stack's "
        f"subnets would be replaced with their CIDR blocks, which EC2 refuses while the old subnets stand "
        f"(InvalidSubnet.Conflict)",
        f"keep {old}: give the nodes the AZ ID {old} (in the default app: trainiumAzId, kubeflowAzId or composerAzId) "
        f"and an instance type that {old} offers; to move, destroy the stack (its file system is retained) and "
        f"deploy it again in {new}",
    )


def _lustre(plan: Optional[Mapping[str, Any]]) -> List[Mapping[str, Any]]:
    return [fs for fs in (plan or {}).get("fileSystems", []) if fs.get("kind") == "lustre"]


def lustre_pairs(context: AwsContext) -> List[Tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """The FSx for Lustre file systems of the plan that the previous deploy had, as (name, before, now): paired by
    ``name`` (the construct's path in the stack, from which its logical ID comes, so the same file system). Plans of
    versions before the key name none; those pair only when each plan has one file system."""
    before, now = _lustre(context.previous), _lustre(context.plan)
    if all("name" in fs for fs in before + now):
        previous = {fs["name"]: fs for fs in before}
        return [(fs["name"], previous[fs["name"]], fs) for fs in now if fs["name"] in previous]
    if len(before) == len(now) == 1:
        return [(now[0].get("name") or before[0].get("name") or "0", before[0], now[0])]
    return []


def check_lustre_growth(context: AwsContext, name: str) -> CheckResult:
    """The FSx for Lustre file system ``name`` keeps its deployment type, and its size or grows, and a SCRATCH_1 file
    system keeps it (the deployed file system's type decides: FSx changes that one).
    CloudFormation changes ``StorageCapacity`` and ``LustreConfiguration`` in place (neither is among
    ``AWS::FSx::FileSystem``'s createOnlyProperties in the CloudFormation registry schema) by FSx's UpdateFileSystem,
    which only increases storage, and not for SCRATCH_1 (FSx API Reference, UpdateFileSystem, ``StorageCapacity``: for
    SCRATCH_2, PERSISTENT_1 and PERSISTENT_2 SSD the value must be greater than the current capacity), and cannot
    change the deployment type at all (its ``UpdateFileSystemLustreConfiguration`` has no ``DeploymentType``; the
    create's configuration has), so any other change fails the update at the file system."""
    check = f"lustre-storage/{name}"
    _, before, now = next(pair for pair in lustre_pairs(context) if pair[0] == name)
    old_type, new_type = before.get("deploymentType"), now.get("deploymentType")
    if old_type and new_type and old_type != new_type:
        return CheckResult(
            check,
            FAIL,
            f"the file system is {old_type} and the plan makes it {new_type}: FSx cannot change a Lustre file "
            f"system's deployment type (UpdateFileSystem has no DeploymentType)",
            f"keep {old_type}; for another type, add a second file system (another construct id) and copy the data "
            "to it, or destroy the stack (its file system is retained) and deploy it again",
        )
    old, new = int(before["storageGib"]), int(now["storageGib"])
    if new == old or (new > old and before.get("deploymentType") != "SCRATCH_1"):
        return CheckResult(check, PASS, f"{new} GiB, from {old} GiB")
    if new > old:
        reason = "the storage of a SCRATCH_1 file system cannot change"
    else:
        reason = f"{new} GiB is less than the file system's {old} GiB: FSx for Lustre storage only grows"
    return CheckResult(
        check, FAIL, reason, f"keep {old} GiB{'' if new > old else ' or more'} (lustreStorageGiB in the default app)"
    )
