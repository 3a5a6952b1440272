"""TrainingNetworkPolicyChart: default-deny for the training namespace, then the flows its jobs need."""

import pytest

from tests.support.charts import objects
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.access.training_network_policy import (
    EKS_KUBERNETES_SERVICE_IPS,
    NOT_INTERNET,
    TrainingNetworkPolicyChart,
)


def test_every_pod_of_the_namespace_is_isolated_both_ways():
    found = objects(TrainingNetworkPolicyChart(namespace="jobs"))
    baseline = found["NetworkPolicy", "namespace-baseline"]
    assert baseline["metadata"]["namespace"] == "jobs"
    assert baseline["spec"]["podSelector"] == {} and baseline["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert baseline["spec"]["ingress"] == [], "nothing admitted by the baseline"
    assert sorted(name for kind, name in found) == [
        "internet",
        "kubernetes-api",
        "namespace-baseline",
    ], "no policy admits the whole namespace: a gang's release creates its peers policy"


def test_the_api_and_the_internet_are_opened_to_labelled_pods_on_https_only():
    found = objects(TrainingNetworkPolicyChart())
    api = found["NetworkPolicy", "kubernetes-api"]["spec"]
    assert api["podSelector"] == {"matchLabels": {"trainium-eks/egress-kubernetes-api": "true"}}
    assert api["egress"] == [
        {
            "to": [{"ipBlock": {"cidr": f"{ip}/32"}} for ip in EKS_KUBERNETES_SERVICE_IPS],
            "ports": [{"protocol": "TCP", "port": 443}],
        }
    ]
    internet = found["NetworkPolicy", "internet"]["spec"]
    assert internet["podSelector"] == {"matchLabels": {"trainium-eks/egress-internet": "true"}}
    (rule,) = internet["egress"]
    assert rule["to"] == [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(NOT_INTERNET)}}]
    assert "169.254.0.0/16" in NOT_INTERNET and "10.0.0.0/8" in NOT_INTERNET


def test_a_cluster_with_its_own_service_cidr_names_its_api_address():
    found = objects(TrainingNetworkPolicyChart(kubernetes_api_addresses=["10.96.0.1"]))
    (rule,) = found["NetworkPolicy", "kubernetes-api"]["spec"]["egress"]
    assert rule["to"] == [{"ipBlock": {"cidr": "10.96.0.1/32"}}]


@pytest.mark.parametrize("addresses", [[], ["10.96.0.0/12"], ["10.96.0.1 "], ["fd00::1"], "10.96.0.1"])
def test_an_api_address_that_is_not_one_ipv4_address_is_refused(addresses):
    with pytest.raises(ConfigurationError, match="kubernetes_api_addresses"):
        TrainingNetworkPolicyChart(kubernetes_api_addresses=addresses)
