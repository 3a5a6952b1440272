"""WorkflowRunCleanup: its settings in the Express definition (evaluated with JSONata), its paths and its trigger."""

import json

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn

from tests.support.apps import new_app, only
from tests.support.clusters import ENV, imported_cluster
from tests.support.jsonata import evaluate
from trainium_eks.constructs.workflow_run_cleanup import (
    EKS_CALL,
    ENDED_BADLY,
    STATUS_LOOKS,
    STATUS_WAIT_SECONDS,
    WorkflowRunCleanup,
)
from trainium_eks.core.cfn_text import cfn_text

WORKFLOW = "arn:aws:states:us-west-2:123456789012:stateMachine:Workflow"
ENDPOINT = "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com"
JOBS = "/apis/batch/v1/namespaces/research/jobs"
OWNER = "example.com/started-by"
RUN = "arn:aws:states:us-west-2:123456789012:execution:Workflow:Run-42"


def evaluate_all(*cases):
    """The value of each ``(state field, bindings)`` case."""
    return evaluate(cases)


@pytest.fixture(scope="module")
def built():
    stack = cdk.Stack(new_app(), "Cleanup", env=ENV)
    _, cluster = imported_cluster(stack, cluster_endpoint=ENDPOINT, cluster_certificate_authority_data="Q0VSVA==")
    workflow = sfn.StateMachine.from_state_machine_arn(stack, "Workflow", WORKFLOW)
    role = iam.Role(stack, "WorkflowRole", assumed_by=iam.ServicePrincipal("states.amazonaws.com"))
    names = []
    cleanup = WorkflowRunCleanup(
        stack,
        "Cleanup",
        workflow=workflow,
        role=role,
        cluster=cluster,
        jobs_path=JOBS,
        release_name=lambda name: names.append(name) or f"'train-' & $lowercase({name}) & '-release'",
        keep_on_error=["OwnJobFailed", "OwnReleaseFailed"],
        owner_annotation=OWNER,
    )
    template = assertions.Template.from_stack(stack)
    machine = only(template, "AWS::StepFunctions::StateMachine")
    definition = json.loads(cfn_text(machine["Properties"]["DefinitionString"]))
    return dict(
        stack=stack, role=role, cleanup=cleanup, template=template, machine=machine, definition=definition, names=names
    )


def test_the_release_name_path_and_owner_annotation_are_computed_from_the_event_and_the_release(built):
    assert built["names"] == ["$states.input.detail.name"], "release_name gets the execution's name, once"
    states = built["definition"]["States"]
    read = states["Read release of the run"]
    event = {"detail": {"name": "Run-42", "executionArn": RUN, "status": "FAILED"}}
    answer = {"ResponseBody": {"metadata": {"annotations": {OWNER: RUN, "other": "x"}}}}
    path, job_path, created_by, execution, unannotated = evaluate_all(
        (read["Arguments"]["Path"], {"states": {"input": event}}),
        (read["Assign"]["job_path"], {"states": {"input": event, "result": answer}}),
        (read["Assign"]["created_by"], {"states": {"input": event, "result": answer}}),
        (read["Assign"]["execution"], {"states": {"input": event, "result": answer}}),
        (read["Assign"]["created_by"], {"states": {"input": event, "result": {"ResponseBody": {"metadata": {}}}}}),
    )
    assert path == job_path == f"{JOBS}/train-run-42-release"
    assert (created_by, execution, unannotated) == (RUN, RUN, None), "a key with '.' and '/' is read whole"


