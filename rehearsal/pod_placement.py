"""Where a pod may run: its requests, and the filters of the scheduler's framework that the library's pods meet.

Modelled on Kubernetes (kube-scheduler's ``NodeResourcesFit``, ``NodeAffinity``, ``TaintToleration`` plugins, which
Volcano's ``predicates`` plugin wraps as well: volcano-sh/volcano v1.15.1 ``pkg/scheduler/plugins/predicates``):

- a pod's request of each resource is the larger of the sum over its containers and the largest of its init
  containers (init containers run one at a time, before the containers), plus one ``pods`` slot (Kubernetes
  ``resourcehelper.PodRequests``; Volcano ``pkg/scheduler/api/pod_info.go`` ``GetPodResourceRequest``);
- an extended resource requested without a limit, or with a different one, is invalid (core validation); a node
  lacking a resource offers 0 of it;
- ``nodeSelector`` must match the node's labels; required node affinity: any term whose every expression holds
  (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``);
- every ``NoSchedule``/``NoExecute`` taint of the node must be tolerated (``Exists`` with no key tolerates all; an
  empty effect tolerates every effect).

Not modelled: pod (anti-)affinity, topology spread, host ports, volume limits (the library's pods use none).
Quantities: CPU in millicores, memory in MiB, everything else as whole numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_MEMORY_UNITS = {
    "": 1 / (1024 * 1024),
    "k": 1000 / (1024 * 1024),
    "M": 1e6 / (1024 * 1024),
    "G": 1e9 / (1024 * 1024),
    "T": 1e12 / (1024 * 1024),
    "Ki": 1 / 1024,
    "Mi": 1,
    "Gi": 1024,
    "Ti": 1024 * 1024,
}


def quantity(resource: str, value: Any) -> int:
    """A Kubernetes quantity of ``resource`` as the model counts it: CPU in millicores, memory in MiB (rounded up),
    anything else as a whole number."""
    text = str(value)
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"{resource}: {value!r} is not a quantity")
    number, unit = float(match.group(1)), match.group(2)
    if resource == "cpu":
        return int(number) if unit == "m" else int(round(number * 1000))
    if resource == "memory":
        return int(-(-number * _MEMORY_UNITS[unit] // 1))
    return int(number)


def container_requests(container: Mapping[str, Any]) -> Dict[str, int]:
    """What one container requests (an extended resource's limit counts as its request when no request is given)."""
    resources = container.get("resources") or {}
    found = {name: quantity(name, value) for name, value in (resources.get("requests") or {}).items()}
    for name, value in (resources.get("limits") or {}).items():
        if name not in ("cpu", "memory"):
            found.setdefault(name, quantity(name, value))
    return found


def pod_requests(pod: Mapping[str, Any]) -> Dict[str, int]:
    """What a pod holds on its node from binding to its end: per resource, max(sum of containers, largest init
    container), plus one pod slot."""
    total: Dict[str, int] = {}
    for container in pod.get("containers") or ():
        for name, value in container_requests(container).items():
            total[name] = total.get(name, 0) + value
    for container in pod.get("initContainers") or ():
        for name, value in container_requests(container).items():
            total[name] = max(total.get(name, 0), value)
    total["pods"] = total.get("pods", 0) + 1
    return total


def invalid_requests(pod: Mapping[str, Any]) -> List[str]:
    """Why the API server would refuse the pod's resources: an extended resource must have a limit equal to its
    request (Kubernetes core validation of container resources)."""
    problems = []
    for container in list(pod.get("containers") or ()) + list(pod.get("initContainers") or ()):
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for name, value in requests.items():
            if name not in ("cpu", "memory", "ephemeral-storage") and str(limits.get(name)) != str(value):
                problems.append(f"container {container.get('name')}: {name} requested without an equal limit")
    return problems


@dataclass(frozen=True)
class NodeFacts:
    """What the filters read of a node: its name, labels, taints and allocatable resources."""

    name: str
    labels: Mapping[str, str]
    taints: Sequence[Mapping[str, str]]
    allocatable: Mapping[str, int]


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, str]) -> bool:
    """Whether any toleration tolerates ``taint``."""
    for toleration in tolerations:
        operator = toleration.get("operator", "Equal")
        key = toleration.get("key")
        if key and key != taint["key"]:
            continue
        if not key and operator != "Exists":
            continue
        if toleration.get("effect") and toleration["effect"] != taint["effect"]:
            continue
        if operator == "Exists" or toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _expression_holds(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    raise ValueError(f"node affinity operator {operator!r} is not modelled")


def placement_problems(pod: Mapping[str, Any], node: NodeFacts) -> List[str]:
    """Why ``pod`` can never run on ``node``, whatever else runs there (labels, affinity, taints, a resource the node
    does not have enough of even when empty); empty when it can."""
    problems = selection_problems(pod, node)
    for name, value in pod_requests(pod).items():
        if value > node.allocatable.get(name, 0):
            problems.append(f"{name}: requests {value}, the node offers {node.allocatable.get(name, 0)}")
    return problems


def selection_problems(pod: Mapping[str, Any], node: NodeFacts) -> List[str]:
    """Why ``pod`` may not run on ``node`` whatever its resources: node selector, required affinity, taints."""
    problems = []
    for key, value in (pod.get("nodeSelector") or {}).items():
        if node.labels.get(key) != value:
            problems.append(f"node selector {key}={value}")
    required = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(
        all(_expression_holds(e, node.labels) for e in term.get("matchExpressions") or ()) for term in terms
    ):
        problems.append("required node affinity")
    for taint in node.taints:
        if taint["effect"] in ("NoSchedule", "NoExecute") and not tolerates(pod.get("tolerations") or (), taint):
            problems.append(f"untolerated taint {taint['key']}={taint.get('value', '')}:{taint['effect']}")
    return problems


def fits(requests: Mapping[str, int], free: Mapping[str, int]) -> bool:
    """Whether ``requests`` fit in ``free`` (a resource the node lacks counts as 0)."""
    return all(value <= free.get(name, 0) for name, value in requests.items() if value)


def first_problem(pod: Mapping[str, Any], nodes: Sequence[NodeFacts]) -> Optional[str]:
    """None when some node can take ``pod`` when empty; else why not, for the closest node."""
    if not nodes:
        return "no node"
    reasons = {node.name: placement_problems(pod, node) for node in nodes}
    if any(not found for found in reasons.values()):
        return None
    name, found = min(reasons.items(), key=lambda item: (len(item[1]), item[0]))
    return f"{name}: {'; '.join(found)}"
