"""NeuronDevicePluginChart: the Kubernetes device plugin that advertises Neuron devices and NeuronCores."""

from __future__ import annotations

from typing import Optional, Sequence

from trainium_eks.core.validation import Problems, check_image_reference, check_instance_types
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import INSTANCE_CATALOG, Accelerator
from trainium_eks.manifests import audit_exceptions as audit
from trainium_eks.manifests.audit_exceptions import checkov_skips, image_skips
from trainium_eks.manifests.chart import (
    NEURON_TAINT_KEY,
    LibraryChart,
    device_plugin_resources,
    exists_toleration,
    governed_by,
    instance_type_affinity,
)

NAME = "neuron-device-plugin"
DEVICE_PLUGIN_PATH = "/var/lib/kubelet/device-plugins"


def neuron_instance_types() -> list:
    """Every Neuron instance type of the catalog (trn1, trn1n, trn2): the nodes the plugin must run on."""
    return [facts.name for facts in INSTANCE_CATALOG.values() if facts.accelerator is Accelerator.NEURON]


class NeuronDevicePluginChart(LibraryChart):
    """The Neuron device plugin in ``kube-system``: ServiceAccount, ClusterRole and binding, DaemonSet.

    The DaemonSet runs on every Neuron instance type of the catalog (:func:`neuron_instance_types`; the upstream raw
    manifest's affinity forgets trn2), tolerates the Neuron taint and ``CriticalAddonsOnly``, has priority class
    ``system-node-critical``, no privilege escalation and no capabilities, and mounts the kubelet's device-plugin
    directory, ``/run`` and (read-only) ``/opt/aws``, as the Neuron Helm chart 1.9/1.10 DaemonSet does. It runs
    with the runtime's default seccomp profile and a NetworkPolicy denies it all ingress (it only talks to the
    kubelet over a socket and to the API server). The role allows what the plugin calls: nodes get/list/watch,
    events create/patch, pods get/list/watch/update/patch, nodes/status patch/update (Neuron SDK
    src/k8/k8s-neuron-device-plugin-rbac.yml).

    :param image: Default: :data:`trainium_eks.facts.versions.NEURON_DEVICE_PLUGIN`.
    :param instance_types: Nodes to run on. Default: every Neuron type of the catalog.
    """

    def __init__(
        self, *, image: str = versions.NEURON_DEVICE_PLUGIN.image, instance_types: Optional[Sequence[str]] = None
    ) -> None:
        problems = Problems(f"{NAME} chart")
        check_image_reference(problems, "image", image)
        check_instance_types(problems, "instance_types", instance_types)
        problems.raise_if_any()
        super().__init__(NAME, namespace="kube-system")
        self.instance_types = sorted(instance_types or neuron_instance_types())
        self.add_object({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": self.metadata(NAME)})
        self.add_object(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": self.metadata(NAME, cluster_scoped=True),
                "rules": [
                    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
                    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "update", "patch"]},
                    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"]},
                ],
            }
        )
        self.add_object(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": self.metadata(NAME, cluster_scoped=True),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
                "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": "kube-system"}],
            }
        )
        labels = self.selector_labels()
        no_ingress = self.allow_ingress_only(f"{NAME}-no-ingress", pods=labels)
        container = {
            "name": NAME,
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "env": [
                {"name": "KUBECONFIG", "value": "/etc/kubernetes/kubelet.conf"},
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            ],
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            "resources": device_plugin_resources(),
            "volumeMounts": [
                {"name": "device-plugin", "mountPath": DEVICE_PLUGIN_PATH},
                {"name": "run", "mountPath": "/run"},
                {"name": "aws-config", "mountPath": "/opt/aws", "readOnly": True},
            ],
        }
        self.add_daemon_set(
            NAME,
            {
                "serviceAccountName": NAME,
                "priorityClassName": "system-node-critical",
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                "affinity": instance_type_affinity(self.instance_types),
                "tolerations": [
                    exists_toleration("CriticalAddonsOnly"),
                    exists_toleration(NEURON_TAINT_KEY, "NoSchedule"),
                ],
                "containers": [container],
                "volumes": [
                    {"name": "device-plugin", "hostPath": {"path": DEVICE_PLUGIN_PATH}},
                    {"name": "run", "hostPath": {"path": "/run"}},
                    {"name": "aws-config", "hostPath": {"path": "/opt/aws"}},
                ],
            },
            pod_labels=governed_by(no_ingress),
            annotations=checkov_skips(
                {
                    "CKV_K8S_8": audit.PLUGIN_PROBES,
                    "CKV_K8S_9": audit.PLUGIN_PROBES,
                    "CKV_K8S_22": audit.PLUGIN_ROOT_FILESYSTEM,
                    "CKV_K8S_23": audit.PLUGIN_ROOT,
                    "CKV_K8S_38": audit.API_CLIENT_TOKEN,
                    "CKV_K8S_40": audit.PLUGIN_ROOT,
                    **image_skips(image),
                }
            ),
        )
