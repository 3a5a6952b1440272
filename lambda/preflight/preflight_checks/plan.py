"""The plan a stack gives its preflight, and what it must hold."""

from __future__ import annotations

from typing import Any, Iterable, List, Mapping, Optional

from .file_systems import LUSTRE_QUOTAS

PLAN_VERSION = 1
"""The version of the plan this module reads; :func:`check_plan` refuses any other."""


def check_plan(plan: Any) -> List[str]:
    """The problems of ``plan`` (empty when it can be checked): its version, and each missing or mistyped key."""
    if not isinstance(plan, Mapping):
        return [f"the plan must be a JSON object, not {type(plan).__name__}"]
    if plan.get("version") != PLAN_VERSION:
        return [f"plan version {plan.get('version')!r}: this preflight reads version {PLAN_VERSION} only"]
    problems: List[str] = []
    _expect(problems, plan, "stack", "the plan", str)
    _expect(problems, plan, "region", "the plan", str, optional=True)
    _expect(problems, plan, "kubernetesVersion", "the plan", str, optional=True)
    if _expect(problems, plan, "nodes", "the plan", list):
        for index, node in enumerate(plan["nodes"]):
            where = f"nodes[{index}]"
            if not isinstance(node, Mapping):
                problems.append(f"{where} must be an object")
                continue
            where = f"nodes[{index}] ({node.get('name', '?')})"
            _expect(problems, node, "name", where, str)
            _expect(problems, node, "instanceType", where, str)
            for key in ("count", "ipInterfaces", "efaInterfaces"):
                _expect(problems, node, key, where, int, minimum=0)
            _expect(problems, node, "availabilityZoneId", where, str, optional=True)
            _expect(problems, node, "subnetId", where, str, optional=True)
            if not isinstance(node.get("subnetCreated", False), bool):  # absent in the plans of earlier versions
                problems.append(f"{where}: subnetCreated={node['subnetCreated']!r} must be true or false")
            _expect(problems, node, "capacityReservationId", where, str, optional=True)
            kind = node.get("capacityType")
            if kind not in ("on-demand", "capacity-block", "reservation"):
                problems.append(f"{where}: capacityType {kind!r}: on-demand, capacity-block or reservation")
            if node.get("provisioning", "karpenter") not in ("karpenter", "node-group"):
                problems.append(f"{where}: provisioning {node.get('provisioning')!r}: karpenter or node-group")
    if _expect(problems, plan, "fileSystems", "the plan", list):
        for index, file_system in enumerate(plan["fileSystems"]):
            where = f"fileSystems[{index}]"
            if not isinstance(file_system, Mapping) or file_system.get("kind") not in ("lustre", "efs"):
                problems.append(f"{where}: an object whose kind is lustre or efs")
            elif file_system["kind"] == "lustre":
                _expect(problems, file_system, "storageGib", where, int, minimum=1)
                if "name" in file_system:  # absent in the plans of earlier versions
                    _expect(problems, file_system, "name", where, str)
                if file_system.get("deploymentType") not in LUSTRE_QUOTAS:
                    problems.append(
                        f"{where}: deploymentType {file_system.get('deploymentType')!r}: one of "
                        + ", ".join(LUSTRE_QUOTAS)
                    )
    return problems


def _expect(
    problems: List[str],
    mapping: Mapping[str, Any],
    key: str,
    where: str,
    kind: type,
    *,
    optional: bool = False,
    minimum: Optional[int] = None,
) -> bool:
    """Add a problem unless ``mapping[key]`` is a ``kind`` (or None when ``optional``); True when it is a ``kind``."""
    names = {str: "a string", int: "an integer", list: "a list"}
    if key not in mapping:
        problems.append(f"{where}: {key} is missing")
        return False
    value = mapping[key]
    if value is None and optional:
        return False
    if not isinstance(value, kind) or isinstance(value, bool):
        problems.append(f"{where}: {key}={value!r} must be {names[kind]}" + (" or null" if optional else ""))
        return False
    if minimum is not None and value < minimum:
        problems.append(f"{where}: {key}={value!r} must be at least {minimum}")
        return False
    return True


def unique(values: Iterable[Any]) -> List[Any]:
    seen: List[Any] = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def on_demand(node: Mapping[str, Any]) -> bool:
    return node["capacityType"] == "on-demand" and node["count"] > 0
