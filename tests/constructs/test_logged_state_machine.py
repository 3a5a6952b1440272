"""logged_state_machine: a JSONata state machine of the given type and role, logged in full to a retained log group."""

import json

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from tests.support.apps import new_app, only
from trainium_eks.constructs.logged_state_machine import (
    MAX_STATE_MACHINE_NAME,
    logged_state_machine,
    state_machine_name,
)
from trainium_eks.core.cfn_text import cfn_text


def build(state_machine_type=sfn.StateMachineType.STANDARD):
    """A stack with a role and, under ``Owner``, a one-state machine built by :func:`logged_state_machine`."""
    stack = cdk.Stack(new_app(), "Logged", env=cdk.Environment(region="us-west-2"))
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("states.amazonaws.com"))
    owner = Construct(stack, "Owner")
    start = sfn.Pass.jsonata(owner, "Start", outputs="{% {'ok': true} %}")
    log_group, state_machine = logged_state_machine(
        owner, start=start, state_machine_type=state_machine_type, role=role, comment="A test machine"
    )
    return stack, role, log_group, state_machine, assertions.Template.from_stack(stack)


def test_the_log_group_is_kept_a_year_and_outlives_the_stack():
    stack, _, log_group, state_machine, template = build()
    assert (log_group.node.path, state_machine.node.path) == ("Logged/Owner/Logs", "Logged/Owner/StateMachine")
    resource = only(template, "AWS::Logs::LogGroup")
    assert resource["Properties"] == {"RetentionInDays": 365}
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain")


@pytest.mark.parametrize("state_machine_type", [sfn.StateMachineType.STANDARD, sfn.StateMachineType.EXPRESS])
def test_the_machine_runs_as_the_role_in_jsonata_logging_every_event_with_its_data_and_tracing(state_machine_type):
    stack, role, log_group, _, template = build(state_machine_type)
    props = only(template, "AWS::StepFunctions::StateMachine")["Properties"]
    assert props["StateMachineType"] == state_machine_type.value
    assert props["RoleArn"] == {"Fn::GetAtt": [stack.get_logical_id(role.node.default_child), "Arn"]}
    assert props["LoggingConfiguration"] == {
        "Destinations": [
            {
                "CloudWatchLogsLogGroup": {
                    "LogGroupArn": {"Fn::GetAtt": [stack.get_logical_id(log_group.node.default_child), "Arn"]}
                }
            }
        ],
        "IncludeExecutionData": True,
        "Level": "ALL",
    }
    assert props["TracingConfiguration"] == {"Enabled": True}
    definition = json.loads(cfn_text(props["DefinitionString"]))
    assert definition["QueryLanguage"] == "JSONata"
    assert definition["Comment"] == "A test machine"
    assert definition["StartAt"] == "Start"
    assert definition["States"]["Start"]["Output"] == "{% {'ok': true} %}"


def test_state_machine_names_are_known_at_synth_unique_per_path_and_within_the_limit():
    app = cdk.App()
    short = cdk.Stack(app, "Kubeflow")
    assert state_machine_name(short, "Kubeflow/HybridWorkflow") != state_machine_name(short, "Kubeflow/Other/Hybrid")
    assert state_machine_name(short, "Kubeflow/HybridWorkflow").startswith("Kubeflow-HybridWorkflow-")
    long = cdk.Stack(app, "S" * 120)
    assert len(state_machine_name(long, "x/HybridWorkflow")) == MAX_STATE_MACHINE_NAME
