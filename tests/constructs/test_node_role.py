"""NodeRole: the EKS node policies and SSM."""

import json

from tests.support.apps import role_by_description
from trainium_eks.constructs.node_role import NODE_MANAGED_POLICIES


def test_node_role_has_the_eks_node_policies_and_ssm(template):
    _, role = role_by_description(template, "EKS worker nodes")
    arns = {json.dumps(a) for a in role["ManagedPolicyArns"]}
    assert len(arns) == len(NODE_MANAGED_POLICIES)
    for name in NODE_MANAGED_POLICIES:
        assert any(f"policy/{name}" in a for a in arns), name
    assert "AmazonElasticContainerRegistryPublicReadOnly" in NODE_MANAGED_POLICIES, "public.ecr.aws pulls, signed"