def test_only_the_given_errors_keep_the_release_and_only_its_own_run_deletes_it(built):
    states = built["definition"]["States"]
    (keep,) = states["Ended with its logs to keep?"]["Choices"]
    (ours,) = states["Created by this run?"]["Choices"]
    by_error = [{"run_error": e} for e in ("OwnJobFailed", "OwnReleaseFailed", "TrainJobFailed")]
    own, release, other, no_error, same, different, none = evaluate_all(
        (keep["Condition"], by_error[0]),
        (keep["Condition"], by_error[1]),
        (keep["Condition"], by_error[2]),
        (keep["Condition"], {"states": {"input": {"detail": {"error": "OwnJobFailed"}}}}),
        (ours["Condition"], {"created_by": RUN, "execution": RUN}),
        (ours["Condition"], {"created_by": RUN.replace("Run-42", "Run42"), "execution": RUN}),
        (ours["Condition"], {"execution": RUN}),
    )
    assert (own, release, other, no_error) == (True, True, False, False)
    assert keep["Next"] == "Release kept for its logs" and states[keep["Next"]]["Type"] == "Succeed"
    assert (same, different, none) == (True, False, False)
    assert ours["Next"] == "Delete release of the run"
    assert states["Created by this run?"]["Default"] == "Release of another run kept"


def test_a_started_cleanup_deletes_only_for_an_execution_of_the_workflow_that_ended_badly(built):
    definition = built["definition"]
    states = definition["States"]
    assert definition["StartAt"] == "First look"
    assert states["First look"] == {"Type": "Pass", "Assign": {"looks": 0}, "Next": "Confirm the run ended badly"}
    confirm = states["Confirm the run ended badly"]
    assert confirm["Resource"] == "arn:aws:states:::aws-sdk:sfn:describeExecution"
    assert confirm["Catch"] == [{"ErrorEquals": ["States.ALL"], "Next": "Nothing deleted"}]
    (retry,) = confirm["Retry"]
    assert retry["ErrorEquals"] == ["States.ALL"] and retry["MaxAttempts"] == 3
    assert confirm["Next"] == "Ended badly?"
    event = {"detail": {"name": "Run-42", "executionArn": RUN, "status": "FAILED", "error": "OwnJobFailed"}}
    camel = {"status": "RUNNING", "stateMachineArn": WORKFLOW, "error": "TrainJobFailed"}
    pascal = {"Status": "ABORTED", "StateMachineArn": WORKFLOW}
    assign = confirm["Assign"]
    found = evaluate_all(
        (confirm["Arguments"]["ExecutionArn"], {"states": {"input": event}}),
        (confirm["Output"], {"states": {"input": event, "result": camel}}),
        *((assign[key], {"states": {"input": event, "result": camel}}) for key in ("run_status", "run_machine")),
        *((assign[key], {"states": {"input": event, "result": pascal}}) for key in ("run_status", "run_machine")),
        (assign["run_error"], {"states": {"input": event, "result": camel}}),
        (assign["run_error"], {"states": {"input": event, "result": pascal}}),
        (assign["looks"], {"looks": 2}),
    )
    assert found[:2] == [RUN, event], "the event goes on to the states that read it"
    assert found[2:6] == ["RUNNING", WORKFLOW, "ABORTED", WORKFLOW], "either spelling of the answer"
    assert found[6:] == ["TrainJobFailed", None, 3], "the error is Step Functions', not the input's"
    ended, running = states["Ended badly?"]["Choices"]
    other = WORKFLOW.replace("Workflow", "Other")
    verdicts = evaluate_all(
        *((ended["Condition"], {"run_status": status, "run_machine": WORKFLOW}) for status in ENDED_BADLY),
        (ended["Condition"], {"run_status": "RUNNING", "run_machine": WORKFLOW}),
        (ended["Condition"], {"run_status": "SUCCEEDED", "run_machine": WORKFLOW}),
        (ended["Condition"], {"run_status": "FAILED", "run_machine": other}),
    )
    assert verdicts == [True, True, True, False, False, False]
    assert ended["Next"] == "Ended with its logs to keep?"
    assert states["Ended with its logs to keep?"]["Default"] == "Read release of the run"
    assert states["Ended badly?"]["Default"] == "Run not ended badly"
    assert states["Run not ended badly"]["Type"] == "Succeed"


