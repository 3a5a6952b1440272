"""NvidiaDevicePluginChart: the Kubernetes device plugin that advertises NVIDIA GPUs as ``nvidia.com/gpu``."""

from __future__ import annotations

from typing import Optional, Sequence

from trainium_eks.core.conventions import ACCELERATOR_TAINTS
from trainium_eks.core.validation import Problems, check_bool, check_image_reference, check_instance_types
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import INSTANCE_CATALOG, Accelerator
from trainium_eks.manifests import audit_exceptions as audit
from trainium_eks.manifests.addons.neuron_device_plugin import DEVICE_PLUGIN_PATH
from trainium_eks.manifests.audit_exceptions import checkov_skips
from trainium_eks.manifests.chart import (
    LibraryChart,
    device_plugin_resources,
    exists_toleration,
    governed_by,
    instance_type_affinity,
)

NAME = "nvidia-device-plugin"

GPU_TAINT = ACCELERATOR_TAINTS[Accelerator.NVIDIA]
"""The taint of GPU node groups (``nvidia.com/gpu=true:NoSchedule``), which the plugin tolerates."""

PLUGIN_SETTINGS = {
    "MIG_STRATEGY": "none",
    "DEVICE_LIST_STRATEGY": "envvar",
    "DEVICE_ID_STRATEGY": "uuid",
    "PASS_DEVICE_SPECS": "false",
}
"""Environment of the plugin besides ``FAIL_ON_INIT_ERROR``, each the upstream default of v0.20.0
(``cmd/nvidia-device-plugin/main.go``), written out so that a new default upstream cannot change the deployment
silently:

- ``MIG_STRATEGY=none``: whole GPUs only; the ``single`` and ``mixed`` strategies need ``CAP_SYS_ADMIN``
  (Helm chart helper ``nvidia-device-plugin.requiresCapSysAdmin``), which this chart does not grant.
- ``DEVICE_LIST_STRATEGY=envvar``: the plugin hands a container its GPUs through ``NVIDIA_VISIBLE_DEVICES``, which
  the NVIDIA container runtime reads; nodeadm makes that runtime containerd's default on the EKS AL2023 NVIDIA AMI
  (awslabs/amazon-eks-ami ``nodeadm/internal/containerd/runtime_config_nvidia.go``). ``volume-mounts`` also needs
  ``CAP_SYS_ADMIN``, ``cdi-annotations`` a CDI spec directory.
- ``DEVICE_ID_STRATEGY=uuid``: GPUs are named by UUID, stable across reboots.
- ``PASS_DEVICE_SPECS=false``: ``true`` (the chart's ``compatWithCPUManager``) runs the plugin privileged."""


def nvidia_instance_types() -> list:
    """Every NVIDIA GPU instance type of the catalog (g5, g6, g6e, p4d, p5): the nodes the plugin must run on."""
    return [facts.name for facts in INSTANCE_CATALOG.values() if facts.accelerator is Accelerator.NVIDIA]


class NvidiaDevicePluginChart(LibraryChart):
    """The NVIDIA device plugin DaemonSet in ``kube-system``, which advertises each node's GPUs as ``nvidia.com/gpu``.

    The EKS-optimized AL2023 NVIDIA AMIs ship the NVIDIA driver and the NVIDIA container toolkit but not this plugin,
    which must be installed separately (EKS user guide, "Use EKS-optimized accelerated AMIs for GPU instances",
    ml-eks-optimized-ami.html); without it no pod can request a GPU. The DaemonSet runs only on the NVIDIA types of
    the catalog (:func:`nvidia_instance_types`; the upstream chart selects nodes by labels of Node Feature Discovery,
    which the library does not install), tolerates the GPU taint and ``CriticalAddonsOnly``, has priority class
    ``system-node-critical``, and mounts the kubelet's device-plugin directory, where it registers its socket.

    Like upstream's static manifest (NVIDIA/k8s-device-plugin ``deployments/static/nvidia-device-plugin.yml`` at
    v0.20.0) it runs as the image's root user without privilege escalation and with every capability dropped; the
    NVIDIA container runtime gives it the GPUs and driver libraries because its image sets
    ``NVIDIA_VISIBLE_DEVICES=all``. It also runs with the runtime's default seccomp profile, mounts no service-account
    token (the plugin itself never calls the Kubernetes API; only the chart's optional config-manager does), and a
    NetworkPolicy denies it all ingress (it only talks to the kubelet over a Unix socket). Its environment:
    ``FAIL_ON_INIT_ERROR`` (below) and :data:`PLUGIN_SETTINGS`.

    :param image: The plugin's image. Default: :data:`trainium_eks.facts.versions.NVIDIA_DEVICE_PLUGIN`.
    :param instance_types: Nodes to run on, types of the catalog. Default: every NVIDIA type of the catalog.
    :param fail_on_init_error: Whether the plugin exits when it cannot initialise (no driver, no GPU), so that the
        pod shows ``CrashLoopBackOff`` instead of waiting silently without advertising any GPU. Default: True (the
        upstream default).
    """

    def __init__(
        self,
        *,
        image: str = versions.NVIDIA_DEVICE_PLUGIN.image,
        instance_types: Optional[Sequence[str]] = None,
        fail_on_init_error: bool = True,
    ) -> None:
        problems = Problems(f"{NAME} chart")
        check_image_reference(problems, "image", image)
        check_instance_types(problems, "instance_types", instance_types)
        check_bool(problems, "fail_on_init_error", fail_on_init_error)
        problems.raise_if_any()
        super().__init__(NAME, namespace="kube-system")
        self.instance_types = sorted(instance_types or nvidia_instance_types())
        labels = self.selector_labels()
        no_ingress = self.allow_ingress_only(f"{NAME}-no-ingress", pods=labels)
        environment = {"FAIL_ON_INIT_ERROR": "true" if fail_on_init_error else "false", **PLUGIN_SETTINGS}
        container = {
            "name": NAME,
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "env": [{"name": key, "value": value} for key, value in environment.items()],
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            "resources": device_plugin_resources(),
            "volumeMounts": [{"name": "device-plugin", "mountPath": DEVICE_PLUGIN_PATH}],
        }
        self.add_daemon_set(
            NAME,
            {
                "automountServiceAccountToken": False,
                "priorityClassName": "system-node-critical",
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                "affinity": instance_type_affinity(self.instance_types),
                "tolerations": [
                    exists_toleration("CriticalAddonsOnly"),
                    exists_toleration(GPU_TAINT.key, GPU_TAINT.effect),
                ],
                "containers": [container],
                "volumes": [
                    {
                        "name": "device-plugin",
                        "hostPath": {"path": DEVICE_PLUGIN_PATH, "type": "Directory"},
                    }
                ],
            },
            pod_labels=governed_by(no_ingress),
            annotations=checkov_skips(
                {
                    "CKV_K8S_8": audit.PLUGIN_PROBES,
                    "CKV_K8S_9": audit.PLUGIN_PROBES,
                    "CKV_K8S_22": audit.PLUGIN_ROOT_FILESYSTEM,
                    "CKV_K8S_23": audit.PLUGIN_ROOT,
                    "CKV_K8S_40": audit.PLUGIN_ROOT,
                }
            ),
        )
