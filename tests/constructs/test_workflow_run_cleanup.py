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
from trainium_eks.constructs.workflow_run_cleanup import EKS_CALL, ENDED_BADLY, WorkflowRunCleanup
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
    by_error = [
        {"states": {"input": {"detail": {"error": e}}}} for e in ("OwnJobFailed", "OwnReleaseFailed", "TrainJobFailed")
    ]
    own, release, other, no_error, same, different, none = evaluate_all(
        (keep["Condition"], by_error[0]),
        (keep["Condition"], by_error[1]),
        (keep["Condition"], by_error[2]),
        (keep["Condition"], {"states": {"input": {"detail": {}}}}),
        (ours["Condition"], {"created_by": RUN, "execution": RUN}),
        (ours["Condition"], {"created_by": RUN.replace("Run-42", "Run42"), "execution": RUN}),
        (ours["Condition"], {"execution": RUN}),
    )
    assert (own, release, other, no_error) == (True, True, False, False)
    assert keep["Next"] == "Release kept for its logs" and states[keep["Next"]]["Type"] == "Succeed"
    assert (same, different, none) == (True, False, False)
    assert ours["Next"] == "Delete release of the run"
    assert states["Created by this run?"]["Default"] == "Release of another run kept"


def test_both_calls_go_to_the_clusters_endpoint_and_any_failure_ends_in_nothing_deleted(built):
    definition = built["definition"]
    assert definition["StartAt"] == "Ended with its logs to keep?"
    assert definition["States"]["Ended with its logs to keep?"]["Default"] == "Read release of the run"
    tasks = {name: s for name, s in definition["States"].items() if s["Type"] == "Task"}
    assert set(tasks) == {"Read release of the run", "Delete release of the run"}
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
