"""AppliedChart: any cdk8s chart, the library's or a user's, reaches the cluster one resource per object."""

import json

import aws_cdk as cdk
import cdk8s
import pytest
from aws_cdk import assertions

from tests.support.clusters import ENV, imported_cluster
from tests.support.manifests import MANIFEST, applied_list
from trainium_eks.constructs.applied_chart import AppliedChart, apply_tier, object_identity
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.addons.volcano_queue import VolcanoQueueChart


def applied(chart):
    stack = cdk.Stack(cdk.App(), "S", env=ENV)
    _, cluster = imported_cluster(stack)
    AppliedChart(stack, "Applied", cluster=cluster, chart=chart)
    resources = assertions.Template.from_stack(stack).find_resources(MANIFEST)
    return {key: (applied_list(resource), resource) for key, resource in resources.items()}


def test_a_users_cdk8s_chart_is_applied_object_by_object_in_tiers():
    chart = cdk8s.Chart(cdk8s.App(), "Mine")
    cdk8s.ApiObject(chart, "Ns", api_version="v1", kind="Namespace", metadata={"name": "mine"})
    cdk8s.ApiObject(chart, "Config", api_version="v1", kind="ConfigMap", metadata={"name": "c", "namespace": "mine"})
    cdk8s.ApiObject(chart, "Run", api_version="batch/v1", kind="Job", metadata={"name": "r", "namespace": "mine"})
    found = applied(chart)
    by_kind = {objects[0]["kind"]: (key, resource) for key, (objects, resource) in found.items()}
    assert set(by_kind) == {"Namespace", "ConfigMap", "Job"}
    assert [len(objects) for objects, _ in found.values()] == [1, 1, 1]
    namespace_id, _ = by_kind["Namespace"]
    config_id, config = by_kind["ConfigMap"]
    _, job = by_kind["Job"]
    assert config["DependsOn"] == [namespace_id]
    assert sorted(job["DependsOn"]) == sorted([namespace_id, config_id])
    assert by_kind["Namespace"][1]["DeletionPolicy"] == "Retain"


def test_a_library_chart_is_a_cdk8s_chart_and_applies_what_cdk8s_renders():
    chart = VolcanoQueueChart()
    assert isinstance(chart, cdk8s.Chart)
    cdk8s.ApiObject(chart, "Extra", api_version="v1", kind="ConfigMap", metadata={"name": "extra", "namespace": "t"})
    kinds = sorted(objects[0]["kind"] for objects, _ in applied(chart).values())
    assert kinds == ["ConfigMap", "Queue"]
    assert json.dumps(chart.manifests()) == json.dumps(chart.to_json())


def test_what_is_not_a_cdk8s_chart_is_refused():
    stack = cdk.Stack(cdk.App(), "S", env=ENV)
    _, cluster = imported_cluster(stack)
    with pytest.raises(ConfigurationError, match="chart=.*a cdk8s.Chart"):
        AppliedChart(stack, "Applied", cluster=cluster, chart=[{"kind": "ConfigMap"}])


def test_identity_and_tiers():
    assert object_identity({"kind": "Job", "metadata": {"name": "a", "namespace": "n"}}) == "Job.n.a"
    # A cluster-scoped object's namespace is "_", made id-safe.
    assert object_identity({"kind": "Namespace", "metadata": {"name": "n"}}) == "Namespace.-.n"
    assert [apply_tier(kind) for kind in ("Namespace", "ConfigMap", "TrainJob")] == [0, 1, 2]
    with pytest.raises(ValueError, match="literal metadata.name"):
        object_identity({"kind": "Job", "metadata": {"name": cdk.Token.as_string(cdk.Aws.ACCOUNT_ID)}})
