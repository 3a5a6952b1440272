"""job_deadline: the bounds every job chart checks, a Volcano job's attempts, and the CRD facts the module states."""

import json

import pytest

from tests.support.apps import SHARED
from trainium_eks.core.validation import Problems
from trainium_eks.manifests.jobs import job_deadline
from trainium_eks.manifests.jobs.job_release import MAX_TIMEOUT_SECONDS

SCHEMAS = SHARED / "k8s-schemas" / "schemas"


def schema(path):
    file = SCHEMAS / path
    if not file.exists():
        pytest.skip(f"skipped: {file} is absent (the Kubernetes schemas live in ../shared)")
    return json.loads(file.read_text())


def test_the_bounds_and_the_default_of_a_deadline():
    assert job_deadline.DEFAULT_DEADLINE_SECONDS == 24 * 3600, "the hybrid workflow's default max_runtime"
    assert (job_deadline.MIN_DEADLINE_SECONDS, job_deadline.MAX_DEADLINE_SECONDS) == (60, MAX_TIMEOUT_SECONDS)
    assert job_deadline.MAX_DEADLINE_SECONDS < 2**31 - 1, "a pod's activeDeadlineSeconds is an int32"
    problems = Problems("job")
    for good in (60, 3600, 90 * 24 * 3600):
        assert job_deadline.check_deadline(problems, "deadline_seconds", good)
    assert not problems
    for bad in (59, 90 * 24 * 3600 + 1, 1.5, True, None, "1h"):
        assert not job_deadline.check_deadline(problems, "deadline_seconds", bad)
    assert len(list(problems)) == 6


@pytest.mark.parametrize("max_retry,attempts", [(0, 1), (1, 1), (2, 2), (3, 3)])
def test_a_volcano_job_runs_max_retry_attempts_and_at_least_one(max_retry, attempts):
    assert job_deadline.volcano_attempts(max_retry) == attempts
    assert job_deadline.volcano_bound_seconds(3600, max_retry) == attempts * 3600


def test_a_volcano_job_has_no_deadline_of_its_own_so_its_pods_carry_it():
    spec = schema("batch.volcano.sh/job_v1alpha1.json")["properties"]["spec"]["properties"]
    assert not [name for name in spec if "deadline" in name.lower()], "Volcano v1.15.1's JobSpec"
    assert spec["maxRetry"]["default"] == 3


def test_the_trainjobs_deadline_is_immutable_and_positive():
    field = schema("trainer.kubeflow.org/trainjob_v1alpha1.json")["properties"]["spec"]["properties"][
        "activeDeadlineSeconds"
    ]
    assert field["type"] == "integer" and field["minimum"] == 1
    assert {"rule": "self == oldSelf", "message": "field is immutable"} in field["x-kubernetes-validations"]


def test_the_pytorchjobs_run_policy_has_a_deadline_and_a_clean_pod_policy():
    run_policy = schema("kubeflow.org/pytorchjob_v1.json")["properties"]["spec"]["properties"]["runPolicy"]
    assert run_policy["properties"]["activeDeadlineSeconds"]["type"] == "integer"
    assert run_policy["properties"]["cleanPodPolicy"]["type"] == "string"
