"""The rehearsal engine on small hand-written templates: CloudFormation's actions and order, intrinsic functions,
and the events the real aws-eks-v2 handler from aws-cdk-lib gets (the end-to-end tests run that handler against the
real API server with the layer's kubectl and Helm)."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

from rehearsal.cfn_changes import Action, Deployment, create_only_paths, plan
from rehearsal.handler import (
    FRAMEWORK_IN_TARBALL,
    HandlerWorkspace,
    aws_cdk_lib_tarball,
    custom_resource_event,
    framework_physical_id,
)
from rehearsal.intrinsics import (
    PhysicalResource,
    Resolver,
    StackIdentity,
    as_strings,
    new_physical_id,
    references,
)
from rehearsal.promises import DEPLOY_PROMISES
from rehearsal.scenario import Rehearsal, Scenario, Variant

IDENTITY = StackIdentity("Rehearsal", "us-west-2")
KUBERNETES = "Custom::AWSCDK-EKS-KubernetesResource"
HELM = "Custom::AWSCDK-EKS-HelmChart"


def template(**resources: Dict[str, Any]) -> Dict[str, Any]:
    """A template of ``resources``."""
    return {"Resources": resources}


def deploy(tmpl: Dict[str, Any]) -> Deployment:
    """``tmpl`` deployed on an empty account."""
    return plan(Deployment.empty(), tmpl, IDENTITY).result


def actions(old: Dict[str, Any], new: Optional[Dict[str, Any]]) -> Dict[str, Action]:
    """Logical id -> action from ``old`` (deployed) to ``new``."""
    return {change.logical_id: change.action for change in plan(deploy(old), new, IDENTITY).changes}


def steps(old: Dict[str, Any], new: Optional[Dict[str, Any]]) -> List[str]:
    """``phase:operation:logical id`` of every step from ``old`` (deployed) to ``new``."""
    return [f"{s.phase}:{s.operation}:{s.logical_id}" for s in plan(deploy(old), new, IDENTITY).steps]


VPC = {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}
SUBNET = {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.0.0.0/24"}}


# --- CloudFormation actions --------------------------------------------------------------------------------------


def test_the_schemas_give_nested_create_only_paths():
    assert ("SubnetIds",) in create_only_paths("AWS::FSx::FileSystem")
    assert ("KubernetesNetworkConfig", "IpFamily") in create_only_paths("AWS::EKS::Cluster")
    assert ("Version",) not in create_only_paths("AWS::EKS::Cluster")


def test_new_removed_and_retained_resources():
    old = template(Vpc=VPC, Gone=dict(VPC), Kept=dict(VPC, DeletionPolicy="Retain"))
    old["Resources"]["Snap"] = {"Type": "AWS::EC2::Volume", "DeletionPolicy": "Snapshot", "Properties": {"Size": 1}}
    old["Resources"]["Rec"] = dict(VPC, DeletionPolicy="RetainExceptOnCreate")
    found = actions(old, template(Vpc=VPC, Subnet=SUBNET))
    assert found == {
        "Subnet": Action.CREATE,
        "Gone": Action.DELETE,
        "Kept": Action.RETAIN,
        "Snap": Action.SNAPSHOT,
        "Rec": Action.RETAIN,
    }


def test_create_only_change_replaces_and_other_changes_update():
    tagged = dict(SUBNET, Properties=dict(SUBNET["Properties"], Tags=[{"Key": "a", "Value": "b"}]))
    moved = dict(SUBNET, Properties=dict(SUBNET["Properties"], CidrBlock="10.0.1.0/24"))
    assert actions(template(Vpc=VPC, Subnet=SUBNET), template(Vpc=VPC, Subnet=tagged))["Subnet"] is Action.UPDATE
    assert actions(template(Vpc=VPC, Subnet=SUBNET), template(Vpc=VPC, Subnet=moved))["Subnet"] is Action.REPLACE
    assert actions(template(Vpc=VPC, Subnet=SUBNET), template(Vpc=VPC, Subnet=SUBNET)) == {}


def test_a_nested_create_only_property_replaces_only_itself():
    cluster = {
        "Type": "AWS::EKS::Cluster",
        "Properties": {"RoleArn": "arn:aws:iam::1:role/r", "KubernetesNetworkConfig": {"IpFamily": "ipv4"}},
    }
    ipv6 = json.loads(json.dumps(cluster))
    ipv6["Properties"]["KubernetesNetworkConfig"]["IpFamily"] = "ipv6"
    elb = json.loads(json.dumps(cluster))
    elb["Properties"]["KubernetesNetworkConfig"]["ElasticLoadBalancing"] = {"Enabled": False}
    assert actions(template(C=cluster), template(C=ipv6))["C"] is Action.REPLACE
    assert actions(template(C=cluster), template(C=elb))["C"] is Action.UPDATE


def test_a_reference_to_a_replaced_resource_in_a_create_only_property_replaces():
    bigger = dict(VPC, Properties={"CidrBlock": "10.1.0.0/16"})
    found = actions(template(Vpc=VPC, Subnet=SUBNET), template(Vpc=bigger, Subnet=SUBNET))
    assert found == {"Vpc": Action.REPLACE, "Subnet": Action.REPLACE}


def test_an_updated_launch_template_updates_what_reads_its_version():
    launch_template = {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateData": {"InstanceType": "a"}}}
    reader = {
        "Type": "AWS::SSM::Parameter",
        "Properties": {"Type": "String", "Value": {"Fn::GetAtt": ["Lt", "LatestVersionNumber"]}},
    }
    changed = {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateData": {"InstanceType": "b"}}}
    assert actions(template(Lt=launch_template, P=reader), template(Lt=changed, P=reader)) == {
        "Lt": Action.UPDATE,
        "P": Action.UPDATE,
    }


def test_custom_resources_update_and_refuse_a_new_service_token():
    resource = {"Type": KUBERNETES, "Properties": {"ServiceToken": "arn:a", "Manifest": "[1]"}}
    changed = {"Type": KUBERNETES, "Properties": {"ServiceToken": "arn:a", "Manifest": "[2]"}}
    moved = {"Type": KUBERNETES, "Properties": {"ServiceToken": "arn:b", "Manifest": "[1]"}}
    result = plan(deploy(template(M=resource)), template(M=changed), IDENTITY)
    assert [(c.logical_id, c.action) for c in result.changes] == [("M", Action.UPDATE)]
    step = result.steps[0]
    assert (step.operation, step.old_properties["Manifest"], step.properties["Manifest"]) == ("Update", "[1]", "[2]")
    assert step.physical_id == deploy(template(M=resource)).resources["M"].physical_id
    assert plan(deploy(template(M=resource)), template(M=moved), IDENTITY).errors
    retyped = {"Type": "Custom::Other", "Properties": resource["Properties"]}
    assert actions(template(M=resource), template(M=retyped))["M"] is Action.REPLACE


def test_order_creates_in_dependency_order_then_cleans_up_in_reverse():
    old = template(Vpc=VPC, Subnet=SUBNET)
    bigger = dict(VPC, Properties={"CidrBlock": "10.1.0.0/16"})
    table = {"Type": "AWS::EC2::RouteTable", "Properties": {"VpcId": {"Ref": "Vpc"}}}
    assert steps(old, template(Subnet=SUBNET, Vpc=bigger, Table=table)) == [
        "update:Create:Vpc",
        "update:Create:Subnet",
        "update:Create:Table",
        "cleanup:Delete:Subnet",
        "cleanup:Delete:Vpc",
    ]
    assert steps(old, None) == ["cleanup:Delete:Subnet", "cleanup:Delete:Vpc"]


def test_replacement_policies_and_delete_then_create():
    kept = dict(SUBNET, UpdateReplacePolicy="Retain")
    moved = dict(kept, Properties=dict(SUBNET["Properties"], CidrBlock="10.0.1.0/24"))
    assert steps(template(Vpc=VPC, Subnet=kept), template(Vpc=VPC, Subnet=moved)) == [
        "update:Create:Subnet",
        "cleanup:Retain:Subnet",
    ]
    association = {
        "Type": "AWS::EC2::SubnetRouteTableAssociation",
        "Properties": {"SubnetId": "subnet-1", "RouteTableId": "rtb-1"},
    }
    other = dict(association, Properties={"SubnetId": "subnet-2", "RouteTableId": "rtb-1"})
    assert steps(template(A=association), template(A=other)) == ["update:Delete:A", "update:Create:A"]


def test_conditions_decide_which_resources_exist():
    tmpl = template(Vpc=dict(VPC, Condition="IsAws"))
    tmpl["Conditions"] = {"IsAws": {"Fn::Equals": [{"Ref": "AWS::Partition"}, "aws-cn"]}}
    assert plan(Deployment.empty(), tmpl, IDENTITY).steps == []


# --- intrinsic functions -----------------------------------------------------------------------------------------


def test_intrinsics_resolve_to_what_cloudformation_passes():
    tmpl = {
        "Mappings": {"Accounts": {"us-west-2": {"account": "602401143452"}}},
        "Conditions": {"IsAws": {"Fn::Equals": [{"Ref": "AWS::Partition"}, "aws"]}},
        "Resources": {"Repo": {"Type": "AWS::ECR::Repository"}, "Fn": {"Type": "AWS::Lambda::Function"}},
    }
    repo = PhysicalResource("Repo", "AWS::ECR::Repository", "my-repo")
    resolver = Resolver(tmpl, {"Repo": repo}, IDENTITY)
    uri = {
        "Fn::Join": [
            "",
            [
                {"Fn::Select": [4, {"Fn::Split": [":", {"Fn::GetAtt": ["Repo", "Arn"]}]}]},
                ".dkr.ecr.",
                {"Fn::Select": [3, {"Fn::Split": [":", {"Fn::GetAtt": ["Repo", "Arn"]}]}]},
                ".",
                {"Ref": "AWS::URLSuffix"},
                "/",
                {"Ref": "Repo"},
            ],
        ]
    }
    assert resolver.resolve(uri) == "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-repo"
    assert resolver.resolve({"Fn::Sub": "${Repo}/${Repo.Arn}/${!Literal}/${AWS::Region}"}) == (
        "my-repo/arn:aws:ecr:us-west-2:123456789012:repository/my-repo/${Literal}/us-west-2"
    )
    assert resolver.resolve({"Fn::Sub": ["${X}-${AWS::AccountId}", {"X": {"Ref": "Repo"}}]}) == "my-repo-123456789012"
    assert resolver.resolve({"Fn::If": ["IsAws", "yes", "no"]}) == "yes"
    assert resolver.resolve({"Fn::FindInMap": ["Accounts", {"Ref": "AWS::Region"}, "account"]}) == "602401143452"
    assert resolver.resolve({"A": {"Ref": "AWS::NoValue"}, "B": [1, {"Ref": "AWS::NoValue"}]}) == {"B": [1]}
    assert references({"Fn::Sub": ["${Repo.Arn}${X}", {"X": {"Ref": "Fn"}}]}) == {"Repo", "Fn"}
    assert as_strings({"Overwrite": True, "Count": 2, "List": [False]}) == {
        "Overwrite": "true",
        "Count": "2",
        "List": ["false"],
    }


def test_a_state_machine_s_ref_is_its_arn_and_its_name_is_the_arn_s_seventh_part():
    tmpl = {"Resources": {"Machine": {"Type": "AWS::StepFunctions::StateMachine"}}}
    machine = PhysicalResource("Machine", "AWS::StepFunctions::StateMachine", "Stack-Workflow-1cda1a45")
    resolver = Resolver(tmpl, {"Machine": machine}, IDENTITY)
    arn = "arn:aws:states:us-west-2:123456789012:stateMachine:Stack-Workflow-1cda1a45"
    assert resolver.resolve({"Ref": "Machine"}) == resolver.resolve({"Fn::GetAtt": ["Machine", "Arn"]}) == arn
    name = {"Fn::Select": [6, {"Fn::Split": [":", {"Ref": "Machine"}]}]}
    assert resolver.resolve(name) == "Stack-Workflow-1cda1a45"


def test_physical_ids_are_stable_per_generation_and_names_win():
    assert new_physical_id(IDENTITY, "Vpc", "AWS::EC2::VPC", 0) == new_physical_id(IDENTITY, "Vpc", "AWS::EC2::VPC", 0)
    assert new_physical_id(IDENTITY, "Vpc", "AWS::EC2::VPC", 0) != new_physical_id(IDENTITY, "Vpc", "AWS::EC2::VPC", 1)
    assert new_physical_id(IDENTITY, "Vpc", "AWS::EC2::VPC", 0).startswith("vpc-")
    assert new_physical_id(IDENTITY, "Logs", "AWS::Logs::LogGroup", 0, "/my/logs") == "/my/logs"
    named = {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": "/my/logs"}}
    assert deploy(template(L=named)).resources["L"].physical_id == "/my/logs"


# --- objects of hand-written manifests --------------------------------------------------------------------------------


def obj(kind: str, name: str, namespace: Optional[str] = "training", api: str = "v1", **labels: str) -> Dict:
    """A manifest object with ``labels`` and a ``spec`` (namespace ``training`` unless given; None: cluster-scoped)."""
    metadata: Dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": api, "kind": kind, "metadata": metadata, "spec": {"v": 1}}


NAMESPACE = obj("Namespace", "training", None)


# --- the real handler --------------------------------------------------------------------------------------------


def test_the_handler_and_the_framework_come_from_the_installed_aws_cdk_lib():
    import tarfile

    with tarfile.open(aws_cdk_lib_tarball()) as archive:
        framework = archive.extractfile(FRAMEWORK_IN_TARBALL).read().decode()
    assert 'case"Create":return req.RequestId;case"Update":case"Delete":return req.PhysicalResourceId' in framework
    event = {"RequestType": "Update", "RequestId": "r", "PhysicalResourceId": "p"}
    assert framework_physical_id(event, None) == "p"
    assert framework_physical_id(dict(event, RequestType="Create"), None) == "r"


def test_the_workspace_gives_the_handler_only_its_own_commands():
    """The handler puts the layers' directories first on ``PATH``; they hold no command here, and the rest of
    ``PATH`` is the workspace's ``bin``, empty until a subclass installs the commands."""
    with HandlerWorkspace("us-west-2") as workspace:
        assert (workspace.handler_dir / "apply" / "__init__.py").is_file()
        assert workspace.environment()["PATH"] == str(workspace.bin_dir)
        assert os.listdir(workspace.bin_dir) == []
    assert not workspace.root.exists()


