"""CDK constructs: the AWS resources of a training cluster, and what applies in-cluster charts and jobs."""

from trainium_eks.constructs.cluster import TrainingCluster
from trainium_eks.constructs.cluster_addons import ClusterAddons
from trainium_eks.constructs.dns_firewall import DnsFirewall, DnsFirewallMode
from trainium_eks.constructs.efa_layout import EfaLayout
from trainium_eks.constructs.efs_storage import EfsStorage
from trainium_eks.constructs.hybrid_workflow import HybridTrainingWorkflow
from trainium_eks.constructs.image_repository import TrainingImageRepository
from trainium_eks.constructs.job_sequence import JobSequence
from trainium_eks.constructs.karpenter_controller import KarpenterController
from trainium_eks.constructs.kubectl_handler_guard import KubectlHandlerGuard
from trainium_eks.constructs.kubectl_invocation_alarm import KubectlInvocationAlarm
from trainium_eks.constructs.kubeflow_trainer import KubeflowTrainer
from trainium_eks.constructs.lustre_storage import LustreStorage
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.constructs.node_capacity import NodeCapacity
from trainium_eks.constructs.node_provisioning import NodeProvisioning
from trainium_eks.constructs.node_role import NodeRole
from trainium_eks.constructs.preflight import Preflight
from trainium_eks.constructs.training_dashboard import TrainingDashboard
from trainium_eks.constructs.training_node_group import TrainingNodeGroup
from trainium_eks.constructs.training_node_pool import TrainingNodePool
from trainium_eks.constructs.training_pod_identity import TrainingPodIdentity
from trainium_eks.core.conventions import EfsVolumeSource, LustreVolumeSource
from trainium_eks.moved import deprecated_names

__all__ = [
    "ClusterAddons",
    "DnsFirewall",
    "DnsFirewallMode",
    "EfaLayout",
    "EfsStorage",
    "EfsVolumeSource",
    "HybridTrainingWorkflow",
    "JobSequence",
    "KarpenterController",
    "KubectlHandlerGuard",
    "KubectlInvocationAlarm",
    "KubeflowTrainer",
    "LustreStorage",
    "LustreVolumeSource",
    "NodeCapacity",
    "NodeProvisioning",
    "NodeRole",
    "Preflight",
    "TrainingCluster",
    "TrainingDashboard",
    "TrainingImageRepository",
    "TrainingNetwork",
    "TrainingNodeGroup",
    "TrainingNodePool",
    "TrainingPodIdentity",
]

__getattr__ = deprecated_names(__name__, {"AcceleratedNodeGroup": "TrainingNodeGroup"}, globals())
