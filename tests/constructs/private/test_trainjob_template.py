"""trainjob_template and check_train_job: the TrainJob a hybrid workflow run creates, and what it requires."""

import json

import pytest

from tests.support.kubeflow_jobs import CPU, P4D, TRN1
from trainium_eks.constructs.private.jsonata import jsonata, quoted
from trainium_eks.constructs.private.trainjob_template import (
    EXECUTION_ANNOTATION,
    HYPERPARAMETERS_ENV,
    JOB_NAME_ENV,
    RUN_ID_ENV,
    check_train_job,
    trainjob_template,
)
from trainium_eks.core.validation import Problems
from trainium_eks.manifests.jobs.job_naming import JOB_NAME
from trainium_eks.manifests.jobs.train_job import TrainJobChart


def chart(**overrides):
    props = dict(
        name="hybrid-run",
        image="example.com/run:1",
        node_group=CPU,
        script="/opt/run/launch.py",
        launcher="direct",
        args=["--", "--output-dir", "/data/output/${TRAINING_JOB_NAME}"],
        env={"LOG_LEVEL": "INFO", "EMPTY": ""},
    )
    props.update(overrides)
    return TrainJobChart(**props)


def problems_of(train_job, namespace="training"):
    problems = Problems("workflow")
    check_train_job(problems, train_job, namespace)
    return list(problems)


def test_the_run_names_sizes_and_claims_the_trainjob_and_its_deadline_ends_it():
    train_job = chart()
    before = train_job.manifests()
    manifest = trainjob_template(train_job, 7200)
    metadata = manifest["metadata"]
    assert metadata["name"] == "{% $job_name %}"
    assert metadata["labels"]["app.kubernetes.io/instance"] == "{% $job_name %}"
    assert metadata["labels"]["app.kubernetes.io/name"] == "hybrid-run"
    assert metadata["annotations"] == {EXECUTION_ANNOTATION: "{% $states.context.Execution.Id %}"}
    trainer = manifest["spec"]["trainer"]
    assert trainer["numNodes"] == "{% $node_count %}" and trainer["numProcPerNode"] == 1
    assert trainer["env"] == [
        {"name": "LOG_LEVEL", "value": "INFO"},
        {"name": "EMPTY", "value": "{% '' %}"},
        {"name": HYPERPARAMETERS_ENV, "value": "{% $string($hyperparameters) %}"},
        {"name": JOB_NAME_ENV, "value": "{% $job_name %}"},
        {"name": RUN_ID_ENV, "value": "{% $states.context.Execution.Id %}"},
    ], "the chart's own env first, then what the workflow sets for each run"
    assert manifest["spec"]["activeDeadlineSeconds"] == 7200
    assert train_job.job_name not in json.dumps(manifest), "the template's hashed name is no run's name"
    assert train_job.manifests() == before, "the chart itself is left as it was"


def test_strings_a_state_cannot_hold_as_they_are_become_literals_of_the_same_text():
    """On Neuron nodes the launch script has two lines; the ``${TRAINING_JOB_NAME}`` of the arguments would be a
    CloudFormation substitution: both reach the state machine as JSONata string literals of the same text."""
    train_job = chart(node_group=TRN1)
    (original,) = train_job.manifests()
    script = original["spec"]["trainer"]["command"][2]
    assert "\n" in script and "${TRAINING_JOB_NAME}" in script
    command = trainjob_template(train_job, 60)["spec"]["trainer"]["command"]
    assert command[:2] == ["bash", "-c"]
    assert command[2] == jsonata(quoted(script))
    body = command[2].removeprefix("{% '").removesuffix("' %}")
    assert json.loads('"' + body.replace('"', '\\"') + '"') == script, "JSON's escapes, in a single-quoted literal"


def test_a_direct_launcher_trainjob_in_the_workflows_namespace_is_accepted():
    assert problems_of(chart()) == []
    assert problems_of(chart(namespace="jobs"), namespace="jobs") == []


@pytest.mark.parametrize(
    "overrides,expected",
    [
        (
            {"launcher": "torchrun", "args": []},
            "train_job='hybrid-run': a TrainJob started by the image's own launcher (launcher='direct'), which reads "
            "TRAINING_HYPERPARAMETERS and the node count of the run; torchrun would ignore them",
        ),
        (
            {"launcher": "composer", "node_group": P4D, "args": []},
            "train_job='hybrid-run': a TrainJob started by the image's own launcher (launcher='direct'), which reads "
            "TRAINING_HYPERPARAMETERS and the node count of the run; composer would ignore them",
        ),
        (
            {"env": {JOB_NAME_ENV: "fixed"}},
            "train_job='hybrid-run': a TrainJob without the env TRAINING_JOB_NAME (the workflow sets it for each run)",
        ),
        (
            {"env": {RUN_ID_ENV: "fixed"}},
            "train_job='hybrid-run': a TrainJob without the env TRAINING_RUN_ID (the workflow sets it for each run)",
        ),
        (
            {"namespace": "jobs"},
            "train_job='hybrid-run': a TrainJob in the namespace 'training' (where the workflow may create "
            "TrainJobs), not 'jobs'",
        ),
    ],
)
def test_a_trainjob_the_workflow_cannot_drive_is_refused_saying_why(overrides, expected):
    assert problems_of(chart(**overrides)) == [expected]


def test_every_problem_of_the_train_job_is_reported_together():
    train_job = chart(launcher="torchrun", args=[], env={HYPERPARAMETERS_ENV: "{}", JOB_NAME_ENV: "x"}, namespace="ml")
    found = [problem.split(": ", 1)[1] for problem in problems_of(train_job)]
    assert len(found) == 4, found
    assert found[0].endswith("torchrun would ignore them")
    assert found[1:3] == [
        f"a TrainJob without the env {variable} (the workflow sets it for each run)"
        for variable in (HYPERPARAMETERS_ENV, JOB_NAME_ENV)
    ]
    assert found[3].startswith("a TrainJob in the namespace 'training'") and found[3].endswith("not 'ml'")


def test_a_train_job_whose_spec_holds_its_own_job_name_is_refused_for_every_run_would_share_it():
    shared = chart(args=["--", "--output-dir", f"/data/output/{JOB_NAME}"])
    problems = Problems("workflow")
    check_train_job(problems, shared, shared.namespace_name)
    (problem,) = problems
    assert "without JOB_NAME in its args or env" in problem and shared.job_name in problem
