"""The states of the hybrid workflow, from the request's reading to every end: the Choice of runtime, the request
checks, the SageMaker task, the create-and-poll loop of the TrainJob's release and the TrainJob, and the check that
the data is staged."""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence, Tuple

from aws_cdk import Duration
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from trainium_eks.constructs.private.jsonata import jsonata, quoted
from trainium_eks.constructs.private.release_template import RELEASE_NAME, TRAINJOB_VARIABLE, release_template
from trainium_eks.constructs.private.trainjob_template import EXECUTION_ANNOTATION, trainjob_template
from trainium_eks.manifests.addons.training_runtime import TRAINER_API_VERSION
from trainium_eks.manifests.jobs.train_job import TrainJobChart

RUNTIMES: Tuple[str, ...] = ("kubernetes", "sagemaker")
"""The values of ``training_runtime`` in a run request."""

SAGEMAKER_TRAINING_SYNC = "arn:aws:states:::sagemaker:createTrainingJob.sync"

EKS_CALL = "arn:aws:states:::eks:call"
"""The Step Functions integrations of the two branches. Source: Step Functions developer guide, connect-sagemaker.html
and connect-eks.html."""

KUBERNETES_TRAINING_FAILED = "TrainJobFailed"
"""The error of an execution whose TrainJob failed (its JobSet has ended its pods; the TrainJob stays, for logs)."""

TRAINJOB_GONE = "TrainJobDeleted"
"""The error of an execution whose TrainJob was deleted by someone else after its release had ended."""

RELEASE_FAILED = "ReleaseFailed"
"""The error of an execution whose release Job failed: the TrainJob's nodes could not be held within the release's
attempts, or a restart of its gang could not be placed again (the release's log says which); nothing of the run is
left running, and the release stays, for its log."""

MAX_HYPERPARAMETERS = 100
"""SageMaker's limit on the entries of ``HyperParameters`` (API reference, CreateTrainingJob); kept for both
runtimes so that one request is valid on either."""

RUN_TRAINJOBS = (
    "$states.result.ResponseBody.items[$not($exists(metadata.deletionTimestamp)) and "
    f"metadata.annotations.`{EXECUTION_ANNOTATION}` = $states.context.Execution.Id]"
)
"""JSONata of the run's TrainJob in the answer of the list by name: only one this execution's release created (its
annotation holds the execution's ARN) and that is not being deleted (a TrainJob its release takes back after a
stall is gone for the run until the release creates it again)."""

RUNS_TRAINJOB = f"$count({RUN_TRAINJOBS}) > 0"

RESULT_CONDITIONS = "($c := $states.result.ResponseBody.status.conditions; $exists($c) ? $c : [])"
"""JSONata of the status conditions of the batch/v1 Job a GET answered (the release, the data staging Job); ``[]``
before it has any."""
"""JSONata: whether the run's TrainJob exists (:data:`RUN_TRAINJOBS`)."""

JOB_SUFFIX_LENGTH = 10
"""Hex digits of the SHA-256 of the whole execution name in a job's name, ``<base>-<10 hex digits>``: two executions
name the same job only if their names' digests agree in their first 40 bits (Step Functions keeps execution names
unique per state machine for 90 days), so ``my-experiment`` and ``other-experiment`` are two jobs, with two output
and checkpoint folders. The name is a DNS-1123 label and a valid SageMaker training job name."""

HASH_FUNCTION = "$hash"
"""Step Functions' JSONata function for a digest, ``$hash(value, algorithm)`` with algorithm ``MD5``, ``SHA-1``,
``SHA-256``, ``SHA-384`` or ``SHA-512``, the JSONata counterpart of ``States.Hash`` (Step Functions developer guide,
"Transforming data with JSONata in Step Functions", section "JSONata functions provided by Step Functions"); it is
not part of JSONata itself."""


