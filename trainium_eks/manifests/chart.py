"""What every chart of the library shares: a cdk8s chart of the component's objects, the common labels, node
placement helpers.

A chart is a ``cdk8s.Chart`` whose Kubernetes objects are ``cdk8s.ApiObject`` constructs, written as dicts (camelCase,
as in YAML) and labelled ``app.kubernetes.io/part-of: trainium-eks`` and ``app.kubernetes.io/name: <component>``.
Values may be CDK tokens (a file system id, an image asset's URI): cdk8s passes them through as strings, and they
stay tokens until the stack that applies the chart resolves them.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, Optional, Sequence

import cdk8s

from trainium_eks.core.conventions import ACCELERATOR_TAINTS, INGRESS_POLICY_LABEL, SYSTEM_NODE_LABELS
from trainium_eks.facts.catalog import Accelerator

PART_OF = "trainium-eks"
"""Value of the ``app.kubernetes.io/part-of`` label on every object the library creates."""

SYSTEM_NODE_SELECTOR: Mapping[str, str] = SYSTEM_NODE_LABELS
"""Node selector of workloads that belong on the system node group (Volcano, etcd, TensorBoard)."""

NEURON_TAINT_KEY = ACCELERATOR_TAINTS[Accelerator.NEURON].key
ACCELERATOR_TAINT_KEYS = tuple(taint.key for taint in ACCELERATOR_TAINTS.values())
"""Taint keys of accelerated node groups (``TrainingNodeGroup``'s taints, one per accelerator)."""


UNPRIVILEGED_USER = 65534
"""``nobody``: the user of the library's own services (etcd, TensorBoard)."""


def unprivileged_pod() -> Dict[str, Any]:
    """Pod security for the library's own services: ``nobody``, never root, the runtime's default seccomp."""
    return {
        "runAsNonRoot": True,
        "runAsUser": UNPRIVILEGED_USER,
        "runAsGroup": UNPRIVILEGED_USER,
        "fsGroup": UNPRIVILEGED_USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def locked_down_container() -> Dict[str, Any]:
    """Container security for the library's own services: no privilege escalation, read-only root file system,
    no capabilities."""
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


def device_plugin_resources() -> Dict[str, Any]:
    """Requests and limits of a device plugin (the upstream charts request 10m / 20Mi)."""
    return {"requests": {"cpu": "10m", "memory": "20Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}


class LibraryChart(cdk8s.Chart):
    """A cdk8s chart of the Kubernetes objects of one component, each labelled ``app.kubernetes.io/part-of:
    trainium-eks`` and ``app.kubernetes.io/name: <name>``, applied to a cluster by
    :class:`~trainium_eks.constructs.applied_chart.AppliedChart` (the stack's ``ClusterAddons`` and ``JobSequence``
    do it for the library's charts).

    Each object is a ``cdk8s.ApiObject`` whose JSON is the dict given to :meth:`add_object` (one JSON patch that
    replaces the whole object, so its keys keep their order and no field is added; like every cdk8s object, a key
    whose value is None is left out). Objects you add to the chart
    with cdk8s (``cdk8s.ApiObject``, imported CRD classes, cdk8s-plus L2s) are part of it like the library's own:
    :meth:`manifests` is cdk8s's ``to_json``. Namespaced objects take their namespace from :meth:`metadata`;
    cluster-scoped objects get none. Each chart is the only chart of a ``cdk8s.App`` of its own: it is a value the
    library builds, hashes and applies, never synthesized to files.

    :param name: The component's name, used for the ``app.kubernetes.io/name`` label and as the chart's construct id.
    :param namespace: Namespace of the chart's namespaced objects. Default: none.
    """

    def __init__(self, name: str, *, namespace: Optional[str] = None) -> None:
        super().__init__(cdk8s.App(), name)
        self.component = name
        self.namespace_name = namespace
        self.component_labels: Dict[str, str] = {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/name": name}
        self._count = 0

    def metadata(self, name: str, *, cluster_scoped: bool = False, **extra: Any) -> Dict[str, Any]:
        """Metadata of an object called ``name``, in the chart's namespace unless ``cluster_scoped``; ``extra``
        fields (``labels``, ``annotations``) as in YAML."""
        metadata: Dict[str, Any] = {"name": name, **extra}
        if not cluster_scoped and self.namespace_name:
            metadata["namespace"] = self.namespace_name
        return metadata

    def selector_labels(self, component: Optional[str] = None) -> Dict[str, str]:
        """Labels that select this chart's pods (or those of one ``component`` of it)."""
        return {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/name": component or self.component}

    def add_object(self, manifest: Mapping[str, Any]) -> Dict[str, Any]:
        """Add one Kubernetes object (``apiVersion``, ``kind``, ``metadata``...), with the chart's labels, as a
        ``cdk8s.ApiObject`` (construct id ``<kind><n>``); return the object as added (a copy)."""
        obj = copy.deepcopy(dict(manifest))
        metadata = obj.setdefault("metadata", {})
        metadata["labels"] = {**self.component_labels, **(metadata.get("labels") or {})}
        self._count += 1
        api_object = cdk8s.ApiObject(
            self, f"{obj['kind']}{self._count}", api_version=obj["apiVersion"], kind=obj["kind"]
        )
        api_object.add_json_patch(cdk8s.JsonPatch.replace("", obj))
        return copy.deepcopy(obj)

    def add_daemon_set(
        self,
        name: str,
        pod_spec: Mapping[str, Any],
        *,
        annotations: Optional[Mapping[str, str]] = None,
        pod_labels: Optional[Mapping[str, str]] = None,
    ) -> Dict[str, Any]:
        """Add a DaemonSet ``name`` of pods ``pod_spec``, selected by the chart's selector labels, updated rolling,
        with ``annotations`` (checkov's accepted findings, say) and ``pod_labels`` on its pods besides the selector's
        (:func:`governed_by`, say)."""
        labels = self.selector_labels()
        return self.add_object(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": self.metadata(name, **({"annotations": dict(annotations)} if annotations else {})),
                "spec": {
                    "selector": {"matchLabels": labels},
                    "updateStrategy": {"type": "RollingUpdate"},
                    "template": {"metadata": {"labels": {**labels, **(pod_labels or {})}}, "spec": dict(pod_spec)},
                },
            }
        )

    def allow_ingress_only(
        self, name: str, *, pods: Mapping[str, str], ports: Sequence[int] = (), from_namespace: bool = True
    ) -> Dict[str, Any]:
        """A NetworkPolicy ``name`` that admits ingress to ``pods`` only on ``ports`` from pods of this namespace
        (none when ``ports`` is empty or ``from_namespace`` is false: all ingress denied). Enforced by the VPC CNI's
        network policy agent (enabled by ``TrainingCluster``); egress is left to the namespace's policies. Label the
        pods with :func:`governed_by` the returned policy: in a namespace opened by
        :class:`~trainium_eks.manifests.access.system_network_policy.SystemNetworkPolicyChart` this one then alone
        decides their ingress (policies add up: Kubernetes, "Network Policies")."""
        rules: List[Dict[str, Any]] = []
        if ports and from_namespace:
            rules = [{"from": [{"podSelector": {}}], "ports": [{"port": port, "protocol": "TCP"} for port in ports]}]
        return self.add_object(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": self.metadata(name),
                "spec": {"podSelector": {"matchLabels": dict(pods)}, "policyTypes": ["Ingress"], "ingress": rules},
            }
        )

    def manifests(self) -> List[Dict[str, Any]]:
        """The chart's objects as cdk8s renders them (``to_json``: new dicts on every call)."""
        return list(self.to_json())


def governed_by(policy: Mapping[str, Any]) -> Dict[str, str]:
    """The pod label that says the NetworkPolicy ``policy`` (a manifest) alone decides the pod's ingress
    (:data:`~trainium_eks.core.conventions.INGRESS_POLICY_LABEL`: its value is the policy's name)."""
    return {INGRESS_POLICY_LABEL: policy["metadata"]["name"]}


def exists_toleration(key: str, effect: Optional[str] = None) -> Dict[str, str]:
    """A toleration of any value of taint ``key`` (with ``effect``, or every effect)."""
    toleration = {"key": key, "operator": "Exists"}
    if effect:
        toleration["effect"] = effect
    return toleration


def instance_type_affinity(instance_types: Sequence[str]) -> Dict[str, Any]:
    """Required node affinity: only nodes whose ``node.kubernetes.io/instance-type`` is one of ``instance_types``."""
    requirement = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": sorted(instance_types)}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [requirement]}]
            }
        }
    }