# --- scenarios on hand-written templates -------------------------------------------------------------------------


def app_template(job_name: str) -> Dict[str, Any]:
    """A cluster, Volcano, its queue and one Volcano Job, applied like aws-eks-v2 applies manifests, the job's
    resource keyed by its name."""
    token = {"Fn::GetAtt": ["Provider", "Arn"]}
    cluster_name = {"Ref": "Cluster"}
    job = obj("Job", job_name, api="batch.volcano.sh/v1alpha1")
    job["spec"] = {"queue": "training", "tasks": [{"name": "t", "replicas": 1}]}
    queue = obj("Queue", "training", None, api="scheduling.volcano.sh/v1beta1")
    job_properties = {
        "ServiceToken": token,
        "ClusterName": cluster_name,
        "Manifest": json.dumps([job]),
        "Overwrite": True,
    }
    resources = {
        "Provider": {"Type": "AWS::Lambda::Function", "Properties": {"Runtime": "python3.13"}},
        "Cluster": {"Type": "AWS::EKS::Cluster", "Properties": {"RoleArn": "arn:aws:iam::1:role/r"}},
        "Volcano": {
            "Type": HELM,
            "Properties": {
                "ServiceToken": token,
                "ClusterName": cluster_name,
                "Release": "volcano",
                "Chart": "volcano",
                "Version": "1.15.1",
                "Namespace": "volcano-system",
                "Repository": "https://volcano-sh.github.io/helm-charts",
                "CreateNamespace": True,
            },
        },
        "Namespace": {
            "Type": KUBERNETES,
            "DeletionPolicy": "Retain",
            "Properties": {
                "ServiceToken": token,
                "ClusterName": cluster_name,
                "Manifest": json.dumps([NAMESPACE]),
                "Overwrite": True,
            },
        },
        "Queue": {
            "Type": KUBERNETES,
            "DependsOn": ["Volcano"],
            "Properties": {
                "ServiceToken": token,
                "ClusterName": cluster_name,
                "Manifest": json.dumps([queue]),
                "Overwrite": True,
            },
        },
        f"Job{job_name.replace('-', '')}": {
            "Type": KUBERNETES,
            "DependsOn": ["Queue", "Namespace"],
            "Properties": job_properties,
        },
    }
    return {"Resources": resources}


