"""PodIdentityRole: a described role trusted only by EKS Pod Identity for one cluster, namespace and service account,
without permissions until a caller grants."""

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_iam as iam

from tests.support.apps import new_app, resources_of, stack_template
from tests.support.clusters import ENV, imported_cluster
from trainium_eks.constructs.pod_identity_role import POD_IDENTITY_PRINCIPAL, SESSION_TAGS, PodIdentityRole
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.stacks.app_context import STACKS


def pods_stack():
    stack = cdk.Stack(new_app(), "Pods", env=ENV)
    _, cluster = imported_cluster(stack)
    return stack, cluster


def role(stack, cluster, id_="Csi", **overrides):
    props = dict(
        cluster=cluster,
        namespace="kube-system",
        service_account="fsx-csi-controller-sa",
        description="FSx CSI driver (kube-system/fsx-csi-controller-sa)",
    )
    props.update(overrides)
    return PodIdentityRole(stack, id_, **props)


def role_of(template, prefix):
    (props,) = [r["Properties"] for k, r in resources_of(template, "AWS::IAM::Role").items() if k.startswith(prefix)]
    return props


def test_the_role_trusts_eks_pod_identity_of_one_cluster_namespace_and_service_account_only():
    stack, cluster = pods_stack()
    role(stack, cluster)
    template = assertions.Template.from_stack(stack)
    props = role_of(template, "Csi")
    assert POD_IDENTITY_PRINCIPAL == "pods.eks.amazonaws.com"
    assert SESSION_TAGS == ("eks-cluster-arn", "kubernetes-namespace", "kubernetes-service-account")
    assert props["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
            "Condition": {
                "StringEquals": {
                    "aws:RequestTag/eks-cluster-arn": stack.resolve(cluster.cluster_arn),
                    "aws:RequestTag/kubernetes-namespace": "kube-system",
                    "aws:RequestTag/kubernetes-service-account": "fsx-csi-controller-sa",
                }
            },
        }
    ]
    assert props["Description"] == "FSx CSI driver (kube-system/fsx-csi-controller-sa)"
    assert "ManagedPolicyArns" not in props and "Policies" not in props
    assert not [k for k in resources_of(template, "AWS::IAM::Policy") if k.startswith("Csi")]


@pytest.mark.parametrize("name", STACKS)
def test_every_pod_identity_role_of_every_stack_names_its_cluster_namespace_and_service_account(name):
    template = stack_template(name)
    (cluster_id,) = resources_of(template, "AWS::EKS::Cluster")
    trusted = {}
    for logical_id, resource in resources_of(template, "AWS::IAM::Role").items():
        for statement in resource["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
            if statement["Principal"] == {"Service": POD_IDENTITY_PRINCIPAL}:
                tags = statement["Condition"]["StringEquals"]
                assert tags["aws:RequestTag/eks-cluster-arn"] == {"Fn::GetAtt": [cluster_id, "Arn"]}, logical_id
                trusted[logical_id] = (
                    tags["aws:RequestTag/kubernetes-namespace"],
                    tags["aws:RequestTag/kubernetes-service-account"],
                )
    # Every association of the stack (add-on or standalone) names a role bound to exactly its service account.
    associations = []
    for addon in resources_of(template, "AWS::EKS::Addon").values():
        namespace = (
            "amazon-cloudwatch"
            if addon["Properties"]["AddonName"] == "amazon-cloudwatch-observability"
            else ("kube-system")
        )
        for association in addon["Properties"].get("PodIdentityAssociations", []):
            associations.append((association["RoleArn"], namespace, association["ServiceAccount"]))
    for association in resources_of(template, "AWS::EKS::PodIdentityAssociation").values():
        props = association["Properties"]
        associations.append((props["RoleArn"], props["Namespace"], props["ServiceAccount"]))
    assert associations and len(associations) == len(trusted)
    for role_arn, namespace, service_account in associations:
        assert trusted[role_arn["Fn::GetAtt"][0]] == (namespace, service_account)


def test_what_a_caller_grants_lands_on_that_role_only():
    stack, cluster = pods_stack()
    reader = role(stack, cluster, "Reader", namespace="training", service_account="reader", description="Readers")
    role(stack, cluster, "Other", namespace="training", service_account="other", description="Others")
    reader.role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=["arn:aws:s3:::b/*"]))
    template = assertions.Template.from_stack(stack)
    (policy,) = [p["Properties"] for k, p in resources_of(template, "AWS::IAM::Policy").items() if "Reader" in k]
    assert policy["Roles"] == [{"Ref": stack.get_logical_id(reader.role.node.default_child)}]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert (statement["Action"], statement["Resource"]) == ("s3:GetObject", "arn:aws:s3:::b/*")
    assert len([k for k in resources_of(template, "AWS::IAM::Role") if "Reader" in k or "Other" in k]) == 2


def test_the_cluster_namespace_service_account_and_description_are_required():
    stack, _ = pods_stack()
    with pytest.raises(TypeError, match="cluster.*namespace.*service_account.*description"):
        PodIdentityRole(stack, "Anonymous")


@pytest.mark.parametrize("description", ["", None, " padded", "x" * 1001])
def test_an_empty_padded_or_too_long_description_is_refused(description):
    stack, cluster = pods_stack()
    with pytest.raises(ConfigurationError, match="description="):
        role(stack, cluster, "Bad", description=description)


def test_a_bad_namespace_service_account_and_cluster_are_refused_in_one_message():
    stack, _ = pods_stack()
    with pytest.raises(ConfigurationError) as error:
        role(stack, "my-cluster", "Bad", namespace="Kube_System", service_account="")
    message = str(error.value)
    assert "cluster='my-cluster'" in message and "namespace='Kube_System'" in message
    assert "service_account=''" in message