def workflow_definition(
    scope: Construct,
    *,
    cluster: eks.ICluster,
    train_job: TrainJobChart,
    namespace: str,
    default_runtime: Optional[str],
    sagemaker_arguments: Mapping[str, Any],
    sagemaker_defaults: Tuple[str, int],
    allowed_instance_types: Sequence[str],
    sagemaker_max_nodes: int,
    poll_seconds: int,
    max_polls: int,
    deadline_seconds: int,
    waiting_seconds: int,
    data_job: Optional[str],
) -> sfn.IChainable:
    """The states of the workflow, wired from the request's reading to every end."""
    base = train_job.component
    trainjobs = f"/apis/{TRAINER_API_VERSION}/namespaces/{namespace}/trainjobs"
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    cluster_arguments = {
        "ClusterName": cluster.cluster_name,
        "CertificateAuthority": cluster.cluster_certificate_authority_data,
        "Endpoint": cluster.cluster_endpoint,
    }
    default = quoted(default_runtime) if default_runtime else "null"
    read = sfn.Pass.jsonata(
        scope,
        "Read request",
        assign={
            "runtime": jsonata(f"$exists($states.input.training_runtime) ? $states.input.training_runtime : {default}"),
            "hyperparameters": jsonata("$exists($states.input.hyperparameters) ? $states.input.hyperparameters : {}"),
            "node_count": jsonata("$exists($states.input.node_count) ? $states.input.node_count : null"),
            "instance_type": jsonata("$exists($states.input.instance_type) ? $states.input.instance_type : null"),
            "job_name": jsonata(job_name_expression(base)),
            "polls": 0,
            "waits": 0,
            "started": False,
            "gone": 0,
        },
    )
    allowed = ", ".join(RUNTIMES)
    unknown = sfn.Fail.jsonata(
        scope,
        "Unknown runtime",
        error="UnknownRuntime",
        cause=jsonata(
            f"'training_runtime must be one of {allowed}; got ' & ($runtime = null ? 'none' : $string($runtime))"
        ),
    )
    refuse = sfn.Fail.jsonata(scope, "Refuse request", error="InvalidRequest", cause=jsonata("$join($problems, '; ')"))
    call_failed = sfn.Fail.jsonata(
        scope,
        "Kubernetes call failed",
        error=jsonata("$states.input.Error"),
        cause=jsonata("$states.input.Cause"),
    )

    instance_type, instance_count = sagemaker_defaults
    check_sagemaker = sfn.Pass.jsonata(
        scope,
        "Check SageMaker request",
        assign={
            "problems": jsonata(
                request_problems(
                    max_nodes=sagemaker_max_nodes,
                    instance_types=allowed_instance_types,
                    kubernetes_instance_type=None,
                )
            ),
            "node_count": jsonata(f"$node_count = null ? {instance_count} : $node_count"),
            "instance_type": jsonata(f"$instance_type = null ? {quoted(instance_type)} : $instance_type"),
        },
    )
    train_sagemaker = sfn.CustomState(
        scope,
        "Train on SageMaker",
        state_json={
            "Type": "Task",
            "Resource": SAGEMAKER_TRAINING_SYNC,
            "Arguments": dict(sagemaker_arguments),
            "Output": jsonata(
                "{'runtime': 'sagemaker', 'job_name': $states.result.TrainingJobName, "
                "'status': $states.result.TrainingJobStatus, "
                "'model_artifacts': $states.result.ModelArtifacts.S3ModelArtifacts}"
            ),
        },
    )
    sagemaker_failed = sfn.Fail.jsonata(
        scope,
        "SageMaker training failed",
        error=jsonata("$states.input.Error"),
        cause=jsonata("$states.input.Cause"),
    )
    train_sagemaker.add_catch(sagemaker_failed, errors=["States.ALL"])
    sagemaker_done = sfn.Succeed.jsonata(scope, "SageMaker training succeeded")

    group = train_job.workload.node_group
    check_kubernetes = sfn.Pass.jsonata(
        scope,
        "Check Kubernetes request",
        assign={
            "problems": jsonata(
                request_problems(
                    max_nodes=group.max_nodes,
                    instance_types=(),
                    kubernetes_instance_type=group.instance_type,
                )
            ),
            "node_count": jsonata(f"$node_count = null ? {train_job.nodes} : $node_count"),
        },
    )
    render = sfn.Pass.jsonata(
        scope,
        "Render TrainJob",
        assign={TRAINJOB_VARIABLE.removeprefix("$"): trainjob_template(train_job, deadline_seconds)},
    )
    create = sfn.CustomState(
        scope,
        "Create release",
        state_json={
            "Type": "Task",
            "Resource": EKS_CALL,
            "Arguments": {
                **cluster_arguments,
                "Method": "POST",
                "Path": jobs,
                "RequestBody": release_template(namespace, deadline_seconds, waiting_seconds),
            },
            "Output": jsonata("$states.input"),
        },
    )
    create.add_catch(call_failed, errors=["States.ALL"])
    wait = sfn.Wait.jsonata(scope, "Wait for TrainJob", time=sfn.WaitTime.duration(Duration.seconds(poll_seconds)))
    status = sfn.CustomState(
        scope,
        "Read TrainJob",
        state_json={
            "Type": "Task",
            "Resource": EKS_CALL,
            "Arguments": {
                **cluster_arguments,
                "Method": "GET",
                "Path": trainjobs,
                "QueryParameters": {"fieldSelector": [jsonata("'metadata.name=' & $job_name")]},
            },
            "Assign": {
                "polls": jsonata(f"{RUNS_TRAINJOB} ? $polls + 1 : $polls"),
                "waits": jsonata(f"{RUNS_TRAINJOB} ? $waits : $waits + 1"),
                "created": jsonata(RUNS_TRAINJOB),
                "started": jsonata(f"$started or {RUNS_TRAINJOB}"),
                "gone": jsonata(f"{RUNS_TRAINJOB} ? 0 : $gone"),
                "conditions": jsonata(f"($c := {RUN_TRAINJOBS}[0].status.conditions; $exists($c) ? $c : [])"),
            },
            "Output": jsonata("$states.input"),
        },
    )
    status.add_retry(errors=["States.ALL"], interval=Duration.seconds(10), max_attempts=3, backoff_rate=2)
    status.add_catch(call_failed, errors=["States.ALL"])
    release_path = jsonata(f"{quoted(jobs + '/')} & {RELEASE_NAME}")
    release = sfn.CustomState(
        scope,
        "Read release",
        state_json={
            "Type": "Task",
            "Resource": EKS_CALL,
            "Arguments": {**cluster_arguments, "Method": "GET", "Path": release_path},
            "Assign": {
                "release_conditions": jsonata(RESULT_CONDITIONS),
                "gone": jsonata(
                    "$exists($states.result.ResponseBody.status.conditions[type = 'Complete' and status = 'True']) "
                    "? $gone + 1 : 0"
                ),
            },
            "Output": jsonata("$states.input"),
        },
    )
    release.add_retry(errors=["States.ALL"], interval=Duration.seconds(10), max_attempts=3, backoff_rate=2)
    release.add_catch(call_failed, errors=["States.ALL"])
    succeeded = sfn.Succeed.jsonata(
        scope,
        "Kubernetes training succeeded",
        outputs=jsonata(
            f"{{'runtime': 'kubernetes', 'job_name': $job_name, 'namespace': {quoted(namespace)}, "
            "'conditions': $conditions}"
        ),
    )
    failed = sfn.Fail.jsonata(
        scope,
        "Kubernetes training failed",
        error=KUBERNETES_TRAINING_FAILED,
        cause=jsonata(
            "($c := $conditions[type = 'Failed' and status = 'True'][0]; "
            "'TrainJob ' & $job_name & ': ' & $c.reason & ': ' & $c.message)"
        ),
    )
    release_failed = sfn.Fail.jsonata(
        scope,
        "Kubernetes release failed",
        error=RELEASE_FAILED,
        cause=jsonata(
            f"($c := $release_conditions[type = 'Failed' and status = 'True'][0]; $r := {RELEASE_NAME}; "
            "'job/' & $r & ', which holds the nodes of TrainJob ' & $job_name & ' and creates it, failed (' & "
            "$c.reason & ': ' & $c.message & ') ' & ($started ? 'after the TrainJob had run: a restart of its gang "
            "could not be placed again, or the TrainJob was deleted' : 'before creating the TrainJob: its nodes "
            f"could not be held') & '; its log says why: kubectl -n {namespace} logs job/' & $r)"
        ),
    )
    gone = sfn.Fail.jsonata(
        scope,
        "Kubernetes training gone",
        error=TRAINJOB_GONE,
        cause=jsonata(
            f"'TrainJob ' & $job_name & ' no longer exists and its release, job/' & {RELEASE_NAME} & ', has ended: "
            "it was deleted, not by the workflow; nothing of the run is left running'"
        ),
    )
    delete = sfn.CustomState(
        scope,
        "Delete release",
        state_json={
            "Type": "Task",
            "Resource": EKS_CALL,
            "Arguments": {
                **cluster_arguments,
                "Method": "DELETE",
                "Path": release_path,
                "QueryParameters": {"propagationPolicy": ["Background"]},
            },
            "Output": jsonata("$states.input"),
        },
    )
    delete.add_catch(call_failed, errors=["States.ALL"])
    max_waits = math.ceil(waiting_seconds / poll_seconds)
    timed_out = sfn.Fail.jsonata(
        scope,
        "Kubernetes training timed out",
        error="MaxRuntimeExceeded",
        cause=jsonata(
            f"$polls >= {max_polls} ? 'TrainJob ' & $job_name & ' did not finish within {max_polls * poll_seconds} "
            "seconds; it was deleted with its release' : 'the release of TrainJob ' & $job_name & ' did not create it "
            f"within {max_waits * poll_seconds} seconds of waiting for nodes; it was deleted'"
        ),
    )
    release_ended = (
        sfn.Choice.jsonata(scope, "Release ended?")
        .when(
            sfn.Condition.jsonata(jsonata("$exists($release_conditions[type = 'Failed' and status = 'True'])")),
            release_failed,
        )
        .when(sfn.Condition.jsonata(jsonata("$gone >= 2")), gone)
        .otherwise(wait)
    )
    finished = (
        sfn.Choice.jsonata(scope, "TrainJob finished?")
        .when(sfn.Condition.jsonata(jsonata(_has_condition("Complete"))), succeeded)
        .when(sfn.Condition.jsonata(jsonata(_has_condition("Failed"))), failed)
        .when(
            sfn.Condition.jsonata(jsonata(f"$polls >= {max_polls} or $waits >= {max(max_waits, 1)}")),
            delete.next(timed_out),
        )
        .when(sfn.Condition.jsonata(jsonata("$not($created)")), release.next(release_ended))
        .otherwise(wait)
    )
    kubernetes = (
        sfn.Choice.jsonata(scope, "Kubernetes request valid?")
        .when(sfn.Condition.jsonata(jsonata("$count($problems) > 0")), refuse)
        .otherwise(render.next(create).next(wait).next(status).next(finished))
    )
    sagemaker = (
        sfn.Choice.jsonata(scope, "SageMaker request valid?")
        .when(sfn.Condition.jsonata(jsonata("$count($problems) > 0")), refuse)
        .otherwise(train_sagemaker.next(sagemaker_done))
    )
    choose = (
        sfn.Choice.jsonata(scope, "Choose runtime")
        .when(sfn.Condition.jsonata(jsonata("$runtime = 'sagemaker'")), check_sagemaker.next(sagemaker))
        .when(sfn.Condition.jsonata(jsonata("$runtime = 'kubernetes'")), check_kubernetes.next(kubernetes))
        .otherwise(unknown)
    )
    if data_job is None:
        return read.next(choose)
    return read.next(_data_check(scope, cluster_arguments, namespace, data_job, then=choose))


