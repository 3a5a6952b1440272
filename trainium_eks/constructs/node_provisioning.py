"""NodeProvisioning: whether a stack's training nodes stand (a managed node group) or come for the work (Karpenter)."""

from __future__ import annotations

from enum import Enum


class NodeProvisioning(Enum):
    """How a stack provisions its training nodes.

    ``KARPENTER`` (the stacks' default): a :class:`~trainium_eks.constructs.training_node_pool.TrainingNodePool` per
    kind of node; nodes are launched when a job's pods are pending and removed once idle, so a cluster without work
    bills only its control plane, system nodes, storage and NAT gateways.

    ``NODE_GROUP``: a :class:`~trainium_eks.constructs.training_node_group.TrainingNodeGroup` per kind of node, a
    managed node group with the EFA launch template, whose nodes run (and bill) from deploy to destroy; for fixed
    capacity, or where Karpenter cannot run. ``node_count=0`` scales it to zero and keeps the cluster, the storage
    and the job history.
    """

    KARPENTER = "karpenter"
    NODE_GROUP = "node-group"
