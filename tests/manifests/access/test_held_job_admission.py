"""HeldJobAdmissionChart: the API server lets only a namespace's releases create its held jobs (the policy itself is
run by the real API server in tests/e2e/test_held_job_admission.py)."""

import pytest

from tests.support.charts import objects
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.access.held_job_admission import HeldJobAdmissionChart
from trainium_eks.manifests.jobs.job_release import RELEASE_ANNOTATION
from trainium_eks.manifests.jobs.job_release_program import API


def test_the_policy_matches_the_creation_of_each_kind_a_release_creates_when_it_carries_the_annotation():
    found = objects(HeldJobAdmissionChart(namespace="training"))
    policy = found["ValidatingAdmissionPolicy", "trainium-eks-held-jobs-training"]
    assert "namespace" not in policy["metadata"]
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert {(r["apiGroups"][0] + "/" + r["apiVersions"][0], r["resources"][0]) for r in rules} == {
        (api_version, path.rsplit("/", 1)[1]) for api_version, _, path in API.values()
    }
    assert {op for r in rules for op in r["operations"]} == {"CREATE"}
    (condition,) = policy["spec"]["matchConditions"]
    assert f"'{RELEASE_ANNOTATION}' in object.metadata.annotations" in condition["expression"]
    (validation,) = policy["spec"]["validations"]
    assert validation["expression"] == "request.userInfo.username == 'system:serviceaccount:training:job-release'"
    assert policy["spec"]["failurePolicy"] == "Fail"
    binding = found["ValidatingAdmissionPolicyBinding", "trainium-eks-held-jobs-training"]
    assert binding["spec"] == {
        "policyName": "trainium-eks-held-jobs-training",
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "training"}}},
    }


def test_a_namespace_that_is_no_label_is_refused():
    with pytest.raises(ConfigurationError, match="namespace='Training'"):
        HeldJobAdmissionChart(namespace="Training")
