"""``python -m trainium_eks run``: start and follow one run of the hybrid workflow, with stubbed AWS clients.

Real boto3 clients (fake credentials, no network) wrapped in botocore's Stubber: every call must be the expected
one with the expected parameters, and nothing else is called.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from typing import Any, Dict, List

import pytest
from botocore.stub import ANY

from tests.support.apps import REPO
from tests.support.stubbed_session import StubbedSession
from trainium_eks.commands import run

REGION = "us-west-2"
STATE_MACHINE = "arn:aws:states:us-west-2:123456789012:stateMachine:HybridWorkflow"
EXECUTION = "arn:aws:states:us-west-2:123456789012:execution:HybridWorkflow:sagemaker-0123"
NOW = datetime.datetime(2026, 12, 1, 10, 0, tzinfo=datetime.timezone.utc)


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Credentials that sign nothing real; no profile, config file or metadata service is read."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def stubbed_session() -> StubbedSession:
    """The CloudFormation and Step Functions clients the command uses, stubbed."""
    return StubbedSession(("cloudformation", "stepfunctions"), REGION)


def stack_outputs(session: StubbedSession, outputs: Dict[str, str], stack: str = "KubeflowTraining") -> None:
    session.stubs["cloudformation"].add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": stack,
                    "CreationTime": NOW,
                    "StackStatus": "UPDATE_COMPLETE",
                    "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
                }
            ]
        },
        {"StackName": stack},
    )


def started(session: StubbedSession, request: Dict[str, Any]) -> None:
    session.stubs["stepfunctions"].add_response(
        "start_execution",
        {"executionArn": EXECUTION, "startDate": NOW},
        {"stateMachineArn": STATE_MACHINE, "name": ANY, "input": json.dumps(request)},
    )


def described(session: StubbedSession, status: str, **extra: Any) -> None:
    session.stubs["stepfunctions"].add_response(
        "describe_execution",
        {"executionArn": EXECUTION, "stateMachineArn": STATE_MACHINE, "status": status, "startDate": NOW, **extra},
        {"executionArn": EXECUTION},
    )


def history(session: StubbedSession, events: List[Dict[str, Any]]) -> None:
    session.stubs["stepfunctions"].add_response(
        "get_execution_history",
        {"events": [{"timestamp": NOW, "id": n + 1, **event} for n, event in enumerate(events)]},
        {"executionArn": EXECUTION, "maxResults": 100},
    )


def scheduled(resource_type: str, resource: str, parameters: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "type": "TaskScheduled",
        "taskScheduledEventDetails": {
            "resourceType": resource_type,
            "resource": resource,
            "region": REGION,
            "parameters": json.dumps(parameters),
        },
    }


ENTERED = {"type": "ExecutionStarted"}


def test_dry_run_prints_the_request_and_calls_nothing(capsys):
    class NoSession:
        def client(self, name: str) -> Any:
            raise AssertionError(f"--dry-run must not create a {name} client")

    code = run.main(
        ["--runtime", "kubernetes", "--epochs", "5", "--lr", "0.05", "-p", "seed=7", "--node-count", "2", "--dry-run"],
        session=NoSession(),
    )
    assert code == 0
    assert json.loads(capsys.readouterr().out) == {
        "training_runtime": "kubernetes",
        "hyperparameters": {"epochs": "5", "lr": "0.05", "seed": "7"},
        "node_count": 2,
    }


def test_a_sagemaker_run_is_started_located_and_followed_to_success(capsys):
    session = stubbed_session()
    request = {
        "training_runtime": "sagemaker",
        "hyperparameters": {"epochs": "5", "batch-size": "128"},
        "instance_type": "ml.g5.xlarge",
    }
    stack_outputs(session, {"FileSystemId": "fs-0123456789abcdef0", "HybridStateMachineArn": STATE_MACHINE})
    started(session, request)
    described(session, "RUNNING")
    history(session, [ENTERED])
    described(session, "RUNNING")
    job = {"TrainingJobName": "cifar10-ddp-0123456789", "RoleArn": "arn:aws:iam::123456789012:role/job"}
    history(session, [ENTERED, scheduled("sagemaker", "createTrainingJob.sync", job)])
    output = {"runtime": "sagemaker", "job_name": "cifar10-ddp-0123456789", "status": "Completed"}
    described(session, "SUCCEEDED", stopDate=NOW, output=json.dumps(output))
    sleeps: List[float] = []
    code = run.main(
        ["--runtime", "sagemaker", "--epochs", "5", "--batch-size", "128", "--instance-type", "ml.g5.xlarge"],
        session=session,
        sleep=sleeps.append,
    )
    session.verify()
    printed = capsys.readouterr().out
    assert code == 0
    assert f"Started {EXECUTION}" in printed
    assert "Runs on: SageMaker training job cifar10-ddp-0123456789" in printed
    assert "#/jobs/cifar10-ddp-0123456789" in printed
    assert printed.count(" RUNNING") == 1 and " SUCCEEDED" in printed, "one line per new status"
    assert f"Output: {json.dumps(output)}" in printed
    assert sleeps == [15.0, 15.0]


def test_a_kubernetes_run_names_its_trainjob_and_its_release(capsys):
    session = stubbed_session()
    request = {"training_runtime": "kubernetes", "hyperparameters": {"epochs": "2"}}
    stack_outputs(session, {"HybridStateMachineArn": STATE_MACHINE}, stack="Kubeflow")
    started(session, request)
    described(session, "RUNNING")
    labels = {"trainium-eks/held-job": "cifar10-ddp-9f8e7d6c5b"}
    body = {"apiVersion": "batch/v1", "metadata": {"name": "cifar10-ddp-9f8e7d6c5b-release", "labels": labels}}
    body["metadata"]["namespace"] = "training"
    call = {"Method": "POST", "Path": "/apis/batch/v1/namespaces/training/jobs"}
    history(session, [ENTERED, scheduled("eks", "call", {**call, "RequestBody": body})])
    described(session, "SUCCEEDED", stopDate=NOW, output="{}")
    code = run.main(
        ["--runtime", "kubernetes", "--epochs", "2", "--stack", "Kubeflow", "--poll-seconds", "5"],
        session=session,
        sleep=lambda seconds: None,
    )
    session.verify()
    printed = capsys.readouterr().out
    assert code == 0
    assert "Runs on: Kubernetes TrainJob training/cifar10-ddp-9f8e7d6c5b" in printed
    assert "kubectl -n training get trainjob cifar10-ddp-9f8e7d6c5b" in printed
    assert "kubectl -n training logs job/cifar10-ddp-9f8e7d6c5b-release" in printed


def test_a_failed_run_exits_1_with_its_reason(capsys):
    session = stubbed_session()
    request = {"training_runtime": "sagemaker", "hyperparameters": {}}
    stack_outputs(session, {"HybridStateMachineArn": STATE_MACHINE})
    started(session, request)
    cause = json.dumps({"TrainingJobStatus": "Failed", "FailureReason": "AlgorithmError: launch.py exited with 2"})
    described(session, "FAILED", stopDate=NOW, error="States.TaskFailed", cause=cause)
    history(session, [ENTERED, scheduled("sagemaker", "createTrainingJob.sync", {"TrainingJobName": "cifar10-ddp-1"})])
    code = run.main(["--runtime", "sagemaker"], session=session, sleep=lambda seconds: None)
    session.verify()
    printed = capsys.readouterr().out
    assert code == 1
    assert "Error: States.TaskFailed" in printed
    assert "Reason: AlgorithmError: launch.py exited with 2" in printed
    assert f"Cause: {cause}" in printed


def test_a_refused_request_prints_the_workflows_cause(capsys):
    session = stubbed_session()
    request = {"training_runtime": "kubernetes", "hyperparameters": {}, "node_count": 9}
    stack_outputs(session, {"HybridStateMachineArn": STATE_MACHINE})
    started(session, request)
    cause = "node_count must be an integer of at least 1 and at most 6; got 9"
    described(session, "FAILED", stopDate=NOW, error="InvalidRequest", cause=cause)
    history(session, [ENTERED])
    assert run.main(["--runtime", "kubernetes", "--node-count", "9"], session=session, sleep=lambda s: None) == 1
    session.verify()
    printed = capsys.readouterr().out
    assert "Error: InvalidRequest" in printed and f"Cause: {cause}" in printed and "Reason:" not in printed


def test_a_stack_without_the_output_is_a_clear_error(capsys):
    session = stubbed_session()
    stack_outputs(session, {"FileSystemId": "fs-0123456789abcdef0"})
    assert run.main(["--runtime", "sagemaker"], session=session) == 1
    session.verify()
    error = capsys.readouterr().err
    assert "stack KubeflowTraining has no output HybridStateMachineArn (its outputs: FileSystemId)" in error


def test_a_missing_stack_is_a_clear_error(capsys):
    session = stubbed_session()
    session.stubs["cloudformation"].add_client_error(
        "describe_stacks",
        service_error_code="ValidationError",
        service_message="Stack with id Nope does not exist",
        expected_params={"StackName": "Nope"},
    )
    assert run.main(["--runtime", "kubernetes", "--stack", "Nope"], session=session) == 1
    session.verify()
    assert "cannot read stack Nope: Stack with id Nope does not exist" in capsys.readouterr().err


def test_an_execution_that_cannot_start_is_a_clear_error(capsys):
    session = stubbed_session()
    stack_outputs(session, {"HybridStateMachineArn": STATE_MACHINE})
    session.stubs["stepfunctions"].add_client_error(
        "start_execution",
        service_error_code="InvalidName",
        service_message="Invalid Name: 'my run'",
        expected_params={"stateMachineArn": STATE_MACHINE, "name": "my run", "input": ANY},
    )
    assert run.main(["--runtime", "sagemaker", "--name", "my run"], session=session) == 1
    session.verify()
    assert f"cannot start {STATE_MACHINE}: Invalid Name: 'my run'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--runtime", "kubernetes", "--instance-type", "ml.g5.xlarge"], "--instance-type is a SageMaker setting"),
        (["--runtime", "sagemaker", "--node-count", "0"], "--node-count must be at least 1"),
        (["--runtime", "sagemaker", "--poll-seconds", "0"], "--poll-seconds must be positive"),
    ],
)
def test_requests_that_cannot_run_are_refused_before_any_call(argv, message, capsys):
    class NoSession:
        region_name = REGION

        def client(self, name: str) -> Any:
            raise AssertionError(f"a refused request must not create a {name} client")

    assert run.main(argv, session=NoSession()) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("value", ["epochs", "=3", "output-dir=/data/x", "data_dir=/x"])
def test_bad_hyperparameters_are_argument_errors(value, capsys):
    with pytest.raises(SystemExit) as exited:
        run.main(["--runtime", "sagemaker", "-p", value, "--dry-run"])
    assert exited.value.code == 2
    assert "--hyperparameter/-p" in capsys.readouterr().err


def test_the_command_imports_no_aws_sdk_before_it_runs():
    code = (
        "import sys, trainium_eks.commands.run; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'aws_cdk')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_region_falls_back_to_the_apps_cdk_json(tmp_path):
    assert run.app_region(REPO) == "us-west-2"
    (tmp_path / "cdk.json").write_text('{"context": {"region": "us-east-2"}}')
    assert run.app_region(tmp_path) == "us-east-2"
    assert run.app_region(tmp_path / "nowhere") is None
