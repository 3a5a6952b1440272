"""TrainingPodIdentity: the AWS identity of training pods, through EKS Pod Identity."""

from __future__ import annotations

from typing import Optional

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
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
    check_key_prefix,
)

DATA_READ_ACTIONS = ("s3:GetObject",)
"""What training pods may do with the objects below the data bucket's read prefixes (plus ``s3:ListBucket`` of
those prefixes)."""

DATA_WRITE_ACTIONS = ("s3:PutObject", "s3:AbortMultipartUpload")
"""What training pods may do with the objects below the data bucket's write prefix, when there is one."""


class TrainingPodIdentity(Construct):
    """The IAM role of training pods and its EKS Pod Identity association with their service account.

    The role may list and read the data bucket below ``data_read_prefix`` (:data:`DATA_READ_ACTIONS`), and, only
    with ``data_write_prefix``, write objects below that prefix and read them back (:data:`DATA_WRITE_ACTIONS`), and
    nothing else; it cannot delete objects. So by default no training pod can overwrite the data it trains from. With
    ``data_bucket_endpoint``, every one of these statements requires the request to come through that VPC endpoint
    (``aws:SourceVpce``), so credentials taken out of a pod do not reach the bucket from anywhere else. Only
    ``namespace/service_account`` of ``cluster`` can assume it
    (:class:`~trainium_eks.constructs.pod_identity_role.PodIdentityRole`). Without a data bucket it has no permissions
    at all, ready for the caller's grants.

    :param cluster: Required.
    :param data_bucket: Default: none.
    :param data_read_prefix: Key prefix the pods may list and read. Default: the whole bucket.
    :param data_write_prefix: Key prefix the pods may also write. Default: none (read only).
    :param data_bucket_endpoint: The S3 gateway endpoint the pods' requests pass through (a
        :class:`~trainium_eks.constructs.network.TrainingNetwork`'s ``s3_endpoint``). Default: none (no condition).
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
        data_read_prefix: str = "",
        data_write_prefix: Optional[str] = None,
        data_bucket_endpoint: Optional[ec2.IVpcEndpoint] = None,
        namespace: str = DEFAULT_NAMESPACE,
        service_account: str = DEFAULT_SERVICE_ACCOUNT,
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        check_cluster(problems, "cluster", cluster)
        if data_bucket is not None:
            check_implements(problems, "data_bucket", data_bucket, s3.IBucket, "an s3.IBucket")
        check_key_prefix(problems, "data_read_prefix", data_read_prefix)
        if data_write_prefix is not None and check_key_prefix(
            problems, "data_write_prefix", data_write_prefix, empty=False
        ):
            if data_bucket is None:
                problems.add("data_write_prefix", data_write_prefix, "set only with a data bucket")
        if data_bucket_endpoint is not None:
            check_implements(
                problems, "data_bucket_endpoint", data_bucket_endpoint, ec2.IVpcEndpoint, "an ec2.IVpcEndpoint"
            )
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
            self._grant_data_bucket(data_bucket, data_read_prefix, data_write_prefix, data_bucket_endpoint)
        self.association = eks.CfnPodIdentityAssociation(
            self,
            "Association",
            cluster_name=cluster.cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=self.role.role_arn,
        )

    def _grant_data_bucket(
        self,
        bucket: s3.IBucket,
        read_prefix: str,
        write_prefix: Optional[str],
        endpoint: Optional[ec2.IVpcEndpoint],
    ) -> None:
        """List and read below the read prefix (and the write prefix), write below the write prefix, each through
        ``endpoint`` when given."""
        through = {"StringEquals": {"aws:SourceVpce": endpoint.vpc_endpoint_id}} if endpoint is not None else {}
        prefixes = [read_prefix] + ([write_prefix] if write_prefix is not None else [])
        listed = {"StringLike": {"s3:prefix": [f"{prefix}*" for prefix in prefixes]}} if read_prefix else {}
        readable = [bucket.arn_for_objects(f"{prefix}*") for prefix in prefixes]
        writable = [bucket.arn_for_objects(f"{write_prefix}*")] if write_prefix is not None else []
        grants = [
            (["s3:ListBucket"], [bucket.bucket_arn], {**listed, **through}),
            (list(DATA_READ_ACTIONS), readable, through),
            (list(DATA_WRITE_ACTIONS), writable, through),
        ]
        for actions, resources, conditions in grants:
            if resources:
                self.role.add_to_principal_policy(
                    iam.PolicyStatement(actions=actions, resources=resources, conditions=conditions or None)
                )
        stack = Stack.of(self)
        acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "Training pods read the objects below the data bucket's read prefix, and write only below its write "
            "prefix when one is set; they cannot delete objects or touch another bucket.",
            *("Resource::" + cfn_text(stack.resolve(arn)) for arn in dict.fromkeys(readable + writable)),
        )
