"""``python -m trainium_eks run``: start one training run of the hybrid workflow, on SageMaker or on the cluster.

The command finds the state machine of ``HybridTrainingWorkflow`` in the outputs of the stack (``--stack``, output
``HybridStateMachineArn``), starts an execution with the run request built from the command line, prints where the
job runs (the SageMaker training job, or the TrainJob and its namespace) and follows the execution to its end. It
exits 0 when the execution succeeded and 1 otherwise, with the error and cause of the failure. ``--dry-run`` prints
the request and calls nothing. boto3 is imported only when the command talks to AWS.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from trainium_eks.core.conventions import HELD_JOB_LABEL

STATE_MACHINE_OUTPUT = "HybridStateMachineArn"
"""The stack output that holds the state machine's ARN."""

DEFAULT_STACK = "KubeflowTraining"
RUNTIMES = ("kubernetes", "sagemaker")
"""The workflow's runtimes (``trainium_eks.constructs.hybrid_workflow.RUNTIMES``; not imported: that module loads
the CDK)."""

RESERVED_HYPERPARAMETERS = frozenset({"data-dir", "output-dir", "checkpoint-dir"})
"""Flags the image's launcher sets itself (``images/cifar10-ddp/launch.py``); a run may not set them."""

FINISHED = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")
EXECUTION_NAME_LENGTH = 80
"""Step Functions' limit on an execution's name (API reference, StartExecution)."""


class RunError(RuntimeError):
    """The run cannot start: the stack, its output or the request is not usable. Its message says what to do."""


def hyperparameter(text: str) -> Tuple[str, str]:
    """``key=value`` from the command line, as a hyperparameter (SageMaker's hyperparameters are strings)."""
    key, separator, value = text.partition("=")
    key = key.strip()
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not key=value")
    if key.lstrip("-").replace("_", "-") in RESERVED_HYPERPARAMETERS:
        raise argparse.ArgumentTypeError(f"{key} is set by the image's launcher on both runtimes; leave it out")
    return key, value


def parser() -> argparse.ArgumentParser:
    """The command line."""
    commands = argparse.ArgumentParser(
        prog="python -m trainium_eks run",
        description=__doc__.split("\n\n")[0],
        epilog="Example: python -m trainium_eks run --runtime sagemaker --epochs 5 --batch-size 128",
    )
    commands.add_argument("--runtime", required=True, choices=RUNTIMES, help="where to train")
    commands.add_argument("--epochs", type=int, help="hyperparameter epochs")
    commands.add_argument("--batch-size", type=int, help="hyperparameter batch-size (per process)")
    commands.add_argument("--lr", type=float, help="hyperparameter lr")
    commands.add_argument(
        "--hyperparameter",
        "-p",
        type=hyperparameter,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any hyperparameter of the training script (repeatable); it wins over the options above",
    )
    commands.add_argument("--node-count", type=int, help="nodes or instances (default: the workflow's)")
    commands.add_argument("--instance-type", help="SageMaker instance type, ml.* (default: the workflow's)")
    commands.add_argument("--stack", default=DEFAULT_STACK, help=f"the stack's name (default {DEFAULT_STACK})")
    commands.add_argument("--name", help="the execution's name (default: <runtime>-<random hex>)")
    commands.add_argument("--poll-seconds", type=float, default=15.0, help="how often to read the status (default 15)")
    commands.add_argument("--region", help="AWS region (default: AWS_REGION, the profile's, or cdk.json's region)")
    commands.add_argument("--profile", help="AWS profile (default: the usual credential chain)")
    commands.add_argument("--dry-run", action="store_true", help="print the execution's input and stop")
    return commands


def request_of(args: argparse.Namespace) -> Dict[str, Any]:
    """The execution's input: ``training_runtime``, string ``hyperparameters``, optional ``node_count`` and
    ``instance_type``."""
    if args.instance_type is not None and args.runtime != "sagemaker":
        raise RunError("--instance-type is a SageMaker setting; the Kubernetes job runs on its node group")
    if args.node_count is not None and args.node_count < 1:
        raise RunError(f"--node-count must be at least 1, not {args.node_count}")
    if args.poll_seconds <= 0:
        raise RunError(f"--poll-seconds must be positive, not {args.poll_seconds}")
    hyperparameters: Dict[str, str] = {}
    for key, value in (("epochs", args.epochs), ("batch-size", args.batch_size), ("lr", args.lr)):
        if value is not None:
            hyperparameters[key] = str(value)
    hyperparameters.update(args.hyperparameter)
    request: Dict[str, Any] = {"training_runtime": args.runtime, "hyperparameters": hyperparameters}
    if args.node_count is not None:
        request["node_count"] = args.node_count
    if args.instance_type is not None:
        request["instance_type"] = args.instance_type
    return request


def state_machine_arn(cloudformation: Any, stack: str) -> str:
    """The ARN in the stack's output :data:`STATE_MACHINE_OUTPUT`."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        raise RunError(f"cannot read stack {stack}: {error.response['Error'].get('Message', error)}") from error
    except BotoCoreError as error:  # no credentials, no network
        raise RunError(f"cannot read stack {stack}: {error}") from error
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stacks[0].get("Outputs", [])}
    if STATE_MACHINE_OUTPUT not in outputs:
        found = ", ".join(sorted(outputs)) or "none"
        raise RunError(
            f"stack {stack} has no output {STATE_MACHINE_OUTPUT} (its outputs: {found}); deploy the stack with the "
            "hybrid workflow, or name the right stack with --stack"
        )
    return outputs[STATE_MACHINE_OUTPUT]


def start(stepfunctions: Any, state_machine: str, name: str, request: Dict[str, Any]) -> str:
    """Start an execution of ``state_machine`` called ``name`` with ``request``; returns the execution's ARN."""
    from botocore.exceptions import ClientError

    try:
        started = stepfunctions.start_execution(stateMachineArn=state_machine, name=name, input=json.dumps(request))
    except ClientError as error:
        raise RunError(f"cannot start {state_machine}: {error.response['Error'].get('Message', error)}") from error
    return started["executionArn"]


