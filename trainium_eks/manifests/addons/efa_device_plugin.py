"""EfaDevicePluginChart: the Kubernetes device plugin that advertises EFA interfaces as ``vpc.amazonaws.com/efa``."""

from __future__ import annotations

from typing import Optional, Sequence

from trainium_eks.core.validation import Problems, check_image_reference, check_instance_types, check_text
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import INSTANCE_CATALOG
from trainium_eks.manifests import audit_exceptions as audit
from trainium_eks.manifests.addons.neuron_device_plugin import DEVICE_PLUGIN_PATH
from trainium_eks.manifests.audit_exceptions import checkov_skips, image_skips
from trainium_eks.manifests.chart import (
    ACCELERATOR_TAINT_KEYS,
    LibraryChart,
    device_plugin_resources,
    exists_toleration,
    instance_type_affinity,
)

NAME = "aws-efa-k8s-device-plugin"
NEURON_TOOLS = "/opt/aws/neuron"
"""Host folder of the Neuron tools, which the plugin reads to hand out EFA devices aligned with the pod's Neuron
devices (aws/eks-charts PR #1245, 2025-09)."""


def efa_instance_types() -> list:
    """Every EFA-capable instance type of the catalog: the nodes the plugin must run on."""
    return [facts.name for facts in INSTANCE_CATALOG.values() if facts.efa_supported]


class EfaDevicePluginChart(LibraryChart):
    """The EFA device plugin DaemonSet in ``kube-system``.

    It runs with the host network on EFA-capable instance types only (:func:`efa_instance_types`), tolerates
    ``CriticalAddonsOnly`` and the accelerator taints (the upstream chart tolerates none by default, so on tainted
    Trainium nodes it would never run), has priority class ``system-node-critical``, mounts the kubelet's
    device-plugin directory, ``/dev/infiniband`` and ``/opt/aws/neuron``, and mounts no service-account token (it
    needs no API access). Like the current upstream chart, it runs privileged as root: handing out EFA devices aligned
    with the pod's Neuron devices needs it (aws/eks-charts README and PR #1245); docs/security.md lists
    this exception. Its pod asks for the runtime's default seccomp profile like every pod of the library, which
    containerd does not apply to a privileged container (containerd v2.2.7 ``internal/cri/sputil/seccomp_linux.go``:
    "Do not set seccomp profile when container is privileged").

    :param registry: The EKS image registry of the cluster's region (``trainium_eks.facts.regions.eks_registry``), or a
        CloudFormation token that resolves to it. Required.
    :param image: Repository path and tag in that registry. Default:
        :data:`trainium_eks.facts.versions.EFA_DEVICE_PLUGIN`.
    :param instance_types: Nodes to run on. Default: every EFA-capable type of the catalog.
    """

    def __init__(
        self,
        *,
        registry: str,
        image: str = versions.EFA_DEVICE_PLUGIN.image,
        instance_types: Optional[Sequence[str]] = None,
    ) -> None:
        problems = Problems(f"{NAME} chart")
        check_text(problems, "registry", registry, allowed="a container registry host, such as 602401143452.dkr...")
        check_image_reference(problems, "image", image)
        check_instance_types(problems, "instance_types", instance_types)
        problems.raise_if_any()
        super().__init__(NAME, namespace="kube-system")
        self.instance_types = sorted(instance_types or efa_instance_types())
        self.add_daemon_set(
            NAME,
            {
                "hostNetwork": True,
                "automountServiceAccountToken": False,
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                "priorityClassName": "system-node-critical",
                "affinity": instance_type_affinity(self.instance_types),
                "tolerations": [exists_toleration("CriticalAddonsOnly")]
                + [exists_toleration(key, "NoSchedule") for key in ACCELERATOR_TAINT_KEYS],
                "containers": [
                    {
                        "name": NAME,
                        "image": f"{registry}/{image}",
                        "imagePullPolicy": "IfNotPresent",
                        "securityContext": {"privileged": True, "runAsUser": 0},
                        "resources": device_plugin_resources(),
                        "volumeMounts": [
                            {"name": "device-plugin", "mountPath": DEVICE_PLUGIN_PATH},
                            {"name": "infiniband", "mountPath": "/dev/infiniband"},
                            {"name": "neuron-tools", "mountPath": NEURON_TOOLS},
                        ],
                    }
                ],
                "volumes": [
                    {"name": "device-plugin", "hostPath": {"path": DEVICE_PLUGIN_PATH}},
                    {"name": "infiniband", "hostPath": {"path": "/dev/infiniband"}},
                    {
                        "name": "neuron-tools",
                        "hostPath": {"path": NEURON_TOOLS, "type": "DirectoryOrCreate"},
                    },
                ],
            },
            annotations=checkov_skips(
                {
                    "CKV_K8S_8": audit.PLUGIN_PROBES,
                    "CKV_K8S_9": audit.PLUGIN_PROBES,
                    "CKV_K8S_16": audit.EFA_PLUGIN_PRIVILEGED,
                    "CKV_K8S_19": audit.EFA_PLUGIN_PRIVILEGED,
                    "CKV_K8S_20": audit.EFA_PLUGIN_PRIVILEGED,
                    "CKV_K8S_22": audit.EFA_PLUGIN_PRIVILEGED,
                    "CKV_K8S_23": audit.PLUGIN_ROOT,
                    "CKV_K8S_28": audit.EFA_PLUGIN_PRIVILEGED,
                    "CKV_K8S_37": audit.EFA_PLUGIN_PRIVILEGED,
                    "CKV_K8S_40": audit.PLUGIN_ROOT,
                    **image_skips(image),
                }
            ),
        )
