"""WorkflowRunCleanup: the release Job (and with it the TrainJob) of a workflow run that ended badly is deleted, so it
never keeps the nodes busy."""

from __future__ import annotations

from typing import Callable, Sequence, Union

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from trainium_eks.constructs.logged_state_machine import logged_state_machine
from trainium_eks.moved import removed_props

EKS_CALL = "arn:aws:states:::eks:call"

ENDED_BADLY = ("FAILED", "TIMED_OUT", "ABORTED")
"""Execution statuses whose run may have left a TrainJob behind: a failed call or read, a timeout, a stopped
execution (no state of the workflow runs after ``StopExecution``). Step Functions sends each status change of a
Standard execution to EventBridge's default bus ("Step Functions Execution Status Change"; Step Functions developer
guide, cw-events.html)."""


class WorkflowRunCleanup(Construct):
    """Deletes the release Job of every execution of ``workflow`` that failed, timed out or was stopped, and with it
    the run's TrainJob and the Jobs that hold its nodes.

    An EventBridge rule on the workflow's "Step Functions Execution Status Change" events (status in
    :data:`ENDED_BADLY`) starts an Express state machine that computes the name of the run's release Job from the
    execution's name (as the workflow does), reads that Job, and deletes it with ``eks:call``
    (``propagationPolicy: Background``: Kubernetes' garbage collector then deletes what the release created and owns,
    the TrainJob with its JobSet and pods, and any capacity Job) only if its ``owner_annotation`` holds the
    execution's ARN: a Job of that name created by another execution, or by hand, is kept. An execution whose error
    is one of ``keep_on_error`` (a TrainJob that failed by itself, whose JobSet has already ended its pods; a release
    that failed, which has left nothing running) keeps its release for ``kubectl logs``. Nothing to delete (a
    SageMaker run, a release already gone) is not an error: the state machine ends in ``Nothing deleted`` with the
    API's answer. It runs as ``role`` (the workflow's role, whose EKS access entry may delete Jobs) and logs every
    execution.

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
        kept = sfn.Succeed.jsonata(self, "Release kept for its logs")
        errors = ", ".join(f"'{error}'" for error in kept_errors)
        start = (
            sfn.Choice.jsonata(self, "Ended with its logs to keep?")
            .when(sfn.Condition.jsonata(f"{{% $states.input.detail.error in [{errors}] %}}"), kept)
            .otherwise(read.next(ours))
        )
        self.log_group, self.state_machine = logged_state_machine(
            self,
            start=start,
            state_machine_type=sfn.StateMachineType.EXPRESS,
            role=role,
            comment="Delete the release and TrainJob of a hybrid workflow run that failed, timed out or was stopped",
        )
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