def hand_written() -> Rehearsal:
    """A rehearsal of :func:`app_template` with the job ``train-aaaa`` (old) and ``train-bbbb`` (new)."""
    templates = {"old": app_template("train-aaaa"), "new": app_template("train-bbbb")}
    return Rehearsal({"Hand": lambda variant: (templates[variant.label], "us-west-2")})


def test_a_job_keyed_by_its_name_is_created_then_the_old_one_deleted():
    rehearsal = hand_written()
    result = rehearsal.run(Scenario("changed job", "Hand", Variant("old"), Variant("new"), DEPLOY_PROMISES))
    destroyed = rehearsal.run(Scenario("destroy", "Hand", Variant("old"), None, DEPLOY_PROMISES))
    assert [(s.phase, s.operation, s.logical_id) for s in result.plan.steps] == [
        ("update", "Create", "Jobtrainbbbb"),
        ("cleanup", "Delete", "Jobtrainaaaa"),
    ]
    assert result.failed_promises() == {}
    order = [step.logical_id for step in destroyed.plan.steps]
    assert order.index("Jobtrainaaaa") < order.index("Queue") < order.index("Volcano") < order.index("Cluster")
    assert [step.operation for step in destroyed.plan.steps if step.logical_id == "Namespace"] == ["Retain"]
    assert destroyed.failed_promises() == {}


def test_the_event_carries_strings_old_properties_and_the_physical_id():
    result = plan(deploy(app_template("a")), app_template("b"), IDENTITY)
    create = custom_resource_event(result.steps[0], IDENTITY, 0)
    delete = custom_resource_event(result.steps[1], IDENTITY, 1)
    assert create["RequestType"] == "Create" and create["RequestId"] == result.steps[0].physical_id
    assert create["ResourceProperties"]["Overwrite"] == "true"
    assert create["ResourceProperties"]["ClusterName"].startswith("Rehearsal-Cluster-")
    assert (
        delete["RequestType"] == "Delete"
        and json.loads(delete["ResourceProperties"]["Manifest"])[0]["metadata"]["name"] == "a"
    )
    assert "OldResourceProperties" not in delete and delete["PhysicalResourceId"] == result.steps[1].physical_id
