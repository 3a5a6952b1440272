"""PodIdentityRole: an IAM role that Kubernetes service accounts assume through EKS Pod Identity."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct

POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
"""Service principal of EKS Pod Identity. Source: Amazon EKS user guide, "Create IAM role with trust policy
required by EKS Pod Identity" (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html)."""


class PodIdentityRole(Construct):
    """An IAM role with the trust policy EKS Pod Identity needs (``sts:AssumeRole`` and ``sts:TagSession`` by
    ``pods.eks.amazonaws.com``) and no permissions; callers grant what the pods need. Exposed as :attr:`role`.

    :param description: The role's description. Required, so that every role says whom it serves.
    """

    def __init__(self, scope: Construct, id_: str, *, description: str) -> None:
        super().__init__(scope, id_)
        self.role = iam.Role(
            self,
            "Role",
            description=description,
            assumed_by=iam.ServicePrincipal(POD_IDENTITY_PRINCIPAL).with_session_tags(),
        )
