"""What a node of a stack offers pods: allocatable CPU, memory and pods on EKS AL2023 nodes, and what the EKS add-ons'
own DaemonSets take on every node.

Sources (read 2026-12-01):

- Allocatable = capacity - kubeReserved - systemReserved - hard eviction (Kubernetes, "Reserve Compute Resources for
  System Daemons"). AL2023's nodeadm sets kubeReserved CPU 6 % of the first core, 1 % of the second, 0.5 % of cores 3
  and 4 and 0.25 % of the rest; kubeReserved memory ``11 * maxPods + 255`` MiB; no systemReserved; evictionHard
  ``memory.available: 100Mi`` (awslabs/amazon-eks-ami v20260724 ``nodeadm/internal/kubelet/config.go``
  ``getCPUMillicoresToReserve``, ``getMemoryMebibytesToReserve``, ``defaultKubeletSubConfig``).
- maxPods: ENIs of network card 0 x (IPv4 addresses per ENI - 1) + 2 (``nodeadm/internal/kubelet/eni_max_pods.go``;
  the values equal aws/amazon-vpc-cni-k8s ``misc/eni-max-pods.txt``). A managed node group without a custom AMI caps
  the pods a node takes at 110 below 30 vCPUs and 250 above (EKS user guide, "Choosing an instance type", maxPods),
  but nodeadm reserves memory for its own figure.
- Memory capacity: the EC2 figure (an upper bound: the kernel's MemTotal is a little lower; not known offline).
- Add-on DaemonSets (every one tolerates every taint): vpc-cni ``aws-node`` 50m, kube-proxy 100m (eksctl's dump of an
  EKS DaemonSet), eks-pod-identity-agent none, eks-node-monitoring-agent 10m / 30Mi, amazon-cloudwatch-observability's
  cloudwatch-agent 250m / 128Mi and fluent-bit 50m / 25Mi, plus dcgm-exporter 250m / 128Mi on NVIDIA nodes and
  neuron-monitor 256m / 128Mi on Neuron nodes, aws-efs-csi-driver's node pod none, aws-fsx-csi-driver's 30m / 104Mi
  (their charts: aws/amazon-vpc-cni-k8s ``charts/aws-vpc-cni/values.yaml``, aws/eks-node-monitoring-agent chart
  1.7.0, aws-observability/helm-charts amazon-cloudwatch-observability 6.4.0, kubernetes-sigs/aws-efs-csi-driver
  chart 4.4.1, kubernetes-sigs/aws-fsx-csi-driver chart 1.17.0). EKS's own builds of the add-ons may differ a little.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, Optional, Tuple

from trainium_eks.facts.catalog import Accelerator, instance_facts

MAX_PODS: Mapping[str, int] = {
    "trn1.2xlarge": 58,
    "trn1.32xlarge": 247,
    "trn1n.32xlarge": 247,
    "trn2.48xlarge": 100,
    "m5.xlarge": 58,
    "m7i.xlarge": 58,
    "g5.xlarge": 58,
    "g6.xlarge": 58,
    "g5.12xlarge": 737,
    "p4d.24xlarge": 737,
    "p5.48xlarge": 100,
}
"""nodeadm's maxPods per instance type (eni-max-pods.txt), for the types read offline. Another type counts as the
managed node group's cap (110 or 250), which bounds its pods either way."""

MANAGED_NODE_GROUP_POD_CAP = (110, 250)
"""The pods a managed node group's node takes at most: below 30 vCPUs, and from 30."""

EVICTION_HARD_MIB = 100


@dataclass(frozen=True)
class AddonPod:
    """The per-node pod of an EKS add-on: what it requests, and on which nodes it runs."""

    addon: str
    name: str
    millicpu: int
    memory_mib: int
    accelerator: Optional[Accelerator] = None
    """Only on nodes of this accelerator (None: every node)."""


ADDON_PODS: Tuple[AddonPod, ...] = (
    AddonPod("vpc-cni", "aws-node", 50, 0),
    AddonPod("kube-proxy", "kube-proxy", 100, 0),
    AddonPod("eks-pod-identity-agent", "eks-pod-identity-agent", 0, 0),
    AddonPod("eks-node-monitoring-agent", "eks-node-monitoring-agent", 10, 30),
    AddonPod("amazon-cloudwatch-observability", "cloudwatch-agent", 250, 128),
    AddonPod("amazon-cloudwatch-observability", "fluent-bit", 50, 25),
    AddonPod("amazon-cloudwatch-observability", "dcgm-exporter", 250, 128, Accelerator.NVIDIA),
    AddonPod("amazon-cloudwatch-observability", "neuron-monitor", 256, 128, Accelerator.NEURON),
    AddonPod("aws-efs-csi-driver", "efs-csi-node", 0, 0),
    AddonPod("aws-fsx-csi-driver", "fsx-csi-node", 30, 104),
)


def kube_reserved_millicpu(vcpus: int) -> int:
    """nodeadm's kubeReserved CPU for ``vcpus`` cores."""
    total = vcpus * 1000
    reserved = 0
    for low, high, per_10000 in ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, total, 25)):
        if total > low:
            reserved += (min(total, high) - low) * per_10000 // 10000
    return reserved


def pod_cap(instance_type: str) -> int:
    """The managed node group's cap on a node's pods."""
    return MANAGED_NODE_GROUP_POD_CAP[0] if instance_facts(instance_type).vcpus < 30 else MANAGED_NODE_GROUP_POD_CAP[1]


def max_pods(instance_type: str) -> int:
    """nodeadm's maxPods of ``instance_type`` (:data:`MAX_PODS`, else the managed node group's cap)."""
    return MAX_PODS.get(instance_type, pod_cap(instance_type))


def allocatable(instance_type: str) -> Dict[str, int]:
    """CPU (millicores), memory (MiB) and pods a node of ``instance_type`` offers to pods."""
    facts = instance_facts(instance_type)
    cap = pod_cap(instance_type)
    reserved_memory = 11 * max_pods(instance_type) + 255
    return {
        "cpu": facts.vcpus * 1000 - kube_reserved_millicpu(facts.vcpus),
        "memory": facts.memory_gib * 1024 - reserved_memory - EVICTION_HARD_MIB,
        "pods": min(max_pods(instance_type), cap),
    }


def addon_pods(addons: Iterable[str], accelerator: Accelerator) -> Tuple[AddonPod, ...]:
    """The add-on pods a node of ``accelerator`` runs, for the EKS add-ons ``addons`` of the cluster."""
    installed = set(addons)
    return tuple(
        pod
        for pod in ADDON_PODS
        if pod.addon in installed and (pod.accelerator is None or pod.accelerator is accelerator)
    )
