"""NodeRole: the IAM role of EKS worker nodes."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct

from trainium_eks.core.nag import acknowledge, managed_policy_findings

NODE_MANAGED_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonElasticContainerRegistryPublicReadOnly",
)
"""AWS managed policies of the node role, what the kubelet and the node's own agents need and nothing more:

- ``AmazonEKSWorkerNodePolicy``: the kubelet describes EC2 resources, and the EKS Pod Identity agent calls
  ``eks-auth:AssumeRoleForPodIdentity`` with it;
- ``AmazonEC2ContainerRegistryPullOnly``: the kubelet pulls images from private ECR (the add-ons' images among them);
- ``AmazonElasticContainerRegistryPublicReadOnly``: the kubelet's ECR credential provider also authenticates pulls from
  ``public.ecr.aws`` (nodeadm ``internal/kubelet/image-credential-provider.go`` of awslabs/amazon-eks-ami lists it in
  ``matchImages``), where the Neuron device plugin and the training DLC come from.

Not here: ``AmazonEKS_CNI_Policy``, which the VPC CNI gets through its own Pod Identity role
(:class:`~trainium_eks.constructs.cluster.TrainingCluster`), and ``AmazonSSMManagedInstanceCore``: nothing the stacks
run uses Systems Manager (``kubectl debug node/...`` reaches a node's file system without it).
Sources: Amazon EKS user guide, "Amazon EKS node IAM role" (create-node-role.html: AmazonEKSWorkerNodePolicy and
AmazonEC2ContainerRegistryPullOnly; the CNI policy only "if you don't use IRSA or EKS Pod Identity to give permissions
to the VPC CNI pods", and "we recommend removing it" from the node role); aws-neuron-eks-samples
cfn/eks_trn1_ng_stack.yaml NodeInstanceRole (AmazonElasticContainerRegistryPublicReadOnly since commit b404b3f)."""


class NodeRole(Construct):
    """The IAM role that EC2 worker nodes of a cluster assume.

    It carries the AWS managed policies in :data:`NODE_MANAGED_POLICIES` and nothing else. The nodes' launch templates
    and EC2NodeClasses set the IMDSv2 hop limit to :data:`~trainium_eks.core.conventions.IMDS_HOP_LIMIT` (1), so only
    processes on the host network (kubelet, aws-node, kube-proxy, the Pod Identity agent, CSI node plugins) can read
    this role's credentials; a pod on the pod network cannot, and gets its own through EKS Pod Identity.

    The role is exposed as :attr:`role`.
    """

    def __init__(self, scope: Construct, id_: str) -> None:
        super().__init__(scope, id_)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="EKS worker nodes: kubelet, Pod Identity agent and image pulls",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(name) for name in NODE_MANAGED_POLICIES],
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM4",
            "EKS nodes need the AWS managed node policies that the EKS user guide names for the kubelet "
            "(create-node-role.html: AmazonEKSWorkerNodePolicy, AmazonEC2ContainerRegistryPullOnly) and "
            "AmazonElasticContainerRegistryPublicReadOnly for the kubelet's authenticated public.ecr.aws pulls; AWS "
            "keeps them current with the EKS and ECR APIs. IMDSv2 with hop limit 1 keeps them from pods on the pod "
            "network.",
            *managed_policy_findings(NODE_MANAGED_POLICIES),
        )
