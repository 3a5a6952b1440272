"""PodIdentityRole: a described role trusted only by EKS Pod Identity, without permissions until a caller grants."""

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_iam as iam

from tests.support.apps import new_app, only, resources_of
from tests.support.clusters import ENV
from trainium_eks.constructs.pod_identity_role import POD_IDENTITY_PRINCIPAL, PodIdentityRole
from trainium_eks.core.validation import ConfigurationError


def test_the_role_trusts_eks_pod_identity_with_session_tags_and_has_no_permissions():
    stack = cdk.Stack(new_app(), "Pods", env=ENV)
    PodIdentityRole(stack, "Csi", description="FSx CSI driver (kube-system/fsx-csi-controller-sa)")
    template = assertions.Template.from_stack(stack)
    props = only(template, "AWS::IAM::Role")["Properties"]
    assert POD_IDENTITY_PRINCIPAL == "pods.eks.amazonaws.com"
    assert props["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
        }
    ]
    assert props["Description"] == "FSx CSI driver (kube-system/fsx-csi-controller-sa)"
    assert "ManagedPolicyArns" not in props and "Policies" not in props
    assert resources_of(template, "AWS::IAM::Policy") == {}


def test_what_a_caller_grants_lands_on_that_role_only():
    stack = cdk.Stack(new_app(), "Pods", env=ENV)
    reader = PodIdentityRole(stack, "Reader", description="Readers (training/reader)")
    PodIdentityRole(stack, "Other", description="Others (training/other)")
    reader.role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=["arn:aws:s3:::b/*"]))
    template = assertions.Template.from_stack(stack)
    policy = only(template, "AWS::IAM::Policy")["Properties"]
    assert policy["Roles"] == [{"Ref": stack.get_logical_id(reader.role.node.default_child)}]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert (statement["Action"], statement["Resource"]) == ("s3:GetObject", "arn:aws:s3:::b/*")
    assert len(resources_of(template, "AWS::IAM::Role")) == 2


def test_the_description_is_required():
    stack = cdk.Stack(new_app(), "Pods", env=ENV)
    with pytest.raises(TypeError, match="description"):
        PodIdentityRole(stack, "Anonymous")


@pytest.mark.parametrize("description", ["", None, " padded", "x" * 1001])
def test_an_empty_padded_or_too_long_description_is_refused(description):
    stack = cdk.Stack(new_app(), "Pods", env=ENV)
    with pytest.raises(ConfigurationError, match="description="):
        PodIdentityRole(stack, "Bad", description=description)
