"""The FSx for Lustre and EFS quotas of the file systems a stack creates."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from .aws_context import AwsContext
from .results import FAIL, PASS, UNKNOWN, CheckResult
from .service_quotas import capacity_verdict, service_quota

LUSTRE_QUOTAS: Dict[str, Tuple[Tuple[str, str], Tuple[str, str]]] = {
    "SCRATCH_1": (("L-C48231E5", "Lustre Scratch file systems"), ("L-AD2FC696", "Lustre Scratch storage capacity")),
    "SCRATCH_2": (("L-C48231E5", "Lustre Scratch file systems"), ("L-AD2FC696", "Lustre Scratch storage capacity")),
    "PERSISTENT_1": (
        ("L-9AFA1F09", "Lustre Persistent_1 file systems"),
        ("L-C8640C82", "Lustre Persistent_1 storage capacity"),
    ),
    "PERSISTENT_2": (
        ("L-FD6F2F22", "Lustre Persistent_2 file systems"),
        ("L-8F1B9C74", "Lustre Persistent_2 storage capacity"),
    ),
}
"""FSx for Lustre quotas (Service Quotas code ``fsx``) by deployment type: (file systems, storage capacity in GiB).
Codes and names as Service Quotas' ``ListAWSDefaultServiceQuotas`` answers them for ``fsx`` (read in two public,
agreeing dumps of that answer, not in an AWS document). The use is counted from ``fsx:DescribeFileSystems``."""

EFS_FILE_SYSTEMS_QUOTA = ("L-848C634D", "File systems per account")
"""The EFS quota (Service Quotas code ``elasticfilesystem``), as ``ListAWSDefaultServiceQuotas`` answers it (the same
public dumps); the use is the count of ``elasticfilesystem:DescribeFileSystems``."""


def check_lustre_quotas(context: AwsContext, deployment_type: str) -> CheckResult:
    """FSx for Lustre file systems and storage of one deployment type fit their quotas (:data:`LUSTRE_QUOTAS`): the
    account's Lustre file systems of that type (``fsx:DescribeFileSystems``, all pages: ``FileSystemType`` LUSTRE,
    ``LustreConfiguration.DeploymentType``, ``StorageCapacity`` in GiB, those being deleted left out) plus the plan's.
    FSx API reference, DescribeFileSystems."""
    name = f"fsx-lustre/{deployment_type}"
    (count_code, count_name), (storage_code, storage_name) = LUSTRE_QUOTAS[deployment_type]

    def planned(plan: Optional[Mapping[str, Any]]) -> Tuple[int, int]:
        systems = [
            fs
            for fs in (plan or {}).get("fileSystems", [])
            if fs.get("kind") == "lustre" and fs.get("deploymentType") == deployment_type
        ]
        return len(systems), sum(int(fs.get("storageGib", 0)) for fs in systems)

    needed_count, needed_storage = planned(context.plan)
    previous_count, previous_storage = planned(context.previous)
    existing = [
        fs
        for fs in context.pages("fsx", "describe_file_systems", "FileSystems")
        if fs.get("FileSystemType") == "LUSTRE"
        and fs.get("Lifecycle") != "DELETING"
        and (fs.get("LustreConfiguration") or {}).get("DeploymentType") == deployment_type
    ]
    used_count, used_storage = len(existing), sum(int(fs.get("StorageCapacity", 0)) for fs in existing)
    count_limit = float(service_quota(context, "fsx", count_code)["Value"])
    storage_limit = float(service_quota(context, "fsx", storage_code)["Value"])
    verdicts = [
        (
            capacity_verdict(used=used_count, needed=needed_count, limit=count_limit, previous=previous_count),
            f"{count_name} ({count_code}): {used_count} + {needed_count} of {count_limit:g}",
            count_code,
            used_count + needed_count,
        ),
        (
            capacity_verdict(used=used_storage, needed=needed_storage, limit=storage_limit, previous=previous_storage),
            f"{storage_name} ({storage_code}): {used_storage} GiB + {needed_storage} GiB of {storage_limit:g} GiB",
            storage_code,
            used_storage + needed_storage,
        ),
    ]
    message = "; ".join(text for _, text, _, _ in verdicts)
    failed = [(code, desired) for verdict, _, code, desired in verdicts if verdict == FAIL]
    if failed:
        advice = "; ".join(
            f"aws service-quotas request-service-quota-increase --region {context.region} --service-code fsx "
            f"--quota-code {code} --desired-value {desired}"
            for code, desired in failed
        )
        return CheckResult(name, FAIL, message, "delete unused file systems, or " + advice)
    if any(verdict == UNKNOWN for verdict, *_ in verdicts):
        return CheckResult(
            name, UNKNOWN, message + " (fits only if the previous deploy's file system is among them)", ""
        )
    return CheckResult(name, PASS, message)


def check_efs_file_systems(context: AwsContext) -> CheckResult:
    """The account's EFS file systems in the region (``elasticfilesystem:DescribeFileSystems``, all pages) plus the
    plan's fit the quota ``File systems per account`` (:data:`EFS_FILE_SYSTEMS_QUOTA`). EFS API reference,
    DescribeFileSystems; EFS user guide, "Amazon EFS quotas"."""
    name = "efs-file-systems"
    code, quota_name = EFS_FILE_SYSTEMS_QUOTA

    def planned(plan: Optional[Mapping[str, Any]]) -> int:
        return sum(1 for fs in (plan or {}).get("fileSystems", []) if fs.get("kind") == "efs")

    existing = [
        fs
        for fs in context.pages("efs", "describe_file_systems", "FileSystems")
        if fs.get("LifeCycleState") not in ("deleting", "deleted")
    ]
    limit = float(service_quota(context, "elasticfilesystem", code)["Value"])
    needed = planned(context.plan)
    verdict = capacity_verdict(used=len(existing), needed=needed, limit=limit, previous=planned(context.previous))
    message = f"{quota_name} ({code}): {len(existing)} + {needed} of {limit:g}"
    if verdict == FAIL:
        return CheckResult(
            name,
            FAIL,
            message,
            "delete unused file systems, or aws service-quotas request-service-quota-increase --region "
            f"{context.region} --service-code elasticfilesystem --quota-code {code} "
            f"--desired-value {len(existing) + needed}",
        )
    if verdict == UNKNOWN:
        return CheckResult(name, UNKNOWN, message + " (fits only if the previous deploy's is among them)", "")
    return CheckResult(name, PASS, message)
