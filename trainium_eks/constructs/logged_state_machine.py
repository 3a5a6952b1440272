"""logged_state_machine: a JSONata state machine that logs every execution to a retained log group and traces."""

from __future__ import annotations

from typing import Tuple

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct


def logged_state_machine(
    scope: Construct,
    *,
    start: sfn.IChainable,
    state_machine_type: sfn.StateMachineType,
    role: iam.IRole,
    comment: str,
) -> Tuple[logs.LogGroup, sfn.StateMachine]:
    """The log group ``Logs`` (kept a year, retained when the stack goes) and the state machine ``StateMachine`` of
    ``scope``, from ``start``, in JSONata, as ``role``, logging every event with its data and tracing with X-Ray."""
    log_group = logs.LogGroup(scope, "Logs", retention=logs.RetentionDays.ONE_YEAR, removal_policy=RemovalPolicy.RETAIN)
    state_machine = sfn.StateMachine(
        scope,
        "StateMachine",
        definition_body=sfn.DefinitionBody.from_chainable(start),
        query_language=sfn.QueryLanguage.JSONATA,
        state_machine_type=state_machine_type,
        role=role,
        logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
        tracing_enabled=True,
        comment=comment,
    )
    return log_group, state_machine
