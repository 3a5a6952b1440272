"""NodeRole: the kubelet's policies only (no CNI policy, no SSM), on every node role of every stack."""

import json

import pytest

from tests.support.apps import resources_of, role_by_description, stack_template
from trainium_eks.constructs.node_role import NODE_MANAGED_POLICIES
from trainium_eks.stacks.app_context import STACKS


def test_node_role_has_the_kubelet_policies_only(template):
    _, role = role_by_description(template, "EKS worker nodes")
    arns = {json.dumps(a) for a in role["ManagedPolicyArns"]}
    assert len(arns) == len(NODE_MANAGED_POLICIES)
    for name in NODE_MANAGED_POLICIES:
        assert any(f"policy/{name}" in a for a in arns), name
    assert NODE_MANAGED_POLICIES == (
        "AmazonEKSWorkerNodePolicy",
        "AmazonEC2ContainerRegistryPullOnly",
        "AmazonElasticContainerRegistryPublicReadOnly",
    )


@pytest.mark.parametrize("name", STACKS)
def test_no_node_role_of_any_stack_carries_the_cni_or_ssm_policy(name):
    template = stack_template(name)
    node_roles = {
        logical_id: role
        for logical_id, role in resources_of(template, "AWS::IAM::Role").items()
        if role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        == {"Service": "ec2.amazonaws.com"}
    }
    assert len(node_roles) >= 2, "the system nodes' role and Karpenter's"
    for logical_id, role in node_roles.items():
        policies = json.dumps(role["Properties"].get("ManagedPolicyArns", []))
        assert "AmazonEKS_CNI_Policy" not in policies, logical_id
        assert "AmazonSSMManagedInstanceCore" not in policies, logical_id
        assert "Policies" not in role["Properties"], logical_id
