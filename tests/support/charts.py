"""Charts rendered outside a stack: the objects of a chart by identity, and the facts the add-on tests share."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from trainium_eks.core.conventions import LustreVolumeSource

REGISTRY = "602401143452.dkr.ecr.us-west-2.amazonaws.com"
"""The EKS add-on registry of us-west-2."""
FSX = LustreVolumeSource(
    file_system_id="fs-0123456789abcdef0",
    dns_name="fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com",
    mount_name="abcdefgh",
    storage_gib=1200,
)
"""A Lustre file system as the storage construct describes it to the charts."""


def objects(chart) -> Dict[Tuple[str, str], Dict[str, Any]]:
    """(kind, name) -> object of every object ``chart`` renders."""
    return {(o["kind"], o["metadata"]["name"]): o for o in chart.manifests()}


def pod_spec(workload: Dict[str, Any]) -> Dict[str, Any]:
    """The pod spec of a Deployment, DaemonSet or Job."""
    return workload["spec"]["template"]["spec"]


def affinity_instance_types(spec: Dict[str, Any]) -> List[str]:
    """The instance types a pod spec's required node affinity admits (its one In expression)."""
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (expression,) = term["matchExpressions"]
    assert (expression["key"], expression["operator"]) == ("node.kubernetes.io/instance-type", "In")
    return expression["values"]
