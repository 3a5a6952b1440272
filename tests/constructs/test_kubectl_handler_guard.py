"""KubectlHandlerGuard: the kubectl handler's resource-based policy denies every caller but its provider framework."""

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_

from tests.support.apps import function_by_description, only, resources_of
from trainium_eks.constructs.kubectl_handler_guard import KubectlHandlerGuard
from trainium_eks.core.validation import ConfigurationError


def test_only_the_provider_frameworks_role_may_invoke_the_handler(template):
    handler = function_by_description(template, "onEvent handler for EKS kubectl resource provider")
    framework = resources_of(template, "AWS::Lambda::Function")[
        function_by_description(template, "AWS CDK resource provider framework - onEvent")
    ]
    policy = only(template, "AWS::Lambda::ResourcePolicy")["Properties"]
    assert policy["ResourceArn"] == {"Fn::GetAtt": [handler, "Arn"]}
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert (statement["Effect"], statement["Principal"], statement["Action"]) == ("Deny", "*", "lambda:InvokeFunction")
    arn = {"Fn::GetAtt": [handler, "Arn"]}
    assert statement["Resource"] == [arn, {"Fn::Join": ["", [arn, ":*"]]}]
    role = framework["Properties"]["Role"]
    assert statement["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": role}}
    assert role["Fn::GetAtt"][1] == "Arn"


def test_the_provider_framework_starts_only_once_the_policy_holds(template):
    """No manifest is applied before the guard exists, and a replaced framework role is named before it invokes."""
    (guard,) = resources_of(template, "AWS::Lambda::ResourcePolicy")
    framework = resources_of(template, "AWS::Lambda::Function")[
        function_by_description(template, "AWS CDK resource provider framework - onEvent")
    ]
    assert guard in framework["DependsOn"]


def test_the_handler_has_no_other_resource_policy(template):
    """The policy replaces the function's whole resource-based policy: nothing else may grant access to it."""
    handler = function_by_description(template, "onEvent handler for EKS kubectl resource provider")
    permissions = resources_of(template, "AWS::Lambda::Permission").values()
    assert not [p for p in permissions if json.dumps(p["Properties"]["FunctionName"]).count(handler)]


def test_a_construct_that_is_not_a_kubectl_provider_is_refused():
    stack = cdk.Stack(cdk.App(), "S")
    with pytest.raises(ConfigurationError, match="provider=.*the kubectl provider an eks.Cluster builds"):
        KubectlHandlerGuard(stack, "Guard", provider=lambda_.Function.from_function_name(stack, "F", "f"))
