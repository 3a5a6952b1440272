"""NodeRole: the IAM role of EKS worker nodes."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct

from trainium_eks.core.nag import acknowledge, managed_policy_findings

NODE_MANAGED_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonElasticContainerRegistryPublicReadOnly",
    "AmazonSSMManagedInstanceCore",
)
"""AWS managed policies of the node role: what the kubelet, the VPC CNI and image pulls need (private ECR, and
public.ecr.aws with the account's higher pull limits: the Neuron device plugin and training DLC come from there),
plus SSM Session Manager instead of SSH. Source: Amazon EKS user guide, "Amazon EKS node IAM role"
(https://docs.aws.amazon.com/eks/latest/userguide/create-node-role.html); aws-neuron-eks-samples
cfn/eks_trn1_ng_stack.yaml NodeInstanceRole (AmazonElasticContainerRegistryPublicReadOnly since commit b404b3f)."""


class NodeRole(Construct):
    """The IAM role that EC2 worker nodes of a cluster assume.

    It carries the AWS managed policies in :data:`NODE_MANAGED_POLICIES` and nothing else. Nodes reach the
    instance metadata service with IMDSv2 and a hop limit of 2, so pods that need AWS credentials get them
    through EKS Pod Identity, never from this role.

    The role is exposed as :attr:`role`.
    """

    def __init__(self, scope: Construct, id_: str) -> None:
        super().__init__(scope, id_)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="EKS worker nodes: kubelet, VPC CNI, image pulls and SSM Session Manager",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(name) for name in NODE_MANAGED_POLICIES],
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM4",
            "EKS nodes need the AWS managed node policies (AmazonEKSWorkerNodePolicy, AmazonEKS_CNI_Policy, "
            "AmazonEC2ContainerRegistryReadOnly, AmazonElasticContainerRegistryPublicReadOnly), which AWS keeps "
            "current with the EKS, CNI and ECR APIs; "
            "AmazonSSMManagedInstanceCore replaces SSH with Session Manager.",
            *managed_policy_findings(NODE_MANAGED_POLICIES),
        )
