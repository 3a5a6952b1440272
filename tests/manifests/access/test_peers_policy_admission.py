"""PeersPolicyAdmissionChart: the release account of a namespace may create no NetworkPolicy but a held job's peers
policy. Here the chart's shape; its CEL expressions run only in the real API server
(tests/e2e/test_peers_policy_admission.py, which tries eight wider policies)."""

import pytest

from tests.support.charts import objects
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.access.peers_policy_admission import PEERS_SHAPE, PeersPolicyAdmissionChart


def test_the_policy_looks_at_the_release_accounts_network_policies_only_and_denies_any_other_shape():
    found = objects(PeersPolicyAdmissionChart(namespace="training"))
    name = "trainium-eks-release-network-policies-training"
    policy = found["ValidatingAdmissionPolicy", name]
    assert "namespace" not in policy["metadata"] and policy["spec"]["failurePolicy"] == "Fail"
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert (rule["apiGroups"], rule["resources"], rule["operations"]) == (
        ["networking.k8s.io"],
        ["networkpolicies"],
        ["CREATE", "UPDATE"],
    )
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["expression"] == "request.userInfo.username == 'system:serviceaccount:training:job-release'"
    assert [v["expression"] for v in policy["spec"]["validations"]] == [expression for expression, _ in PEERS_SHAPE]
    binding = found["ValidatingAdmissionPolicyBinding", name]
    assert binding["spec"] == {
        "policyName": name,
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "training"}}},
    }


def test_a_namespace_that_is_no_label_is_refused():
    with pytest.raises(ConfigurationError, match="namespace='Training'"):
        PeersPolicyAdmissionChart(namespace="Training")
