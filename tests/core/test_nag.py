"""core.nag: cdk-nag acknowledgements written as construct metadata under their full finding ids."""

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks

from tests.support.apps import new_app
from trainium_eks.core.nag import AWS_MANAGED_POLICY, acknowledge, managed_policy_findings, token_finding

ACKNOWLEDGED = cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY


def acknowledgements(construct):
    """Finding id -> reason of every acknowledgement recorded on ``construct`` itself."""
    found = {}
    for entry in construct.node.metadata:
        if entry.type == ACKNOWLEDGED:
            found.update(entry.data)
    return found


def test_each_finding_is_acknowledged_under_its_full_id_with_the_reason():
    stack = cdk.Stack(new_app(), "Nag")
    handle = cdk.CfnWaitConditionHandle(stack, "Handle")
    acknowledge(handle, "AwsSolutions-IAM5", "only its own function", "Resource::*", "Action::s3:Get*")
    assert acknowledgements(handle) == {
        "AwsSolutions::AwsSolutions-IAM5[Resource::*]": "only its own function",
        "AwsSolutions::AwsSolutions-IAM5[Action::s3:Get*]": "only its own function",
    }
    assert acknowledgements(stack) == {}, "the acknowledgement stays on the construct it concerns"


def test_a_rule_without_finding_ids_is_acknowledged_as_the_rule():
    stack = cdk.Stack(new_app(), "Nag")
    acknowledge(stack, "AwsSolutions-L1", "the runtime is pinned by aws-cdk-lib")
    assert acknowledgements(stack) == {"AwsSolutions::AwsSolutions-L1": "the runtime is pinned by aws-cdk-lib"}


def test_finding_ids_of_managed_policies_and_of_cloudformation_expressions():
    assert managed_policy_findings(["ReadOnlyAccess", "service-role/AWSLambdaBasicExecutionRole"]) == [
        "Policy::arn:<AWS::Partition>:iam::aws:policy/ReadOnlyAccess",
        "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
    ]
    assert AWS_MANAGED_POLICY.format("X") == managed_policy_findings(["X"])[0]
    value = {"Fn::If": ["HasX", {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}]]}, {"Ref": "AWS::NoValue"}]}
    assert token_finding("Policy", value) == (
        'Policy::{"Fn::If":["HasX",{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"}]]},{"Ref":"AWS::NoValue"}]}'
    )


def test_cdk_nag_accepts_exactly_the_findings_acknowledged_and_reports_the_rest(tmp_path):
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Nag")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    for name in ("ReadOnlyAccess", "service-role/AWSLambdaBasicExecutionRole"):
        role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(name))
    cdk.CfnCondition(stack, "HasX", expression=cdk.Fn.condition_equals(cdk.Aws.REGION, "us-west-2"))
    arn = cdk.Fn.join("", ["arn:", cdk.Aws.PARTITION, ":iam::aws:policy/X"])
    role.add_managed_policy(
        iam.ManagedPolicy.from_managed_policy_arn(
            stack, "X", cdk.Fn.condition_if("HasX", arn, cdk.Aws.NO_VALUE).to_string()
        )
    )
    value = {
        "Fn::If": [
            "HasX",
            {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/X"]]},
            {"Ref": "AWS::NoValue"},
        ]
    }
    acknowledge(
        role,
        "AwsSolutions-IAM4",
        "a test of the acknowledgement",
        *managed_policy_findings(["ReadOnlyAccess"]),
        token_finding("Policy", value),
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match="ValidationFailed"):  # jsii surfaces cdk-nag's failure so
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    reported = [
        violation["ruleName"]
        for plugin in report["pluginReports"]
        if plugin["pluginName"] == "AwsSolutions"
        for violation in plugin["violations"]
    ]
    assert reported == [
        f"AwsSolutions-IAM4[{managed_policy_findings(['service-role/AWSLambdaBasicExecutionRole'])[0]}]"
    ]
