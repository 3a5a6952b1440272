"""PodIdentityRole: an IAM role that Kubernetes service accounts assume through EKS Pod Identity."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct

from trainium_eks.core.validation import Problems, check_text

POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
"""Service principal of EKS Pod Identity. Source: Amazon EKS user guide, "Create IAM role with trust policy
required by EKS Pod Identity" (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html)."""


MAX_DESCRIPTION = 1000
"""The longest description of an IAM role (IAM API reference, CreateRole: Description, maximum length 1000)."""


class PodIdentityRole(Construct):
    """An IAM role with the trust policy EKS Pod Identity needs (``sts:AssumeRole`` and ``sts:TagSession`` by
    ``pods.eks.amazonaws.com``) and no permissions; callers grant what the pods need. Exposed as :attr:`role`.

    :param description: The role's description, at most 1,000 characters (IAM's limit). Required, so that every
        role says whom it serves.
    """

    def __init__(self, scope: Construct, id_: str, *, description: str) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        if check_text(problems, "description", description, allowed="a description of whom the role serves"):
            if len(description) > MAX_DESCRIPTION:
                problems.add("description", f"{description[:40]}...", f"at most {MAX_DESCRIPTION} characters (IAM)")
        problems.raise_if_any()
        self.role = iam.Role(
            self,
            "Role",
            description=description,
            assumed_by=iam.ServicePrincipal(POD_IDENTITY_PRINCIPAL).with_session_tags(),
        )