def test_a_status_that_still_reads_running_is_asked_again_a_bounded_number_of_times(built):
    states = built["definition"]["States"]
    _, running = states["Ended badly?"]["Choices"]
    other = WORKFLOW.replace("Workflow", "Other")
    again = evaluate_all(
        *((running["Condition"], {"run_status": "RUNNING", "run_machine": WORKFLOW, "looks": n}) for n in (1, 5, 6)),
        (running["Condition"], {"run_status": "RUNNING", "run_machine": other, "looks": 1}),
        (running["Condition"], {"run_status": "SUCCEEDED", "run_machine": WORKFLOW, "looks": 1}),
    )
    assert again == [True, True, False, False, False], f"{STATUS_LOOKS} looks, then the run counts as not ended"
    assert running["Next"] == "Wait for the run's status"
    wait = states["Wait for the run's status"]
    assert (wait["Type"], wait["Seconds"], wait["Next"]) == ("Wait", STATUS_WAIT_SECONDS, "Confirm the run ended badly")


def test_the_role_may_describe_the_workflows_executions(built):
    stack, template = built["stack"], built["template"]
    role_id = stack.get_logical_id(built["role"].node.default_child)
    policy_id = stack.get_logical_id(built["cleanup"].describe_policy.node.default_child)
    policy = template.to_json()["Resources"][policy_id]
    assert policy["Properties"]["Roles"] == [{"Ref": role_id}]
    (describe,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert describe["Action"] == "states:DescribeExecution"
    assert cfn_text(describe["Resource"]) == "arn:aws:states:us-west-2:123456789012:execution:Workflow:*"
    assert policy_id in built["machine"]["DependsOn"], "the cleanup starts once it may describe"


def test_every_call_goes_to_its_service_and_any_failure_ends_in_nothing_deleted(built):
    definition = built["definition"]
    tasks = {name: s for name, s in definition["States"].items() if s["Type"] == "Task"}
    assert set(tasks) == {"Confirm the run ended badly", "Read release of the run", "Delete release of the run"}
    del tasks["Confirm the run ended badly"]
    for task in tasks.values():
        assert task["Resource"] == EKS_CALL
        cluster = {key: task["Arguments"][key] for key in ("ClusterName", "CertificateAuthority", "Endpoint")}
        assert cluster == {"ClusterName": "existing", "CertificateAuthority": "Q0VSVA==", "Endpoint": ENDPOINT}
        assert task["Catch"] == [{"ErrorEquals": ["States.ALL"], "Next": "Nothing deleted"}]
    delete = tasks["Delete release of the run"]
    assert (delete["Arguments"]["Method"], delete["Arguments"]["Path"]) == ("DELETE", "{% $job_path %}")
    assert delete["Arguments"]["QueryParameters"] == {"propagationPolicy": ["Background"]}
    assert delete["Next"] == "Deleted"
    assert definition["States"]["Nothing deleted"] == {"Type": "Succeed", "Output": "{% $states.input %}"}


def test_the_workflows_bad_endings_start_the_express_machine_which_runs_as_the_given_role(built):
    stack, template, machine = built["stack"], built["template"], built["machine"]
    machine_id = stack.get_logical_id(built["cleanup"].state_machine.node.default_child)
    rule = only(template, "AWS::Events::Rule")["Properties"]
    assert ENDED_BADLY == ("FAILED", "TIMED_OUT", "ABORTED")
    assert rule["EventPattern"] == {
        "source": ["aws.states"],
        "detail-type": ["Step Functions Execution Status Change"],
        "detail": {"stateMachineArn": [WORKFLOW], "status": ["FAILED", "TIMED_OUT", "ABORTED"]},
    }
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Ref": machine_id}
    assert machine["Properties"]["StateMachineType"] == "EXPRESS"
    assert machine["Properties"]["RoleArn"] == {
        "Fn::GetAtt": [stack.get_logical_id(built["role"].node.default_child), "Arn"]
    }
    log_group_id = stack.get_logical_id(built["cleanup"].log_group.node.default_child)
    (destination,) = machine["Properties"]["LoggingConfiguration"]["Destinations"]
    assert destination["CloudWatchLogsLogGroup"]["LogGroupArn"] == {"Fn::GetAtt": [log_group_id, "Arn"]}
