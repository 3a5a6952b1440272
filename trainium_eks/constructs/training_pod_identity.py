"""TrainingPodIdentity: the AWS identity of training pods, through EKS Pod Identity."""

from __future__ import annotations

from typing import Optional

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from trainium_eks.constructs.pod_identity_role import PodIdentityRole
from trainium_eks.core.cfn_text import cfn_text
from trainium_eks.core.conventions import DEFAULT_NAMESPACE, DEFAULT_SERVICE_ACCOUNT
from trainium_eks.core.nag import acknowledge
from trainium_eks.core.validation import (
    Problems,
    check_cluster,
    check_dns_label,
    check_dns_subdomain,
    check_implements,
)

DATA_BUCKET_OBJECT_ACTIONS = ("s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload")
"""What training pods may do with the objects of the data bucket (plus s3:ListBucket on the bucket)."""


class TrainingPodIdentity(Construct):
    """The IAM role of training pods and its EKS Pod Identity association with their service account.

    The role may list the data bucket, read its objects and write objects (checkpoints, logs), and nothing else; it
    cannot delete objects. Only ``namespace/service_account`` of ``cluster`` can assume it
    (:class:`~trainium_eks.constructs.pod_identity_role.PodIdentityRole`). Without a data bucket it has no permissions
    at all, ready for the caller's grants.

    :param cluster: Required.
    :param data_bucket: Default: none.
    :param namespace: Default: :data:`DEFAULT_NAMESPACE`.
    :param service_account: Default: :data:`DEFAULT_SERVICE_ACCOUNT`.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster: eks.ICluster,
        data_bucket: Optional[s3.IBucket] = None,
        namespace: str = DEFAULT_NAMESPACE,
        service_account: str = DEFAULT_SERVICE_ACCOUNT,
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        check_cluster(problems, "cluster", cluster)
        if data_bucket is not None:
            check_implements(problems, "data_bucket", data_bucket, s3.IBucket, "an s3.IBucket")
        check_dns_label(problems, "namespace", namespace)
        check_dns_subdomain(problems, "service_account", service_account)
        problems.raise_if_any()
        self.namespace = namespace
        self.service_account = service_account
        self.role = PodIdentityRole(
            self,
            "Role",
            cluster=cluster,
            namespace=namespace,
            service_account=service_account,
            description=f"Training pods ({namespace}/{service_account})",
        ).role
        if data_bucket is not None:
            objects = data_bucket.arn_for_objects("*")
            self.role.add_to_principal_policy(
                iam.PolicyStatement(actions=["s3:ListBucket"], resources=[data_bucket.bucket_arn])
            )
            self.role.add_to_principal_policy(
                iam.PolicyStatement(actions=list(DATA_BUCKET_OBJECT_ACTIONS), resources=[objects])
            )
            acknowledge(
                self.role,
                "AwsSolutions-IAM5",
                "Training pods read and write objects anywhere in the one data bucket they train from "
                "(datasets, checkpoints); they cannot delete objects or touch another bucket.",
                "Resource::" + cfn_text(Stack.of(self).resolve(objects)),
            )
        self.association = eks.CfnPodIdentityAssociation(
            self,
            "Association",
            cluster_name=cluster.cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=self.role.role_arn,
        )
