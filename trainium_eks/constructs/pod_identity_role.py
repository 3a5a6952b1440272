"""PodIdentityRole: an IAM role that one Kubernetes service account of one cluster assumes through EKS Pod Identity."""

from __future__ import annotations

from typing import Any, Dict

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from trainium_eks.core.validation import Problems, check_dns_label, check_dns_subdomain, check_implements, check_text

POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
"""Service principal of EKS Pod Identity. Source: Amazon EKS user guide, "Create IAM role with trust policy
required by EKS Pod Identity" (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html)."""

SESSION_TAGS = ("eks-cluster-arn", "kubernetes-namespace", "kubernetes-service-account")
"""The session tags of EKS Pod Identity that bind a role to one cluster, namespace and service account. EKS adds
``eks-cluster-arn``, ``eks-cluster-name``, ``kubernetes-namespace``, ``kubernetes-service-account``,
``kubernetes-pod-name`` and ``kubernetes-pod-uid`` to its ``AssumeRole`` request unless the association disables
session tags (none of the library's does), and pod-id-role.html shows the trust condition ``StringEquals`` on
``aws:RequestTag/kubernetes-namespace`` and ``aws:RequestTag/kubernetes-service-account``. Source: Amazon EKS user
guide, pod-id-role.html and pod-id-abac.html ("List of session tags added by EKS Pod Identity")."""

MAX_DESCRIPTION = 1000
"""The longest description of an IAM role (IAM API reference, CreateRole: Description, maximum length 1000)."""


def pod_identity_conditions(*, cluster_arn: str, namespace: str, service_account: str) -> Dict[str, Any]:
    """The trust conditions of a role of ``namespace/service_account`` in the cluster ``cluster_arn``: the session
    tags of :data:`SESSION_TAGS` (the cluster's ARN names its account too), as in pod-id-role.html's example."""
    return {
        "StringEquals": {
            "aws:RequestTag/eks-cluster-arn": cluster_arn,
            "aws:RequestTag/kubernetes-namespace": namespace,
            "aws:RequestTag/kubernetes-service-account": service_account,
        }
    }


class PodIdentityRole(Construct):
    """An IAM role with the trust policy EKS Pod Identity needs (``sts:AssumeRole`` and ``sts:TagSession`` by
    ``pods.eks.amazonaws.com``), bound to ``namespace/service_account`` of ``cluster`` by the session tags EKS sends
    (:func:`pod_identity_conditions`), and no permissions; callers grant what the pods need. A Pod Identity
    association of another cluster, namespace or service account that names this role is refused by STS. Exposed as
    :attr:`role`.

    :param cluster: The cluster whose pods assume the role. Required.
    :param namespace: The service account's namespace. Required.
    :param service_account: The service account. Required.
    :param description: The role's description, at most 1,000 characters (IAM's limit). Required, so that every
        role says whom it serves.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster: eks.ICluster,
        namespace: str,
        service_account: str,
        description: str,
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        check_implements(problems, "cluster", cluster, eks.ICluster, "an eks.ICluster")
        check_dns_label(problems, "namespace", namespace)
        check_dns_subdomain(problems, "service_account", service_account)
        if check_text(problems, "description", description, allowed="a description of whom the role serves"):
            if len(description) > MAX_DESCRIPTION:
                problems.add("description", f"{description[:40]}...", f"at most {MAX_DESCRIPTION} characters (IAM)")
        problems.raise_if_any()
        self.namespace = namespace
        self.service_account = service_account
        self.role = iam.Role(
            self,
            "Role",
            description=description,
            assumed_by=iam.ServicePrincipal(
                POD_IDENTITY_PRINCIPAL,
                conditions=pod_identity_conditions(
                    cluster_arn=cluster.cluster_arn,
                    namespace=namespace,
                    service_account=service_account,
                ),
            ).with_session_tags(),
        )
