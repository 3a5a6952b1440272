"""workflow_definition's JSONata: a run's job name (job_name_expression) and a request's problems (request_problems)."""

import hashlib
from typing import Any, Dict

import pytest

from tests.support.jsonata import evaluate
from trainium_eks.constructs.private.workflow_definition import (
    JOB_SUFFIX_LENGTH,
    MAX_HYPERPARAMETERS,
    job_name_expression,
    request_problems,
)
from trainium_eks.core.validation import DNS1123_LABEL

KUBERNETES = request_problems(max_nodes=4, instance_types=(), kubernetes_instance_type="trn1.32xlarge")
SAGEMAKER = request_problems(
    max_nodes=None, instance_types=["ml.g5.xlarge", "ml.p4d.24xlarge"], kubernetes_instance_type=None
)


def request(hyperparameters: Any = None, node_count: Any = None, instance_type: Any = None) -> Dict[str, Any]:
    """The variables the workflow's request checks read (absent fields are null, hyperparameters ``{}``)."""
    return {
        "hyperparameters": {} if hyperparameters is None else hyperparameters,
        "node_count": node_count,
        "instance_type": instance_type,
    }


def test_the_job_name_reads_the_executions_name_or_the_one_given():
    default = job_name_expression("cifar10-ddp")
    assert default.startswith("'cifar10-ddp-' & $substring(") and default.endswith(f", 0, {JOB_SUFFIX_LENGTH})")
    assert "$hash($states.context.Execution.Name, 'SHA-256')" in default
    given = job_name_expression("cifar10-ddp", "$detail.name")
    assert "$hash($detail.name, 'SHA-256')" in given and "$states" not in given


@pytest.mark.parametrize(
    "execution",
    ["Nightly_Run-2026-12-01T10-00", "MiXeD-Case-0123456789AB", "ABC", "Übung-é", "äöü-_", "3f2b8c1e-5d4a-4b7e"],
)
def test_a_job_name_is_the_base_and_ten_hex_digits_of_the_whole_execution_names_sha256(execution):
    context = {"states": {"context": {"Execution": {"Name": execution}}}}
    by_context, by_event = evaluate(
        [
            (job_name_expression("cifar10-ddp"), context),
            (job_name_expression("cifar10-ddp", "$detail.name"), {"detail": {"name": execution}}),
        ]
    )
    digest = hashlib.sha256(execution.encode()).hexdigest()[:JOB_SUFFIX_LENGTH]
    assert by_context == by_event == f"cifar10-ddp-{digest}"
    assert DNS1123_LABEL.match(by_context), "a Kubernetes name and a SageMaker training job name"


def test_executions_whose_names_share_their_ends_or_letters_name_different_jobs():
    """The names the old suffix (the last ten letters and digits) gave one job: each run now has its own job, so no
    run resumes another run's checkpoint or is refused by SageMaker as a duplicate."""
    names = ["my-experiment", "other-experiment", "exp-1-lr0001", "exp1lr0001", "EXP1LR0001", "run.2026_12_01"]
    jobs = evaluate(
        [(job_name_expression("cifar10-ddp"), {"states": {"context": {"Execution": {"Name": n}}}}) for n in names]
    )
    assert len(set(jobs)) == len(names), dict(zip(names, jobs, strict=True))


def test_the_problems_are_one_jsonata_array_of_the_branchs_own_checks():
    assert KUBERNETES.startswith("[") and KUBERNETES.endswith("]")
    assert "at most 4; got" in KUBERNETES and "node group of trn1.32xlarge'" in KUBERNETES
    assert "$instance_type in [" not in KUBERNETES, "the Kubernetes branch takes no instance type at all"
    assert "at most" not in SAGEMAKER.replace(f"at most {MAX_HYPERPARAMETERS} hyperparameters", "")
    assert "$instance_type in ['ml.g5.xlarge', 'ml.p4d.24xlarge']" in SAGEMAKER


def test_a_valid_request_has_no_problems_on_either_branch():
    assert evaluate(
        [
            (KUBERNETES, request()),
            (KUBERNETES, request({"epochs": "3"}, node_count=4)),
            (SAGEMAKER, request({f"k{i}": "v" for i in range(MAX_HYPERPARAMETERS)}, 9, "ml.p4d.24xlarge")),
        ]
    ) == [[], [], []]


NODES_4 = "node_count must be an integer of at least 1 and at most 4; got "


@pytest.mark.parametrize(
    "expression,variables,problems",
    [
        (KUBERNETES, request(node_count=1.5), [NODES_4 + "1.5"]),
        (KUBERNETES, request(node_count=True), [NODES_4 + "true"]),
        (KUBERNETES, request(node_count=5), [NODES_4 + "5"]),
        (SAGEMAKER, request(node_count=0), ["node_count must be an integer of at least 1; got 0"]),
        (SAGEMAKER, request({f"k{i}": "v" for i in range(MAX_HYPERPARAMETERS + 1)}), ["at most 100 hyperparameters"]),
        (SAGEMAKER, request([]), ["hyperparameters must be an object of string values"]),
        (
            SAGEMAKER,
            request({"a": 1, "b": {"c": "d"}, "e": "f"}),
            ["hyperparameters must be strings (as SageMaker requires): a, b"],
        ),
        (
            SAGEMAKER,
            request(instance_type="ml.m5.large"),
            ["instance_type must be one of ml.g5.xlarge, ml.p4d.24xlarge; got ml.m5.large"],
        ),
        (
            KUBERNETES,
            request("epochs=3", node_count=0, instance_type="ml.g5.xlarge"),
            [
                "hyperparameters must be an object of string values",
                NODES_4 + "0",
                "instance_type is a SageMaker setting; the Kubernetes job runs on the node group of trn1.32xlarge",
            ],
        ),
    ],
    ids=[
        "fraction",
        "boolean",
        "above-the-group",
        "zero",
        "too-many-hyperparameters",
        "array",
        "non-strings",
        "unlisted-type",
        "all-at-once",
    ],
)
def test_each_bad_field_is_a_sentence_naming_it_and_what_was_given(expression, variables, problems):
    (found,) = evaluate([(expression, variables)])
    assert found == problems