def _data_check(
    scope: Construct, cluster_arguments: Mapping[str, Any], namespace: str, data_job: str, *, then: sfn.IChainable
) -> sfn.IChainable:
    """Read the Job that stages the data; go on to ``then`` once it has completed, else fail with DataNotStaged."""
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{data_job}"
    not_staged = sfn.Fail.jsonata(
        scope,
        "Data not staged",
        error="DataNotStaged",
        cause=jsonata(
            f"'job/{data_job}, which stages the data set, has not completed ('"
            " & ($true := $data_conditions[status = 'True'].type;"
            " $count($true) > 0 ? $join($true, ', ') : 'no condition yet')"
            " & '): run again once kubectl get job -n " + namespace + " " + data_job + " says Complete'"
        ),
    )
    unreadable = sfn.Fail.jsonata(
        scope,
        "Data job not readable",
        error="DataNotStaged",
        cause=jsonata(f"'cannot read job/{data_job}: ' & $states.input.Error & ': ' & $states.input.Cause"),
    )
    read = sfn.CustomState(
        scope,
        "Read data job",
        state_json={
            "Type": "Task",
            "Resource": EKS_CALL,
            "Arguments": {**cluster_arguments, "Method": "GET", "Path": path},
            "Assign": {"data_conditions": jsonata(RESULT_CONDITIONS)},
            "Output": jsonata("$states.input"),
        },
    )
    read.add_retry(errors=["States.ALL"], interval=Duration.seconds(5), max_attempts=2, backoff_rate=2)
    read.add_catch(unreadable, errors=["States.ALL"])
    staged = (
        sfn.Choice.jsonata(scope, "Data staged?")
        .when(sfn.Condition.jsonata(jsonata("$exists($data_conditions[type = 'Complete' and status = 'True'])")), then)
        .otherwise(not_staged)
    )
    return read.next(staged)


