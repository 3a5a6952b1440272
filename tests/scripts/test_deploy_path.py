"""scripts/deploy_path.py: the longest weighted chain of a template's dependency graph."""

import importlib.util

import pytest

from tests.support.apps import REPO

SPEC = importlib.util.spec_from_file_location("deploy_path", REPO / "scripts" / "deploy_path.py")
deploy_path = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(deploy_path)


def resource(kind, **extra):
    return {"Type": kind, **extra}


def test_the_longest_chain_follows_depends_on_ref_getatt_and_sub():
    template = {
        "Resources": {
            "Key": resource("AWS::KMS::Key"),
            "Cluster": resource("AWS::EKS::Cluster", Properties={"Key": {"Fn::GetAtt": ["Key", "Arn"]}}),
            "Nodes": resource("AWS::EKS::Nodegroup", Properties={"ClusterName": {"Ref": "Cluster"}}),
            "Chart": resource("Custom::AWSCDK-EKS-HelmChart", DependsOn="Nodes"),
            "Job": resource("Custom::AWSCDK-EKS-KubernetesResource", Properties={"X": {"Fn::Sub": "${Chart.Name}"}}),
            "Apart": resource("AWS::S3::Bucket"),
        }
    }
    total, chain, serial = deploy_path.critical_path(template)
    assert [logical_id for logical_id, _, _ in chain] == ["Key", "Cluster", "Nodes", "Chart", "Job"]
    assert total == pytest.approx(0.5 + 10 + 5 + 3 + 1)
    assert serial == pytest.approx(total + 0.2), "an unlisted type weighs 0.2"


def test_a_cycle_is_an_error():
    template = {
        "Resources": {"A": resource("AWS::IAM::Role", DependsOn="B"), "B": resource("AWS::IAM::Role", DependsOn="A")}
    }
    with pytest.raises(ValueError, match="cycle"):
        deploy_path.critical_path(template)


def test_a_cluster_its_nodes_and_one_release_on_them_already_take_the_issues_18_minutes():
    """Why the 18-minute target cannot be met by a stack that installs a scheduler on nodes it creates
    (docs/deploy-behaviour.md): under the model's weights, a cluster, a node group and one Helm release that waits for
    those nodes make 18."""
    template = {
        "Resources": {
            "Cluster": resource("AWS::EKS::Cluster"),
            "Nodes": resource("AWS::EKS::Nodegroup", Properties={"ClusterName": {"Ref": "Cluster"}}),
            "Scheduler": resource("Custom::AWSCDK-EKS-HelmChart", DependsOn="Nodes"),
        }
    }
    total, _, _ = deploy_path.critical_path(template)
    assert total >= 18.0
