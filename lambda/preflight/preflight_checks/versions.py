"""The Kubernetes version, as EKS offers it in the region."""

from __future__ import annotations

from typing import List

from botocore.exceptions import BotoCoreError, ClientError

from .aws_context import AwsContext
from .results import FAIL, PASS, CannotCheck, CheckResult, date_text


def check_kubernetes_version(context: AwsContext, version: str) -> CheckResult:
    """EKS offers the Kubernetes version in the region (``eks:DescribeClusterVersions`` with ``clusterVersions``:
    ``versionStatus`` ``STANDARD_SUPPORT``, ``EXTENDED_SUPPORT`` or ``UNSUPPORTED``; EKS API reference,
    DescribeClusterVersions). A version in extended support costs more per cluster hour (EKS user guide, "Understand
    the Kubernetes version lifecycle on EKS")."""
    name = f"kubernetes-version/{version}"
    versions = context.pages("eks", "describe_cluster_versions", "clusterVersions", clusterVersions=[version])
    found = [v for v in versions if v.get("clusterVersion") == version and v.get("clusterType") in (None, "eks", "EKS")]
    if not found:
        offered = _offered_versions(context)
        advice = f"use one of {', '.join(offered)}" if offered else "use a version EKS offers in the region"
        return CheckResult(name, FAIL, f"EKS does not offer Kubernetes {version} in {context.region}", advice)
    info = found[0]
    status = (info.get("versionStatus") or str(info.get("status", "")).upper().replace("-", "_")).upper()
    if status == "STANDARD_SUPPORT":
        until = date_text(info.get("endOfStandardSupportDate"))
        return CheckResult(name, PASS, f"Kubernetes {version}: standard support" + (f" until {until}" if until else ""))
    if status == "EXTENDED_SUPPORT":
        until = date_text(info.get("endOfExtendedSupportDate"))
        return CheckResult(
            name,
            PASS,
            f"Kubernetes {version} is in extended support"
            + (f" until {until}" if until else "")
            + ": the cluster costs more per hour than in standard support",
        )
    if status == "UNSUPPORTED":
        return CheckResult(
            name,
            FAIL,
            f"Kubernetes {version} is no longer supported by EKS",
            "use a version in standard support (kubernetesVersion)",
        )
    raise CannotCheck(f"Kubernetes {version}: EKS reports the status {status!r}, which this preflight does not know")


def _offered_versions(context: AwsContext) -> List[str]:
    try:
        versions = context.pages("eks", "describe_cluster_versions", "clusterVersions")
    except (ClientError, BotoCoreError, CannotCheck):
        return []
    found = {v["clusterVersion"] for v in versions if v.get("clusterVersion")}
    return sorted(found, key=lambda v: [int(p) if p.isdigit() else p for p in v.split(".")])
