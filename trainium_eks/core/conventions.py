"""What the AWS side (``constructs/``) and the Kubernetes side (``manifests/``) of the library agree on.

The names, labels, taints, extended resources and volume sources that a construct creates and a chart refers to
live here, below both: charts depend only on this module (never on ``constructs/``), and constructs apply charts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from trainium_eks.facts.catalog import Accelerator

DEFAULT_NAMESPACE = "training"
"""Namespace of the training jobs, their service account, the shared claim, TensorBoard, and etcd when a job uses it."""

DEFAULT_SERVICE_ACCOUNT = "training"
"""Service account of the training pods, bound to their IAM role by EKS Pod Identity."""

SYSTEM_NODE_LABEL = "trainium-eks/node-role"
SYSTEM_NODE_LABELS: Mapping[str, str] = {SYSTEM_NODE_LABEL: "system"}
"""Labels of the system node group's nodes; the node selector of what belongs there (Volcano, etcd, TensorBoard)."""

SHARED_MOUNT = "/data"
"""Where pods mount the shared claim, as in the tutorial (jobs, staging, TensorBoard)."""

OUTPUT_ROOT = f"{SHARED_MOUNT}/output"
"""Where jobs write their runs (checkpoints, TensorBoard events), one folder per run."""

NEURON_DEVICE_RESOURCE = "aws.amazon.com/neuron"
NEURON_CORE_RESOURCE = "aws.amazon.com/neuroncore"
"""Extended resources of the Neuron device plugin: whole Neuron devices and NeuronCores. Source: Neuron SDK
deploy/includes/k8s-neuron-device-plugin.rst."""

EFA_RESOURCE = "vpc.amazonaws.com/efa"
"""Extended resource of the EFA device plugin: one per EFA interface attached at launch."""

GPU_RESOURCE = "nvidia.com/gpu"
"""Extended resource of the NVIDIA device plugin."""

FABRIC_CHECK_LABEL = "trainium-eks/fabric-check-for"
"""Label of a fabric acceptance job and its pods; its value is the name of the job whose nodes it tests (the
``fabric`` command finds the results by it)."""

HELD_JOB_LABEL = "trainium-eks/held-job"
"""Label of a release Job: the name of the job it creates (the ``run`` command names a workflow run's TrainJob by
it)."""

FABRIC_SUSPECT_TAINT = "trainium-eks/fabric-suspect"
"""Key of the taint (``NoSchedule``, value: the fabric check's name) that a fabric check's release puts on the nodes
the check found slow, when they come from a Karpenter NodePool, before it runs the check again on new nodes: no pod
of the gang fits them any more, and Karpenter's consolidation removes them once empty. Only this taint may the
release accounts add to a node (:mod:`trainium_eks.manifests.access.fabric_suspect_admission`)."""

FABRIC_RESULT_MARKER = "trainium-eks-fabric-result:"
"""What starts the one log line where the fabric acceptance job's node 0 prints its result as JSON."""

INGRESS_POLICY_LABEL = "trainium-eks/ingress-policy"
"""Label of pods whose ingress a NetworkPolicy of their own governs (its value is that policy's name, such as
``tensorboard-clients``, or ``<job>-peers`` on a held job's pods, set by its release): a namespace's ``allow-all``
policy (:class:`~trainium_eks.manifests.access.system_network_policy.SystemNetworkPolicyChart`) leaves them out."""

NO_INGRESS_POLICY = "namespace-baseline"
"""The training namespace's NetworkPolicy that selects every pod and admits no ingress: the value of
:data:`INGRESS_POLICY_LABEL` on pods that take no connection at all, which a release leaves so instead of giving them
its job's peers policy (the dataset staging Jobs, which reach the internet: no pod of the namespace can use them as a
relay)."""

EGRESS_KUBERNETES_API_LABEL = "trainium-eks/egress-kubernetes-api"
"""Label (value ``"true"``) of the pods in the training namespace that may reach the Kubernetes API: the release
Jobs."""

EGRESS_INTERNET_LABEL = "trainium-eks/egress-internet"
"""Label (value ``"true"``) of the pods in the training namespace that may open HTTPS connections to addresses
outside the VPC and the private ranges (through the NAT gateways, or S3's gateway endpoint): the dataset staging Jobs,
and jobs given ``internet_egress=True``."""


@dataclass(frozen=True)
class Taint:
    """A node taint (``key=value:effect``, effect in Kubernetes spelling: ``NoSchedule``)."""

    key: str
    value: str
    effect: str

    def toleration(self) -> dict:
        """The toleration of exactly this taint (plain manifest form)."""
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}

    def manifest(self) -> dict:
        """The taint as a node (or a Karpenter NodePool) spells it."""
        return {"key": self.key, "value": self.value, "effect": self.effect}


ROOT_DEVICE_NAME = "/dev/xvda"
"""Root device of the EKS-optimized Amazon Linux 2023 AMIs: where a node group's launch template and a Karpenter
EC2NodeClass put the root volume."""

IMDS_HOP_LIMIT = 1
"""``HttpPutResponseHopLimit`` of every node (a managed node group's launch template and a Karpenter EC2NodeClass): the
IMDSv2 token response does not survive the extra hop into a pod's network namespace, so only processes on the host
network (kubelet, aws-node, kube-proxy, the EKS Pod Identity agent, the CSI node plugins, the CloudWatch agent) reach
the node role's credentials; pods get theirs from EKS Pod Identity (169.254.170.23, served by the agent on the host
network: its credentials URL is not the instance metadata service). Sources: Amazon EKS user guide, al2023.html ("the
default hop count for managed node groups is set to 1. This means that containers won't have access to the node's
credentials using IMDS") and pod-identities (the agent "uses the hostNetwork of the node"); Karpenter v1.14.1
website/content/en/docs/concepts/nodeclasses.md (``httpPutResponseHopLimit: 1`` "to disable IMDS access from
containers not on the host network"). The add-ons that would otherwise read IMDS from a pod network are given what
they need instead (:mod:`trainium_eks.constructs.cluster`, :mod:`trainium_eks.constructs.karpenter_controller`)."""

ACCELERATOR_TAINTS: Mapping[Accelerator, Taint] = {
    Accelerator.NEURON: Taint(NEURON_DEVICE_RESOURCE, "true", "NoSchedule"),
    Accelerator.NVIDIA: Taint(GPU_RESOURCE, "true", "NoSchedule"),
}
"""The taint that keeps other pods off accelerated nodes, per accelerator (CPU nodes are not tainted), as the AWS
samples taint them (data-on-eks, ai-on-eks)."""


def accelerator_taint(accelerator: Accelerator) -> Optional[Taint]:
    """The taint of ``accelerator``'s nodes, or None for CPU nodes."""
    return ACCELERATOR_TAINTS.get(accelerator)


@dataclass(frozen=True)
class LustreVolumeSource:
    """What Kubernetes needs to mount an FSx for Lustre file system (values or CloudFormation tokens): its id, DNS
    name and mount name, and its size in GiB. ``LustreStorage.volume_source`` gives it; build one for a file system
    created elsewhere."""

    file_system_id: str
    dns_name: str
    mount_name: str
    storage_gib: int


@dataclass(frozen=True)
class EfsVolumeSource:
    """What Kubernetes needs to mount an Amazon EFS file system: its id (a value or a CloudFormation token).
    ``EfsStorage.volume_source`` gives it; build one for a file system created elsewhere."""

    file_system_id: str
