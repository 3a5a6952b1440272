"""WorkflowRunCleanup: the release Job (and with it the TrainJob) of a workflow run that ended badly is deleted, so it
never keeps the nodes busy."""

from __future__ import annotations

from typing import Callable, Sequence, Union

from aws_cdk import Arn, ArnFormat, Duration, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from trainium_eks.constructs.logged_state_machine import logged_state_machine
from trainium_eks.core.cfn_text import cfn_text, compact_json
from trainium_eks.core.nag import acknowledge
from trainium_eks.moved import removed_props

EKS_CALL = "arn:aws:states:::eks:call"

DESCRIBE_EXECUTION = "arn:aws:states:::aws-sdk:sfn:describeExecution"
"""The AWS SDK integration that reads an execution (Step Functions API reference, DescribeExecution)."""

STATUS_LOOKS = 6
STATUS_WAIT_SECONDS = 10
"""How often, and how far apart, the cleanup asks for the status of an execution that still reads ``RUNNING``:
DescribeExecution "is eventually consistent. The results are best effort and may not reflect very recent updates"
(Step Functions API reference), so the answer right after the status-change event may be stale. Six looks 10 s apart
stay well inside an Express execution's 5 minutes."""

ENDED_BADLY = ("FAILED", "TIMED_OUT", "ABORTED")
"""Execution statuses whose run may have left a TrainJob behind: a failed call or read, a timeout, a stopped
execution (no state of the workflow runs after ``StopExecution``). Step Functions sends each status change of a
Standard execution to EventBridge's default bus ("Step Functions Execution Status Change"; Step Functions developer
guide, cw-events.html)."""


