"""An account and region for test stacks, and an EKS cluster imported the way a user's existing cluster is."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks

from trainium_eks.constructs.network import TrainingNetwork

ENV = cdk.Environment(region="us-west-2", account="123456789012")


def imported_cluster(stack, **overrides):
    """A network of the stack and a cluster imported into it with a kubectl provider by its attributes (``overrides``
    replace them)."""
    network = TrainingNetwork(stack, "Network", node_az_id="usw2-az4")
    handler_role = "arn:aws:iam::123456789012:role/kubectl-handler"
    attributes = dict(
        cluster_name="existing",
        vpc=network.vpc,
        cluster_security_group_id="sg-0123456789abcdef0",
        kubectl_provider=eks.KubectlProvider.from_kubectl_provider_attributes(
            stack,
            "Kubectl",
            service_token="arn:aws:lambda:us-west-2:123456789012:function:kubectl-provider",
            role=cdk.aws_iam.Role.from_role_arn(stack, "KubectlRole", handler_role),
        ),
    )
    attributes.update(overrides)
    return network, eks.Cluster.from_cluster_attributes(stack, "Existing", **attributes)