def app_region(directory: Path) -> Optional[str]:
    """The default app's region in ``directory`` (``cdk.json``'s context ``region``), or None."""
    path = directory / "cdk.json"
    try:
        region = json.loads(path.read_text()).get("context", {}).get("region")
    except (OSError, ValueError):
        return None
    return region if isinstance(region, str) and region else None


def where_it_runs(history: List[Dict[str, Any]], region: str) -> Optional[str]:
    """Where the execution's job runs, from its ``TaskScheduled`` events, or None before the job is submitted."""
    for event in history:
        details = event.get("taskScheduledEventDetails")
        if event.get("type") != "TaskScheduled" or not details:
            continue
        parameters = json.loads(details.get("parameters") or "{}")
        if details.get("resourceType") == "sagemaker" and details.get("resource", "").startswith("createTrainingJob"):
            name = parameters.get("TrainingJobName")
            return (
                f"SageMaker training job {name}\n"
                f"  console: https://{region}.console.aws.amazon.com/sagemaker/home?region={region}#/jobs/{name}\n"
                f"  logs:    aws logs tail /aws/sagemaker/TrainingJobs --log-stream-name-prefix {name} --follow"
            )
        if details.get("resourceType") == "eks" and parameters.get("Method") == "POST":
            metadata = (parameters.get("RequestBody") or {}).get("metadata", {})
            release, namespace = metadata.get("name"), metadata.get("namespace")
            name = (metadata.get("labels") or {}).get(HELD_JOB_LABEL)
            return (
                f"Kubernetes TrainJob {namespace}/{name}, created by job/{release} once its nodes are held\n"
                f"  status:  kubectl -n {namespace} get trainjob {name}\n"
                f"  release: kubectl -n {namespace} logs job/{release}\n"
                f"  logs:    kubectl -n {namespace} logs -l jobset.sigs.k8s.io/jobset-name={name} -f --prefix"
            )
    return None


def failure_reason(cause: str) -> Optional[str]:
    """The reason inside a failure's cause: SageMaker's ``FailureReason``, or the message of a Kubernetes API
    response."""
    try:
        parsed = json.loads(cause)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    if parsed.get("FailureReason"):
        return str(parsed["FailureReason"])
    body = parsed.get("ResponseBody")
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return None


def follow(
    stepfunctions: Any,
    execution_arn: str,
    *,
    region: str,
    poll_seconds: float,
    sleep: Callable[[float], None],
    out: Any,
) -> Dict[str, Any]:
    """Poll the execution until it ends, printing where it runs and each new status; returns its description."""
    located = False
    status = None
    while True:
        execution = stepfunctions.describe_execution(executionArn=execution_arn)
        if not located:
            events = stepfunctions.get_execution_history(executionArn=execution_arn, maxResults=100)["events"]
            place = where_it_runs(events, region)
            if place:
                print(f"Runs on: {place}", file=out, flush=True)
                located = True
        if execution["status"] != status:
            status = execution["status"]
            print(f"{time.strftime('%H:%M:%S')} {status}", file=out, flush=True)
        if status in FINISHED:
            return execution
        sleep(poll_seconds)


def main(argv: Optional[List[str]] = None, *, session: Any = None, sleep: Callable[[float], None] = time.sleep) -> int:
    """Start and follow one run; returns the exit code (0: the execution succeeded)."""
    args = parser().parse_args(argv)
    out = sys.stdout
    try:
        request = request_of(args)
    except RunError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(json.dumps(request, indent=2, sort_keys=True), file=out)
        return 0
    if session is None:
        import boto3

        region = args.region or os.environ.get("AWS_REGION") or None
        session = boto3.Session(profile_name=args.profile, region_name=region)
        if not session.region_name and app_region(Path.cwd()):
            session = boto3.Session(profile_name=args.profile, region_name=app_region(Path.cwd()))
    region = session.region_name
    if not region:
        print(
            "error: no AWS region: pass --region, set AWS_REGION, give the profile one, or run this in the app's "
            "directory (cdk.json's region)",
            file=sys.stderr,
        )
        return 2
    try:
        arn = state_machine_arn(session.client("cloudformation"), args.stack)
    except RunError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    stepfunctions = session.client("stepfunctions")
    name = args.name or f"{args.runtime}-{uuid.uuid4().hex}"[:EXECUTION_NAME_LENGTH]
    try:
        execution_arn = start(stepfunctions, arn, name, request)
    except RunError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"Started {execution_arn}\nRequest: {json.dumps(request, sort_keys=True)}", file=out, flush=True)
    try:
        execution = follow(
            stepfunctions, execution_arn, region=region, poll_seconds=args.poll_seconds, sleep=sleep, out=out
        )
    except KeyboardInterrupt:
        print(f"\nStopped following; the execution goes on: {execution_arn}", file=out)
        return 130
    if execution["status"] == "SUCCEEDED":
        print(f"Output: {execution.get('output', '{}')}", file=out)
        return 0
    error, cause = execution.get("error", ""), execution.get("cause", "")
    print(f"Error: {error}", file=out)
    reason = failure_reason(cause)
    if reason:
        print(f"Reason: {reason}", file=out)
    print(f"Cause: {cause}", file=out)
    return 1
