"""The stacks of the default app, one per seed system, on the base they share (``training_cluster_stack``), with the
props every stack takes (``cluster_stack_props``) and the app's context (``app_context``)."""

from trainium_eks.stacks.cluster_stack_props import DEFAULT_AZ_ID, ClusterStackProps
from trainium_eks.stacks.composer_training_stack import ComposerTrainingStack
from trainium_eks.stacks.kubeflow_training_stack import KubeflowTrainingStack
from trainium_eks.stacks.training_cluster_stack import NodeTypes, TrainingClusterStack
from trainium_eks.stacks.trainium_eks_stack import TrainiumEksStack

__all__ = [
    "DEFAULT_AZ_ID",
    "ClusterStackProps",
    "ComposerTrainingStack",
    "KubeflowTrainingStack",
    "NodeTypes",
    "TrainingClusterStack",
    "TrainiumEksStack",
]