class WorkflowRunCleanup(Construct):
    """Deletes the release Job of every execution of ``workflow`` that failed, timed out or was stopped, and with it
    the run's TrainJob and the Jobs that hold its nodes.

    An EventBridge rule on the workflow's "Step Functions Execution Status Change" events (status in
    :data:`ENDED_BADLY`) starts an Express state machine that first asks Step Functions about the execution the event
    names (``states:DescribeExecution``, granted on the workflow's executions, retried on errors) and goes on only
    when it is an execution of ``workflow`` that has ended in one of :data:`ENDED_BADLY`; one that still reads
    ``RUNNING`` is asked again (:data:`STATUS_LOOKS` times, :data:`STATUS_WAIT_SECONDS` apart: the answer is eventually
    consistent). Nothing in the stack keeps a principal whose own policy allows ``states:StartExecution`` on it from
    starting it with any input, so an input that names a running execution, or another state machine's, deletes
    nothing (``Run not ended badly``), and what is kept is decided by the error Step Functions answers, not the
    input's. It then computes the
    name of the run's release Job from the execution's name (as the workflow does), reads that Job, and deletes it
    with ``eks:call`` (``propagationPolicy: Background``: Kubernetes' garbage collector then deletes what the release
    created and owns, the TrainJob with its JobSet and pods, and any capacity Job) only if its ``owner_annotation``
    holds the execution's ARN: a Job of that name created by another execution, or by hand, is kept. An execution
    whose error is one of ``keep_on_error`` (a TrainJob that failed by itself, whose JobSet has already ended its
    pods; a release that failed, which has left nothing running) keeps its release for ``kubectl logs``. Nothing to
    delete (a SageMaker run, a release already gone) is not an error: the state machine ends in ``Nothing deleted``
    with the API's answer. It runs as ``role`` (the workflow's role, whose EKS access entry may delete Jobs, given
    ``states:DescribeExecution`` on the workflow's executions here) and logs every execution.

    :param workflow: The hybrid workflow's state machine. Required.
    :param role: Its role. Required.
    :param cluster: The cluster (endpoint and certificate authority data). Required.
    :param jobs_path: The API path of the namespace's batch/v1 Jobs. Required.
    :param release_name: A function of a JSONata expression of the execution's name that returns the JSONata of the
        release Job's name. Required.
    :param keep_on_error: The workflow's errors whose release is kept (one, or a list). Required.
    :param owner_annotation: The release Job's annotation that holds the ARN of the execution that created it.
        Required.
    """

    @removed_props(
        "WorkflowRunCleanup",
        {
            "trainjobs_path": "jobs_path, the API path of the namespace's batch/v1 Jobs: the cleanup deletes the run's "
            "release Job, and with it the TrainJob",
            "job_name": "release_name, a function of the execution's name that returns the JSONata of the release "
            "Job's name",
        },
    )
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        workflow: sfn.IStateMachine,
        role: iam.IRole,
        cluster: eks.ICluster,
        jobs_path: str,
        release_name: Callable[[str], str],
        keep_on_error: Union[str, Sequence[str]],
        owner_annotation: str,
    ) -> None:
        super().__init__(scope, id_)
        name = release_name("$states.input.detail.name")
        kept_errors = [keep_on_error] if isinstance(keep_on_error, str) else list(keep_on_error)
        cluster_arguments = {
            "ClusterName": cluster.cluster_name,
            "CertificateAuthority": cluster.cluster_certificate_authority_data,
            "Endpoint": cluster.cluster_endpoint,
        }
        owner = f"$states.result.ResponseBody.metadata.annotations.`{owner_annotation}`"
        read = sfn.CustomState(
            self,
            "Read release of the run",
            state_json={
                "Type": "Task",
                "Resource": EKS_CALL,
                "Arguments": {**cluster_arguments, "Method": "GET", "Path": f"{{% '{jobs_path}/' & {name} %}}"},
                "Assign": {
                    "job_path": f"{{% '{jobs_path}/' & {name} %}}",
                    "created_by": f"{{% {owner} %}}",
                    "execution": "{% $states.input.detail.executionArn %}",
                },
            },
        )
        delete = sfn.CustomState(
            self,
            "Delete release of the run",
            state_json={
                "Type": "Task",
                "Resource": EKS_CALL,
                "Arguments": {
                    **cluster_arguments,
                    "Method": "DELETE",
                    "Path": "{% $job_path %}",
                    "QueryParameters": {"propagationPolicy": ["Background"]},
                },
                "Output": "{% {'deleted': $job_path} %}",
            },
        )
        nothing = sfn.Succeed.jsonata(self, "Nothing deleted", outputs="{% $states.input %}")
        read.add_catch(nothing, errors=["States.ALL"])
        delete.add_catch(nothing, errors=["States.ALL"])
        another = sfn.Succeed.jsonata(
            self, "Release of another run kept", outputs="{% {'kept': $job_path, 'created_by': $created_by} %}"
        )
        ours = (
            sfn.Choice.jsonata(self, "Created by this run?")
            .when(
                sfn.Condition.jsonata("{% $created_by = $execution %}"),
                delete.next(sfn.Succeed.jsonata(self, "Deleted")),
            )
            .otherwise(another)
        )

        # DescribeExecution's answer is read under both spellings of its fields: Step Functions' own API names them in
        # camelCase (status, stateMachineArn, error), and the developer guide documents the PascalCase of an SDK
        # integration's parameters, not of its answers.
        def answer(field: str) -> str:
            pascal = field[0].upper() + field[1:]
            return f"$exists($states.result.{pascal}) ? $states.result.{pascal} : $states.result.{field}"

        first = sfn.CustomState(self, "First look", state_json={"Type": "Pass", "Assign": {"looks": 0}})
        confirm = sfn.CustomState(
            self,
            "Confirm the run ended badly",
            state_json={
                "Type": "Task",
                "Resource": DESCRIBE_EXECUTION,
                "Arguments": {"ExecutionArn": "{% $states.input.detail.executionArn %}"},
                "Assign": {
                    "run_status": f"{{% {answer('status')} %}}",
                    "run_machine": f"{{% {answer('stateMachineArn')} %}}",
                    "run_error": f"{{% {answer('error')} %}}",
                    "looks": "{% $looks + 1 %}",
                },
                "Output": "{% $states.input %}",
            },
        )
        confirm.add_retry(errors=["States.ALL"], interval=Duration.seconds(2), max_attempts=3, backoff_rate=2)
        confirm.add_catch(nothing, errors=["States.ALL"])
        workflow_arn = workflow.state_machine_arn
        statuses = ", ".join(f"'{status}'" for status in ENDED_BADLY)
        errors = ", ".join(f"'{error}'" for error in kept_errors)
        keep = (
            sfn.Choice.jsonata(self, "Ended with its logs to keep?")
            .when(
                sfn.Condition.jsonata(f"{{% $run_error in [{errors}] %}}"),
                sfn.Succeed.jsonata(self, "Release kept for its logs"),
            )
            .otherwise(read.next(ours))
        )
        wait = sfn.Wait.jsonata(
            self, "Wait for the run's status", time=sfn.WaitTime.duration(Duration.seconds(STATUS_WAIT_SECONDS))
        )
        ended = (
            sfn.Choice.jsonata(self, "Ended badly?")
            .when(
                sfn.Condition.jsonata(f"{{% $run_machine = '{workflow_arn}' and $run_status in [{statuses}] %}}"),
                keep,
            )
            .when(
                sfn.Condition.jsonata(
                    f"{{% $run_machine = '{workflow_arn}' and $run_status = 'RUNNING' and $looks < {STATUS_LOOKS} %}}"
                ),
                wait.next(confirm),
            )
            .otherwise(
                sfn.Succeed.jsonata(
                    self,
                    "Run not ended badly",
                    outputs="{% {'status': $run_status, 'state_machine': $run_machine} %}",
                )
            )
        )
        start = first.next(confirm).next(ended)
        self.log_group, self.state_machine = logged_state_machine(
            self,
            start=start,
            state_machine_type=sfn.StateMachineType.EXPRESS,
            role=role,
            comment="Delete the release and TrainJob of a hybrid workflow run that failed, timed out or was stopped",
        )
        self.describe_policy = self._may_describe_runs(workflow, role)
        self.rule = events.Rule(
            self,
            "RunEndedBadly",
            description="A hybrid workflow execution failed, timed out or was stopped: delete its release and TrainJob",
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=["Step Functions Execution Status Change"],
                detail={"stateMachineArn": [workflow.state_machine_arn], "status": list(ENDED_BADLY)},
            ),
            targets=[targets.SfnStateMachine(self.state_machine)],
        )

    def _may_describe_runs(self, workflow: sfn.IStateMachine, role: iam.IRole) -> iam.Policy:
        """``states:DescribeExecution`` on the workflow's executions, in a policy of its own that the cleanup state
        machine waits for: the role's default policy is one the workflow itself waits for, and a reference to the
        workflow there would be a cycle."""
        stack = Stack.of(self)
        executions = stack.format_arn(
            service="states",
            resource="execution",
            resource_name=f"{Arn.split(workflow.state_machine_arn, ArnFormat.COLON_RESOURCE_NAME).resource_name}:*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        policy = iam.Policy(
            self,
            "DescribeRuns",
            roles=[role],
            statements=[iam.PolicyStatement(actions=["states:DescribeExecution"], resources=[executions])],
        )
        self.state_machine.node.add_dependency(policy)
        acknowledge(
            policy,
            "AwsSolutions-IAM5",
            "The cleanup confirms that the execution an event names has ended badly: any execution of the one "
            "workflow.",
            "Resource::" + cfn_text(stack.resolve(executions), other=compact_json),
        )
        return policy
