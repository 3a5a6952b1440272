"""WorkflowRunCleanup: the TrainJob of a workflow run that ended badly is deleted, so it never keeps the nodes busy."""

from __future__ import annotations

from typing import Callable

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from trainium_eks.constructs.logged_state_machine import logged_state_machine

EKS_CALL = "arn:aws:states:::eks:call"

ENDED_BADLY = ("FAILED", "TIMED_OUT", "ABORTED")
"""Execution statuses whose run may have left a TrainJob behind: a failed call or read, a timeout, a stopped
execution (no state of the workflow runs after ``StopExecution``). Step Functions sends each status change of a
Standard execution to EventBridge's default bus ("Step Functions Execution Status Change"; Step Functions developer
guide, cw-events.html)."""


class WorkflowRunCleanup(Construct):
    """Deletes the TrainJob of every execution of ``workflow`` that failed, timed out or was stopped.

    An EventBridge rule on the workflow's "Step Functions Execution Status Change" events (status in
    :data:`ENDED_BADLY`) starts an Express state machine that computes the run's job name from the execution's name
    (as the workflow does), reads that TrainJob, and deletes it with ``eks:call`` (``propagationPolicy: Background``:
    the Trainer's JobSet, Jobs and pods go with it) only if its ``owner_annotation`` holds the execution's ARN: a job
    of that name created by another execution (whose name ends alike) is kept. An execution whose error is
    ``keep_on_error`` (a TrainJob that failed by itself, whose JobSet has already ended its pods) keeps its TrainJob
    for ``kubectl logs``. Nothing to delete (a SageMaker
    run, a TrainJob already gone) is not an error: the state machine ends in ``Nothing deleted`` with the API's
    answer. It runs as ``role`` (the workflow's role, whose EKS access entry may delete TrainJobs) and logs every
    execution.

    :param workflow: The hybrid workflow's state machine. Required.
    :param role: Its role. Required.
    :param cluster: The cluster (endpoint and certificate authority data). Required.
    :param trainjobs_path: The API path of the namespace's TrainJobs. Required.
    :param job_name: A function of a JSONata expression of the execution's name that returns the JSONata of the job's
        name. Required.
    :param keep_on_error: The workflow's error of a failed TrainJob. Required.
    :param owner_annotation: The TrainJob's annotation that holds the ARN of the execution that created it. Required.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        workflow: sfn.IStateMachine,
        role: iam.IRole,
        cluster: eks.ICluster,
        trainjobs_path: str,
        job_name: Callable[[str], str],
        keep_on_error: str,
        owner_annotation: str,
    ) -> None:
        super().__init__(scope, id_)
        name = job_name("$states.input.detail.name")
        cluster_arguments = {
            "ClusterName": cluster.cluster_name,
            "CertificateAuthority": cluster.cluster_certificate_authority_data,
            "Endpoint": cluster.cluster_endpoint,
        }
        owner = f"$states.result.ResponseBody.metadata.annotations.`{owner_annotation}`"
        read = sfn.CustomState(
            self,
            "Read TrainJob of the run",
            state_json={
                "Type": "Task",
                "Resource": EKS_CALL,
                "Arguments": {**cluster_arguments, "Method": "GET", "Path": f"{{% '{trainjobs_path}/' & {name} %}}"},
                "Assign": {
                    "job_path": f"{{% '{trainjobs_path}/' & {name} %}}",
                    "created_by": f"{{% {owner} %}}",
                    "execution": "{% $states.input.detail.executionArn %}",
                },
            },
        )
        delete = sfn.CustomState(
            self,
            "Delete TrainJob of the run",
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
            self, "TrainJob of another run kept", outputs="{% {'kept': $job_path, 'created_by': $created_by} %}"
        )
        ours = (
            sfn.Choice.jsonata(self, "Created by this run?")
            .when(
                sfn.Condition.jsonata("{% $created_by = $execution %}"),
                delete.next(sfn.Succeed.jsonata(self, "Deleted")),
            )
            .otherwise(another)
        )
        kept = sfn.Succeed.jsonata(self, "Failed TrainJob kept for its logs")
        start = (
            sfn.Choice.jsonata(self, "TrainJob failed by itself?")
            .when(sfn.Condition.jsonata(f"{{% $states.input.detail.error = '{keep_on_error}' %}}"), kept)
            .otherwise(read.next(ours))
        )
        self.log_group, self.state_machine = logged_state_machine(
            self,
            start=start,
            state_machine_type=sfn.StateMachineType.EXPRESS,
            role=role,
            comment="Delete the TrainJob of a hybrid workflow run that failed, timed out or was stopped",
        )
        self.rule = events.Rule(
            self,
            "RunEndedBadly",
            description="A hybrid workflow execution failed, timed out or was stopped: delete its TrainJob",
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=["Step Functions Execution Status Change"],
                detail={"stateMachineArn": [workflow.state_machine_arn], "status": list(ENDED_BADLY)},
            ),
            targets=[targets.SfnStateMachine(self.state_machine)],
        )
