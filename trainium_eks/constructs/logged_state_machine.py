"""logged_state_machine: a JSONata state machine that logs every execution to a retained log group and traces."""

from __future__ import annotations

import hashlib
import re
from typing import Optional, Tuple

from aws_cdk import ArnFormat, RemovalPolicy, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

MAX_STATE_MACHINE_NAME = 80
"""The longest state machine name (Step Functions API reference, CreateStateMachine: name, 1 to 80 characters)."""

_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_-]")


def state_machine_name(stack: Stack, scope_path: str) -> Optional[str]:
    """The name of the state machine that :func:`logged_state_machine` creates in the construct at ``scope_path``:
    ``<stack name>-<construct id>-<8 hex digits of the path>``, at most :data:`MAX_STATE_MACHINE_NAME` characters; known
    at synth, so that a role's trust policy can name the state machine's ARN without a reference to it (the state
    machine refers to the role: a reference back would be a cycle). None when the stack's name is a token."""
    if Token.is_unresolved(stack.stack_name):
        return None
    digest = hashlib.sha256(scope_path.encode()).hexdigest()[:8]
    construct_id = _NOT_IN_NAME.sub("-", scope_path.rsplit("/", 1)[-1])
    room = MAX_STATE_MACHINE_NAME - len(stack.stack_name) - len(digest) - 2
    if room < 1:
        return f"{stack.stack_name[: MAX_STATE_MACHINE_NAME - len(digest) - 1]}-{digest}"
    return f"{stack.stack_name}-{construct_id[:room]}-{digest}"


def state_machine_arn(stack: Stack, scope_path: str) -> str:
    """The ARN of the state machine of :func:`state_machine_name` (``stateMachine:*`` of the stack's account and region
    when the name is not known at synth)."""
    return stack.format_arn(
        service="states",
        resource="stateMachine",
        resource_name=state_machine_name(stack, scope_path) or "*",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


def logged_state_machine(
    scope: Construct,
    *,
    start: sfn.IChainable,
    state_machine_type: sfn.StateMachineType,
    role: iam.IRole,
    comment: str,
) -> Tuple[logs.LogGroup, sfn.StateMachine]:
    """The log group ``Logs`` (kept a year, retained when the stack goes) and the state machine ``StateMachine`` of
    ``scope``, named :func:`state_machine_name`, from ``start``, in JSONata, as ``role``, logging every event with its
    data and tracing with X-Ray."""
    log_group = logs.LogGroup(scope, "Logs", retention=logs.RetentionDays.ONE_YEAR, removal_policy=RemovalPolicy.RETAIN)
    state_machine = sfn.StateMachine(
        scope,
        "StateMachine",
        state_machine_name=state_machine_name(Stack.of(scope), scope.node.path),
        definition_body=sfn.DefinitionBody.from_chainable(start),
        query_language=sfn.QueryLanguage.JSONATA,
        state_machine_type=state_machine_type,
        role=role,
        logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
        tracing_enabled=True,
        comment=comment,
    )
    return log_group, state_machine
