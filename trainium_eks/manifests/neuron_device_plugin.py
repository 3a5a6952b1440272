"""NeuronDevicePluginChart: the Kubernetes device plugin that advertises Neuron devices and NeuronCores."""

from __future__ import annotations

from typing import Optional, Sequence

from cdk8s_plus_27 import k8s

from trainium_eks import versions
from trainium_eks.catalog import INSTANCE_CATALOG, Accelerator
from trainium_eks.manifests.chart import (
    NEURON_TAINT_KEY,
    LibraryChart,
    device_plugin_resources,
    exists_toleration,
    instance_type_affinity,
)
from trainium_eks.validation import Problems, check_instance_types, check_text

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

    :param image: Default: :data:`trainium_eks.versions.NEURON_DEVICE_PLUGIN`.
    :param instance_types: Nodes to run on. Default: every Neuron type of the catalog.
    """

    def __init__(
        self, *, image: str = versions.NEURON_DEVICE_PLUGIN.image, instance_types: Optional[Sequence[str]] = None
    ) -> None:
        problems = Problems(f"{NAME} chart")
        check_text(problems, "image", image, allowed="a container image reference, such as repo/image:tag")
        check_instance_types(problems, "instance_types", instance_types)
        problems.raise_if_any()
        super().__init__(NAME, namespace="kube-system")
        self.instance_types = sorted(instance_types or neuron_instance_types())
        k8s.KubeServiceAccount(self, "ServiceAccount", metadata=self.metadata(NAME))
        k8s.KubeClusterRole(
            self,
            "ClusterRole",
            metadata=self.metadata(NAME, cluster_scoped=True),
            rules=[
                k8s.PolicyRule(api_groups=[""], resources=["nodes"], verbs=["get", "list", "watch"]),
                k8s.PolicyRule(api_groups=[""], resources=["events"], verbs=["create", "patch"]),
                k8s.PolicyRule(api_groups=[""], resources=["pods"], verbs=["get", "list", "watch", "update", "patch"]),
                k8s.PolicyRule(api_groups=[""], resources=["nodes/status"], verbs=["patch", "update"]),
            ],
        )
        k8s.KubeClusterRoleBinding(
            self,
            "ClusterRoleBinding",
            metadata=self.metadata(NAME, cluster_scoped=True),
            role_ref=k8s.RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=NAME),
            subjects=[k8s.Subject(kind="ServiceAccount", name=NAME, namespace="kube-system")],
        )
        labels = self.selector_labels()
        self.allow_ingress_only(f"{NAME}-no-ingress", pods=labels)
        k8s.KubeDaemonSet(
            self,
            "DaemonSet",
            metadata=self.metadata(NAME),
            spec=k8s.DaemonSetSpec(
                selector=k8s.LabelSelector(match_labels=labels),
                update_strategy=k8s.DaemonSetUpdateStrategy(type="RollingUpdate"),
                template=k8s.PodTemplateSpec(
                    metadata=k8s.ObjectMeta(labels=labels),
                    spec=k8s.PodSpec(
                        service_account_name=NAME,
                        priority_class_name="system-node-critical",
                        security_context=k8s.PodSecurityContext(
                            seccomp_profile=k8s.SeccompProfile(type="RuntimeDefault")
                        ),
                        affinity=instance_type_affinity(self.instance_types),
                        tolerations=[
                            exists_toleration("CriticalAddonsOnly"),
                            exists_toleration(NEURON_TAINT_KEY, "NoSchedule"),
                        ],
                        containers=[
                            k8s.Container(
                                name=NAME,
                                image=image,
                                image_pull_policy="IfNotPresent",
                                env=[
                                    k8s.EnvVar(name="KUBECONFIG", value="/etc/kubernetes/kubelet.conf"),
                                    k8s.EnvVar(
                                        name="NODE_NAME",
                                        value_from=k8s.EnvVarSource(
                                            field_ref=k8s.ObjectFieldSelector(field_path="spec.nodeName")
                                        ),
                                    ),
                                ],
                                security_context=k8s.SecurityContext(
                                    allow_privilege_escalation=False,
                                    capabilities=k8s.Capabilities(drop=["ALL"]),
                                ),
                                resources=device_plugin_resources(),
                                volume_mounts=[
                                    k8s.VolumeMount(name="device-plugin", mount_path=DEVICE_PLUGIN_PATH),
                                    k8s.VolumeMount(name="run", mount_path="/run"),
                                    k8s.VolumeMount(name="aws-config", mount_path="/opt/aws", read_only=True),
                                ],
                            )
                        ],
                        volumes=[
                            k8s.Volume(
                                name="device-plugin", host_path=k8s.HostPathVolumeSource(path=DEVICE_PLUGIN_PATH)
                            ),
                            k8s.Volume(name="run", host_path=k8s.HostPathVolumeSource(path="/run")),
                            k8s.Volume(name="aws-config", host_path=k8s.HostPathVolumeSource(path="/opt/aws")),
                        ],
                    ),
                ),
            ),
        )
