"""KubectlInvocationAlarm: a trail of the kubectl provider's invocations and two rules that notify of the ones their
own provider and CloudFormation did not make."""

import re

import aws_cdk as cdk
import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from tests.support.apps import function_by_description, only, resources_of, stack_template
from tests.support.clusters import imported_cluster
from trainium_eks.constructs.kubectl_invocation_alarm import CLOUDFORMATION, KubectlInvocationAlarm
from trainium_eks.core.validation import ConfigurationError

ALARM = {"kubectlInvocationAlarm": "true"}


@pytest.fixture(scope="module")
def alarmed():
    return stack_template("TrainiumEks", **ALARM)


def handler_and_on_event(template):
    return (
        function_by_description(template, "onEvent handler for EKS kubectl resource provider"),
        function_by_description(template, "AWS CDK resource provider framework - onEvent"),
    )


def rule_of(template, function_name):
    (rule,) = [
        rule
        for rule in resources_of(template, "AWS::Events::Rule").values()
        if rule["Properties"]["EventPattern"].get("detail", {}).get("resources")
        == {"ARN": [{"Fn::GetAtt": [function_name, "Arn"]}]}
    ]
    return rule


def test_the_trail_logs_the_invocations_of_the_two_functions_and_nothing_else(alarmed):
    handler, on_event = handler_and_on_event(alarmed)
    trail = only(alarmed, "AWS::CloudTrail::Trail")["Properties"]
    (selector,) = trail["EventSelectors"]
    assert selector["IncludeManagementEvents"] is False
    (resources,) = selector["DataResources"]
    assert resources == {
        "Type": "AWS::Lambda::Function",
        "Values": [{"Fn::GetAtt": [handler, "Arn"]}, {"Fn::GetAtt": [on_event, "Arn"]}],
    }
    assert (trail["IsMultiRegionTrail"], trail["IncludeGlobalServiceEvents"], trail["EnableLogFileValidation"]) == (
        False,
        False,
        True,
    )


def test_the_handler_notifies_of_every_caller_but_the_frameworks_role_and_of_callers_without_a_role(alarmed):
    handler, on_event = handler_and_on_event(alarmed)
    framework_role = resources_of(alarmed, "AWS::Lambda::Function")[on_event]["Properties"]["Role"]
    pattern = rule_of(alarmed, handler)["Properties"]["EventPattern"]
    assert (pattern["source"], pattern["detail-type"]) == (["aws.lambda"], ["AWS API Call via CloudTrail"])
    assert (pattern["detail"]["eventSource"], pattern["detail"]["eventName"]) == (
        ["lambda.amazonaws.com"],
        ["Invoke", "InvokeWithResponseStream"],
    )
    assert pattern["detail"]["userIdentity"] == {
        "$or": [
            {"sessionContext": {"sessionIssuer": {"arn": [{"anything-but": [framework_role]}]}}},
            {"sessionContext": {"sessionIssuer": {"arn": [{"exists": False}]}}},
        ]
    }


def test_the_on_event_function_notifies_of_every_call_cloudformation_did_not_make(alarmed):
    _, on_event = handler_and_on_event(alarmed)
    pattern = rule_of(alarmed, on_event)["Properties"]["EventPattern"]
    assert pattern["detail"]["eventName"] == ["Invoke", "InvokeWithResponseStream"]
    assert pattern["detail"]["userIdentity"] == {
        "$or": [{"invokedBy": [{"anything-but": [CLOUDFORMATION]}]}, {"invokedBy": [{"exists": False}]}]
    }


