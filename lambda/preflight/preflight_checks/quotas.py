"""The EC2 On-Demand vCPU quotas (the Service Quotas and CloudWatch reads are :mod:`.service_quotas`')."""

from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

from .aws_context import AwsContext
from .plan import on_demand, unique
from .results import FAIL, PASS, UNKNOWN, CannotCheck, CheckResult
from .service_quotas import capacity_verdict, quota_usage, service_quota

ON_DEMAND_QUOTAS: Dict[str, Tuple[str, str]] = {
    "standard": ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
    "dl": ("L-6E869C2A", "Running On-Demand DL instances"),
    "f": ("L-74FC7D96", "Running On-Demand F instances"),
    "g": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    "hpc": ("L-F7808C92", "Running On-Demand HPC instances"),
    "high-memory": ("L-43DA4232", "Running On-Demand High Memory instances"),
    "inf": ("L-1945791B", "Running On-Demand Inf instances"),
    "p": ("L-417A185B", "Running On-Demand P instances"),
    "trn": ("L-2C3B7624", "Running On-Demand Trn instances"),
    "x": ("L-7295265B", "Running On-Demand X instances"),
}
"""The EC2 On-Demand vCPU quotas (Service Quotas code ``ec2``), by quota family. The ten quota names and codes are
those of the EC2 user guide, "On-Demand Instance quotas"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-on-demand-instances.html#ec2-on-demand-instances-limits,
whose table links each quota to ``console.aws.amazon.com/servicequotas/home/services/ec2/quotas/<code>``); the
Service Quotas examples of the AWS CLI user guide show L-1216C47A's answer, with its ``UsageMetric``."""

_FAMILY_LETTERS = {
    "trn": "trn",
    "inf": "inf",
    "dl": "dl",
    "hpc": "hpc",
    "vt": "g",
    "g": "g",
    "p": "p",
    "f": "f",
    "x": "x",
}
_STANDARD_LETTERS = frozenset("acdhimrtz")


def quota_family(instance_type: str) -> Optional[str]:
    """The On-Demand quota family of ``instance_type`` (a key of :data:`ON_DEMAND_QUOTAS`), or None when unknown (mac
    instances run only on Dedicated Hosts, which have their own quotas). The families are the letters before the
    generation: ``trn1`` and ``trn2u`` are Trn, ``vt1`` is G and VT, ``u-6tb1`` and ``u7i`` High Memory, and the
    Standard quota covers the A, C, D, H, I, M, R, T and Z families (EC2 user guide, "On-Demand Instance quotas")."""
    prefix = instance_type.split(".", 1)[0].lower()
    if prefix.startswith("u-") or re.match(r"^u\d", prefix):
        return "high-memory"
    match = re.match(r"^([a-z]+)\d", prefix)
    if not match:
        return None
    letters = match.group(1)
    if letters in _FAMILY_LETTERS:
        return _FAMILY_LETTERS[letters]
    if letters == "mac":
        return None
    if letters[0] in _STANDARD_LETTERS:
        return "standard"
    return None


_FAMILY_LABELS = {
    "standard": "Standard",
    "dl": "DL",
    "f": "F",
    "g": "G-VT",
    "hpc": "HPC",
    "high-memory": "HighMemory",
    "inf": "Inf",
    "p": "P",
    "trn": "Trn",
    "x": "X",
}


def family_label(family: str) -> str:
    """The family's name in a check's name (``on-demand-vcpus/Trn``); ``unknown`` for a type of no known quota."""
    return _FAMILY_LABELS.get(family, "unknown")


def check_on_demand_vcpus(context: AwsContext, family: str) -> CheckResult:
    """The On-Demand vCPU quota of an instance family holds its current use plus the vCPUs of the plan's on-demand
    nodes of that family (``count`` × ``VCpuInfo.DefaultVCpus``). EC2 user guide, "On-Demand Instance quotas": the
    quotas count the vCPUs of running On-Demand Instances, and "Capacity Reservations count toward your On-Demand
    Instance quotas, even if they are unused", so nodes launched into a reservation (``capacity-block`` or
    ``reservation``) need no quota beyond what the reservation already holds; they are left out here."""
    label = family_label(family)
    name = f"on-demand-vcpus/{label}"
    nodes = [n for n in context.plan["nodes"] if on_demand(n) and (quota_family(n["instanceType"]) or "") == family]
    types = ", ".join(unique(n["instanceType"] for n in nodes))
    if family not in ON_DEMAND_QUOTAS:
        raise CannotCheck(f"no On-Demand vCPU quota is known for {types}", "check the quota of this family by hand")
    quota_code, quota_name = ON_DEMAND_QUOTAS[family]
    needed = sum(n["count"] * context.vcpus(n["instanceType"]) for n in nodes)
    previous = sum(
        n["count"] * context.vcpus(n["instanceType"])
        for n in (context.previous or {}).get("nodes", [])
        if on_demand(n)
        and (quota_family(n["instanceType"]) or "") == family
        and context.instance_type(n["instanceType"]) is not None
    )
    quota = service_quota(context, "ec2", quota_code)
    limit = float(quota["Value"])
    source = " (the AWS default; the account has no applied value)" if quota.get("_default") else ""

    def increase(desired: float) -> str:
        return (
            f"request an increase of {quota_name} ({quota_code}) in the Service Quotas console, or: aws "
            f"service-quotas request-service-quota-increase --region {context.region} --service-code ec2 "
            f"--quota-code {quota_code} --desired-value {desired:g}"
        )

    metric = quota.get("UsageMetric") or {}
    if not metric.get("MetricNamespace") or not metric.get("MetricName"):
        if needed > limit:
            return CheckResult(
                name,
                FAIL,
                f"{quota_name}: the plan's {types} nodes need {needed:g} vCPUs, the quota is {limit:g}{source}",
                increase(needed),
            )
        raise CannotCheck(
            f"{quota_name}: {needed:g} of {limit:g} vCPUs needed{source}, but the quota names no usage metric",
            "compare with the vCPUs of your running instances by hand",
        )
    used = quota_usage(context, metric)
    verdict = capacity_verdict(used=used, needed=needed, limit=limit, previous=previous)
    figures = f"{used:g} vCPUs in use + {needed:g} for {types} = {used + needed:g} of {limit:g}{source}"
    if verdict == FAIL:
        desired = used - min(used, previous) + needed
        return CheckResult(name, FAIL, f"{quota_name}: {figures}", increase(desired))
    if verdict == UNKNOWN:
        return CheckResult(
            name,
            UNKNOWN,
            f"{quota_name}: {figures}; it fits only if {min(used, previous):g} of the vCPUs in use are this stack's "
            "own nodes",
            increase(used + needed) + ", if the instances in use are not this stack's",
        )
    return CheckResult(name, PASS, f"{quota_name}: {figures}")
