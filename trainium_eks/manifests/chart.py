"""What every cdk8s chart of the library shares: its own cdk8s app, the common labels, node placement helpers."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import cdk8s
from cdk8s_plus_27 import k8s

from trainium_eks.catalog import Accelerator
from trainium_eks.conventions import ACCELERATOR_TAINTS, SYSTEM_NODE_LABELS

PART_OF = "trainium-eks"
"""Value of the ``app.kubernetes.io/part-of`` label on every object the library creates."""

SYSTEM_NODE_SELECTOR: Mapping[str, str] = SYSTEM_NODE_LABELS
"""Node selector of workloads that belong on the system node group (Volcano, etcd, TensorBoard)."""

NEURON_TAINT_KEY = ACCELERATOR_TAINTS[Accelerator.NEURON].key
ACCELERATOR_TAINT_KEYS = tuple(taint.key for taint in ACCELERATOR_TAINTS.values())
"""Taint keys of accelerated node groups (``AcceleratedNodeGroup``'s taints, one per accelerator)."""


UNPRIVILEGED_USER = 65534
"""``nobody``: the user of the library's own services (etcd, TensorBoard)."""


def quantity(value: str) -> k8s.Quantity:
    """A Kubernetes quantity (``"100m"``, ``"1Gi"``)."""
    return k8s.Quantity.from_string(value)


def unprivileged_pod() -> k8s.PodSecurityContext:
    """Pod security for the library's own services: ``nobody``, never root, the runtime's default seccomp."""
    return k8s.PodSecurityContext(
        run_as_non_root=True,
        run_as_user=UNPRIVILEGED_USER,
        run_as_group=UNPRIVILEGED_USER,
        fs_group=UNPRIVILEGED_USER,
        seccomp_profile=k8s.SeccompProfile(type="RuntimeDefault"),
    )


def locked_down_container() -> k8s.SecurityContext:
    """Container security for the library's own services: no privilege escalation, read-only root file system,
    no capabilities."""
    return k8s.SecurityContext(
        allow_privilege_escalation=False, read_only_root_filesystem=True, capabilities=k8s.Capabilities(drop=["ALL"])
    )


def device_plugin_resources() -> k8s.ResourceRequirements:
    """Requests and limits of a device plugin (the upstream charts request 10m / 20Mi)."""
    return k8s.ResourceRequirements(
        requests={"cpu": quantity("10m"), "memory": quantity("20Mi")},
        limits={"cpu": quantity("200m"), "memory": quantity("128Mi")},
    )


class LibraryChart(cdk8s.Chart):
    """A cdk8s chart in its own cdk8s app (charts live outside the CDK construct tree and are handed to
    ``add_cdk8s_chart``), labelling every object ``app.kubernetes.io/part-of: trainium-eks`` and
    ``app.kubernetes.io/name: <name>``.

    Namespaced objects take their namespace from :meth:`metadata`; cluster-scoped objects get none (a chart-wide
    namespace would be written on ClusterRoles too).

    :param name: The component's name, used for the chart id and the ``app.kubernetes.io/name`` label.
    :param namespace: Namespace of the chart's namespaced objects. Default: none.
    """

    def __init__(self, name: str, *, namespace: Optional[str] = None) -> None:
        super().__init__(
            cdk8s.App(),
            name,
            labels={"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/name": name},
            disable_resource_name_hashes=True,
        )
        self.component = name
        self.namespace_name = namespace

    def metadata(self, name: str, *, cluster_scoped: bool = False, **extra: Any) -> k8s.ObjectMeta:
        """Metadata of an object called ``name``, in the chart's namespace unless ``cluster_scoped``."""
        return k8s.ObjectMeta(name=name, namespace=None if cluster_scoped else self.namespace_name, **extra)

    def selector_labels(self, component: Optional[str] = None) -> Dict[str, str]:
        """Labels that select this chart's pods (or those of one ``component`` of it)."""
        return {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/name": component or self.component}

    def allow_ingress_only(
        self, id_: str, *, pods: Mapping[str, str], ports: Sequence[int] = (), from_namespace: bool = True
    ) -> k8s.KubeNetworkPolicy:
        """A NetworkPolicy that admits ingress to ``pods`` only on ``ports`` from pods of this namespace (none when
        ``ports`` is empty or ``from_namespace`` is false: all ingress denied). Enforced by the VPC CNI's network
        policy agent (enabled by ``TrainingCluster``); egress stays open."""
        rules = []
        if ports and from_namespace:
            rules = [
                k8s.NetworkPolicyIngressRule(
                    from_=[k8s.NetworkPolicyPeer(pod_selector=k8s.LabelSelector())],
                    ports=[
                        k8s.NetworkPolicyPort(port=k8s.IntOrString.from_number(port), protocol="TCP") for port in ports
                    ],
                )
            ]
        return k8s.KubeNetworkPolicy(
            self,
            id_,
            metadata=self.metadata(id_.lower()),
            spec=k8s.NetworkPolicySpec(
                pod_selector=k8s.LabelSelector(match_labels=dict(pods)),
                policy_types=["Ingress"],
                ingress=rules,
            ),
        )

    def add_object(self, id_: str, manifest: Mapping[str, Any]) -> cdk8s.ApiObject:
        """Add an object given as a plain Kubernetes manifest (camelCase, as in YAML): custom resources, and
        objects whose name is computed from their rendered spec."""
        body = dict(manifest)
        api_object = cdk8s.ApiObject(
            self, id_, api_version=body.pop("apiVersion"), kind=body.pop("kind"), metadata=body.pop("metadata")
        )
        for key, value in body.items():
            api_object.add_json_patch(cdk8s.JsonPatch.add(f"/{key}", value))
        return api_object

    def manifests(self) -> List[Dict[str, Any]]:
        """The chart's objects, rendered (tokens of the CDK app stay tokens until the stack resolves them)."""
        return cdk8s.Testing.synth(self)


def exists_toleration(key: str, effect: Optional[str] = None) -> k8s.Toleration:
    """A toleration of any value of taint ``key`` (with ``effect``, or every effect)."""
    return k8s.Toleration(key=key, operator="Exists", effect=effect)


def instance_type_affinity(instance_types: Sequence[str]) -> k8s.Affinity:
    """Required node affinity: only nodes whose ``node.kubernetes.io/instance-type`` is one of ``instance_types``."""
    return k8s.Affinity(
        node_affinity=k8s.NodeAffinity(
            required_during_scheduling_ignored_during_execution=k8s.NodeSelector(
                node_selector_terms=[
                    k8s.NodeSelectorTerm(
                        match_expressions=[
                            k8s.NodeSelectorRequirement(
                                key="node.kubernetes.io/instance-type", operator="In", values=sorted(instance_types)
                            )
                        ]
                    )
                ]
            )
        )
    )