def test_both_rules_publish_to_an_encrypted_topic_as_a_role_of_their_own_and_the_stack_names_it(alarmed):
    """EventBridge publishes as a role of this stack (which no other account's rule can pass), so the topic's own
    policy grants the EventBridge service nothing: it only refuses publishing without TLS."""
    (topic,) = resources_of(alarmed, "AWS::SNS::Topic")
    key = only(alarmed, "AWS::SNS::Topic")["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
    key_resource = resources_of(alarmed, "AWS::KMS::Key")[key]["Properties"]
    assert key_resource["EnableKeyRotation"] is True
    roles = {
        name
        for name, role in resources_of(alarmed, "AWS::IAM::Role").items()
        if role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        == {"Service": "events.amazonaws.com"}
    }
    for function_name in handler_and_on_event(alarmed):
        (target,) = rule_of(alarmed, function_name)["Properties"]["Targets"]
        assert target["Arn"] == {"Ref": topic} and target["RoleArn"]["Fn::GetAtt"][0] in roles
    (role,) = {
        target["RoleArn"]["Fn::GetAtt"][0]
        for f in handler_and_on_event(alarmed)
        for target in rule_of(alarmed, f)["Properties"]["Targets"]
    }
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in resources_of(alarmed, "AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [{"Ref": role}]
    ]
    assert policy == [
        {"Action": "sns:Publish", "Effect": "Allow", "Resource": {"Ref": topic}},
        {
            "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [key, "Arn"]},
        },
    ]
    (topic_policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"] for p in resources_of(alarmed, "AWS::SNS::TopicPolicy").values()
    ]
    assert [s["Effect"] for s in topic_policy] == ["Deny"]
    assert alarmed.to_json()["Outputs"]["KubectlInvocationAlarmTopic"]["Value"] == {"Ref": topic}


def test_the_log_bucket_takes_writes_of_this_trail_only(alarmed):
    """CloudTrail user guide, "Amazon S3 bucket policy for CloudTrail": ``aws:SourceArn`` "helps ensure that
    CloudTrail writes to the S3 bucket only for a specific trail", the ARN of the trail. A deny of every other keeps
    the library's bucket from holding another account's trail logs."""
    trail = only(alarmed, "AWS::CloudTrail::Trail")["Properties"]
    bucket = trail["S3BucketName"]["Ref"]
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in resources_of(alarmed, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket}
    ]
    (deny,) = [s for s in policy if s.get("Sid") == "OnlyThisTrailWrites"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"Service": "cloudtrail.amazonaws.com"}
    assert deny["Action"] == "s3:PutObject"
    source = deny["Condition"]["StringNotEquals"]["aws:SourceArn"]["Fn::Join"][1]
    assert source[-1] == f":trail/{trail['TrailName']}" and source[0].startswith("arn:aws:cloudtrail:")
    assert 3 <= len(trail["TrailName"]) <= 128 and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", trail["TrailName"])


def test_the_trail_keeps_its_logs_after_a_destroy(alarmed):
    trail = only(alarmed, "AWS::CloudTrail::Trail")["Properties"]
    bucket = resources_of(alarmed, "AWS::S3::Bucket")[trail["S3BucketName"]["Ref"]]
    assert bucket["DeletionPolicy"] == "Retain"


def test_there_is_no_trail_unless_asked_for(template):
    assert resources_of(template, "AWS::CloudTrail::Trail") == {}
    assert "KubectlInvocationAlarmTopic" not in template.to_json()["Outputs"]


def test_without_a_trail_of_its_own_it_builds_the_rules_and_its_topic():
    stack = cdk.Stack(cdk.App(), "S")
    alarm = KubectlInvocationAlarm(stack, "Alarm", provider=kubectl_provider(stack), trail=False)
    template = Template.from_stack(stack)
    assert alarm.trail is None and resources_of(template, "AWS::CloudTrail::Trail") == {}
    assert len(resources_of(template, "AWS::Events::Rule")) == 2
    assert len(resources_of(template, "AWS::SNS::Topic")) == 1


def test_without_a_trail_of_its_own_and_with_a_topic_of_the_users_it_builds_only_the_rules():
    stack = cdk.Stack(cdk.App(), "S")
    provider = kubectl_provider(stack)
    topic = sns.Topic(stack, "Mine")
    alarm = KubectlInvocationAlarm(stack, "Alarm", provider=provider, topic=topic, trail=False)
    template = Template.from_stack(stack)
    assert alarm.trail is None and alarm.topic is topic
    assert resources_of(template, "AWS::CloudTrail::Trail") == {}
    assert len(resources_of(template, "AWS::Events::Rule")) == 2


def kubectl_provider(stack):
    """A real aws-eks-v2 KubectlProvider (its Handler and its Provider's framework-onEvent)."""
    _, cluster = imported_cluster(stack, kubectl_provider=None)
    return eks.KubectlProvider(
        stack,
        "KubectlProvider",
        cluster=cluster,
        kubectl_layer=lambda_.LayerVersion.from_layer_version_arn(
            stack, "Layer", "arn:aws:lambda:us-west-2:123456789012:layer:kubectl:1"
        ),
    )


@pytest.mark.parametrize(
    "props,message",
    [
        ({"topic": "arn:aws:sns:us-west-2:123456789012:t"}, "topic=.*an sns.ITopic"),
        ({"trail": "yes"}, "trail='yes': true or false"),
    ],
)
def test_wrong_props_are_refused(props, message):
    stack = cdk.Stack(cdk.App(), "S")
    with pytest.raises(ConfigurationError, match=message):
        KubectlInvocationAlarm(stack, "Alarm", provider=kubectl_provider(stack), **props)


def test_a_construct_that_is_not_a_kubectl_provider_is_refused():
    stack = cdk.Stack(cdk.App(), "S")
    with pytest.raises(ConfigurationError, match="provider=.*the kubectl provider an eks.Cluster builds"):
        KubectlInvocationAlarm(stack, "Alarm", provider=lambda_.Function.from_function_name(stack, "F", "f"))
