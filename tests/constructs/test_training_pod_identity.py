"""TrainingPodIdentity: the training pods' role, trusted by EKS Pod Identity and limited to the data bucket."""

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3

from tests.support.apps import BUCKET_CONTEXT, default_template, new_app, resources_of, role_by_description
from tests.support.clusters import ENV
from trainium_eks.constructs.training_pod_identity import TrainingPodIdentity
from trainium_eks.core.validation import ConfigurationError


def test_training_role_trusts_pod_identity_and_is_bound_to_the_training_service_account(template):
    role_id, role = role_by_description(template, "Training pods")
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    (association,) = [
        r["Properties"]
        for r in resources_of(template, "AWS::EKS::PodIdentityAssociation").values()
        if r["Properties"]["Namespace"] == "training"
    ]
    assert association["ServiceAccount"] == "training"
    assert association["RoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
    assert not [
        p for p in resources_of(template, "AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]
    ], "without a data bucket the role has no permissions"


def _statements_of(template):
    role_id, _ = role_by_description(template, "Training pods")
    (policy,) = [
        p for p in resources_of(template, "AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    return {
        tuple([s["Action"]] if isinstance(s["Action"], str) else sorted(s["Action"])): (
            s["Resource"],
            s.get("Condition"),
        )
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    }


def _through_the_endpoint(template):
    (endpoint,) = resources_of(template, "AWS::EC2::VPCEndpoint")
    return {"StringEquals": {"aws:SourceVpce": {"Ref": endpoint}}}


def test_training_role_reads_the_data_bucket_through_the_stack_s_endpoint_and_cannot_write_or_delete_by_default():
    template = default_template(**BUCKET_CONTEXT)
    through = _through_the_endpoint(template)
    assert _statements_of(template) == {
        ("s3:ListBucket",): ("arn:aws:s3:::my-training-data", through),
        ("s3:GetObject",): ("arn:aws:s3:::my-training-data/*", through),
    }


def test_training_role_reads_both_prefixes_and_writes_only_below_the_export_prefix():
    template = default_template(**BUCKET_CONTEXT, dataBucketPrefix="datasets/", dataExportPrefix="runs/")
    through = _through_the_endpoint(template)
    assert _statements_of(template) == {
        ("s3:ListBucket",): (
            "arn:aws:s3:::my-training-data",
            {"StringLike": {"s3:prefix": ["datasets/*", "runs/*"]}, **through},
        ),
        ("s3:GetObject",): (
            ["arn:aws:s3:::my-training-data/datasets/*", "arn:aws:s3:::my-training-data/runs/*"],
            through,
        ),
        ("s3:AbortMultipartUpload", "s3:PutObject"): ("arn:aws:s3:::my-training-data/runs/*", through),
    }


def test_without_an_endpoint_the_role_carries_no_endpoint_condition():
    stack = cdk.Stack(new_app(), "S", env=ENV)
    cluster = eks.Cluster.from_cluster_attributes(stack, "Cluster", cluster_name="c")
    bucket = s3.Bucket.from_bucket_name(stack, "Bucket", "my-training-data")
    TrainingPodIdentity(stack, "Identity", cluster=cluster, data_bucket=bucket)
    assert _statements_of(assertions.Template.from_stack(stack)) == {
        ("s3:ListBucket",): ("arn:aws:s3:::my-training-data", None),
        ("s3:GetObject",): ("arn:aws:s3:::my-training-data/*", None),
    }


@pytest.mark.parametrize(
    "props, problem",
    [
        ({"data_write_prefix": "runs/"}, "data_write_prefix='runs/': set only with a data bucket"),
        (
            {"data_write_prefix": ""},
            "data_write_prefix='': a key prefix in the bucket that ends with '/'",
        ),
        ({"data_read_prefix": "/datasets/"}, "data_read_prefix='/datasets/': a key prefix in the bucket"),
        ({"data_read_prefix": "datasets"}, "data_read_prefix='datasets': a key prefix in the bucket that ends with"),
        ({"data_read_prefix": "*/"}, "data_read_prefix='*/': a key prefix in the bucket that ends with '/'"),
    ],
)
def test_prefixes_that_s3_keys_cannot_have_are_refused(props, problem):
    stack = cdk.Stack(new_app(), "S")
    cluster = eks.Cluster.from_cluster_attributes(stack, "Cluster", cluster_name="c")
    bucket = None if "data_write_prefix" in props and props["data_write_prefix"] else s3.Bucket(stack, "Bucket")
    with pytest.raises(ConfigurationError) as raised:
        TrainingPodIdentity(stack, "Identity", cluster=cluster, data_bucket=bucket, **props)
    (found,) = raised.value.problems
    assert found.startswith(problem)