def _has_condition(kind: str) -> str:
    return f"$exists($conditions[type = {quoted(kind)} and status = 'True'])"


def job_name_expression(base: str, execution_name: str = "$states.context.Execution.Name") -> str:
    """JSONata of a run's job name: ``<base>-`` and the first :data:`JOB_SUFFIX_LENGTH` hex digits (lowercase) of the
    SHA-256 of the execution's whole name (the JSONata ``execution_name``), computed with :data:`HASH_FUNCTION`."""
    digest = f"$lowercase({HASH_FUNCTION}({execution_name}, 'SHA-256'))"
    return f"{quoted(base + '-')} & $substring({digest}, 0, {JOB_SUFFIX_LENGTH})"


def request_problems(
    *, max_nodes: Optional[int], instance_types: Sequence[str], kubernetes_instance_type: Optional[str]
) -> str:
    """JSONata of the request's problems (a list of sentences, empty when the request is valid)."""
    not_strings = "$keys($hyperparameters)[$type($lookup($hyperparameters, $)) != 'string']"
    upper = f" and $node_count <= {max_nodes}" if max_nodes is not None else ""
    nodes = f"at least 1{f' and at most {max_nodes}' if max_nodes is not None else ''}"
    checks = [
        "$type($hyperparameters) != 'object' ? 'hyperparameters must be an object of string values'",
        f"$type($hyperparameters) = 'object' and $count({not_strings}) > 0 ? "
        f"'hyperparameters must be strings (as SageMaker requires): ' & $join({not_strings}, ', ')",
        f"$type($hyperparameters) = 'object' and $count($keys($hyperparameters)) > {MAX_HYPERPARAMETERS} ? "
        f"'at most {MAX_HYPERPARAMETERS} hyperparameters'",
        f"$node_count != null and $not($type($node_count) = 'number' ? "
        f"($node_count = $floor($node_count) and $node_count >= 1{upper}) : false) ? "
        f"'node_count must be an integer of {nodes}; got ' & $string($node_count)",
    ]
    if kubernetes_instance_type is not None:
        checks.append(
            "$instance_type != null ? 'instance_type is a SageMaker setting; the Kubernetes job runs on the node "
            f"group of {kubernetes_instance_type}'"
        )
    else:
        listed = ", ".join(quoted(name) for name in instance_types)
        checks.append(
            f"$instance_type != null and $not($instance_type in [{listed}]) ? "
            f"'instance_type must be one of {', '.join(instance_types)}; got ' & $string($instance_type)"
        )
    return "[" + ", ".join(checks) + "]"
