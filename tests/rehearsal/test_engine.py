"""The rehearsal engine on small hand-written templates: CloudFormation's actions and order, intrinsic functions,
kubectl's semantics in the cluster model, the fake commands, and the real aws-eks-v2 handler from aws-cdk-lib."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from rehearsal import fake_commands
from rehearsal.cfn_changes import Action, Deployment, create_only_paths, plan
from rehearsal.cluster_model import Cluster, ClusterModel, parse_selector, selector_matches
from rehearsal.handler import (
    FRAMEWORK_IN_TARBALL,
    HandlerWorkspace,
    aws_cdk_lib_tarball,
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
from rehearsal.kubectl_probe import can_run_layer_binaries, kubectl_version, layer_kubectl, observe_prune
from rehearsal.kubectl_prune import KUBECTL_DEFAULT_PRUNE_ALLOWLIST
from rehearsal.promises import DEPLOY_PROMISES, one_copy_of_each_job
from rehearsal.scenario import Rehearsal, Scenario, Variant, custom_resource_event

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


# --- cluster model: kubectl's semantics --------------------------------------------------------------------------


def obj(kind: str, name: str, namespace: Optional[str] = "training", api: str = "v1", **labels: str) -> Dict:
    """A manifest object with ``labels`` and a ``spec`` (namespace ``training`` unless given; None: cluster-scoped)."""
    metadata: Dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": api, "kind": kind, "metadata": metadata, "spec": {"v": 1}}


NAMESPACE = obj("Namespace", "training", None)
PRUNE = "aws.cdk.eks/prune-c8abc"


def cluster_with(*objects: Dict) -> Cluster:
    """A new cluster with the ``training`` namespace and ``objects`` applied."""
    cluster = Cluster.new("c")
    assert cluster.apply([NAMESPACE, *objects], selector=None, file_name="m").exit_code == 0
    return cluster


def test_selectors():
    requirements = parse_selector("a,b=1,c!=2,!d")
    assert selector_matches(requirements, {"a": "", "b": "1", "c": "3"})
    assert not selector_matches(requirements, {"a": "", "b": "1", "d": ""})
    assert not selector_matches(parse_selector(PRUNE), {})
    assert selector_matches(parse_selector(PRUNE), {PRUNE: ""})


def test_create_fails_on_an_existing_object_and_creates_the_rest():
    cluster = cluster_with(obj("ConfigMap", "a"))
    outcome = cluster.create([obj("ConfigMap", "a"), obj("ConfigMap", "b")], save_config=True, file_name="m")
    assert outcome.exit_code == 1
    assert 'configmaps "a" already exists' in outcome.errors[0] and "AlreadyExists" in outcome.errors[0]
    assert cluster.find("ConfigMap", "b", "training") is not None


VOLCANO_TASKS = [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]
"""The least a Volcano Job needs to pass Volcano's webhook (a task, with a pod template)."""


def test_prune_deletes_only_labelled_objects_of_allow_listed_kinds_in_visited_namespaces():
    volcano_job = obj("Job", "old-vcjob", api="batch.volcano.sh/v1alpha1", **{PRUNE: ""})
    volcano_job["spec"] = {"tasks": VOLCANO_TASKS}
    cluster = cluster_with(
        obj("ConfigMap", "old", **{PRUNE: ""}),
        obj("ConfigMap", "unlabelled"),
        obj("NetworkPolicy", "old-policy", api="networking.k8s.io/v1", **{PRUNE: ""}),
        obj("Job", "old-job", api="batch/v1", **{PRUNE: ""}),
        obj("ConfigMap", "elsewhere", "default", **{PRUNE: ""}),
    )
    cluster.helm_upgrade_install(
        "volcano", namespace="vs", chart="volcano", version="1", values="", create_namespace=True
    )
    assert cluster.apply([volcano_job], selector=None, file_name="m").exit_code == 0
    outcome = cluster.apply([obj("ConfigMap", "new", **{PRUNE: ""})], selector=PRUNE, file_name="m")
    pruned = sorted(target for op, target in ((e.op, e.target) for e in outcome.effects) if op == "pruned")
    assert pruned == ["batch/v1 Job training/old-job", "v1 ConfigMap training/old"]
    assert cluster.find("Job", "old-vcjob", "training") is not None, "Volcano Jobs are outside the allow-list"
    assert cluster.find("NetworkPolicy", "old-policy", "training") is not None
    assert cluster.find("ConfigMap", "elsewhere", "default") is not None, "only visited namespaces are pruned"


def test_prune_skips_objects_not_created_by_apply_and_stops_on_errors():
    cluster = cluster_with()
    cluster.create([obj("ConfigMap", "created", **{PRUNE: ""})], save_config=False, file_name="m")
    cluster.apply([obj("ConfigMap", "applied", **{PRUNE: ""})], selector=None, file_name="m")
    unknown = obj("Queue", "q", None, api="scheduling.volcano.sh/v1beta1", **{PRUNE: ""})
    outcome = cluster.apply([obj("ConfigMap", "new", **{PRUNE: ""}), unknown], selector=PRUNE, file_name="m")
    assert 'no matches for kind "Queue"' in outcome.errors[0]
    assert cluster.find("ConfigMap", "new", "training") is not None, "the other objects are still applied"
    assert cluster.find("ConfigMap", "applied", "training") is not None, "an error stops the prune"
    cluster.apply([obj("ConfigMap", "new", **{PRUNE: ""})], selector=PRUNE, file_name="m")
    assert cluster.find("ConfigMap", "applied", "training") is None
    assert cluster.find("ConfigMap", "created", "training") is not None, "no last-applied annotation: kept"


def test_pruning_a_namespace_deletes_what_is_in_it():
    cluster = Cluster.new("c")
    cluster.apply([obj("Namespace", "scratch", None, **{PRUNE: ""})], selector=None, file_name="m")
    cluster.apply([obj("ConfigMap", "inside", "scratch")], selector=None, file_name="m")
    cluster.apply([obj("PersistentVolume", "pv", None, **{PRUNE: ""})], selector=PRUNE, file_name="m")
    assert cluster.find("Namespace", "scratch") is None and cluster.find("ConfigMap", "inside", "scratch") is None


def test_apply_merges_labels_three_ways_and_reports_changes():
    cluster = cluster_with(obj("ConfigMap", "a", x="1", y="2"))
    cluster.objects[("", "ConfigMap", "training", "a")].labels["by-someone-else"] = "z"
    outcome = cluster.apply([obj("ConfigMap", "a", x="1")], selector=None, file_name="m")
    assert outcome.output == ["configmap/a configured"]
    assert cluster.find("ConfigMap", "a", "training").labels == {"x": "1", "by-someone-else": "z"}
    assert cluster.apply([obj("ConfigMap", "a", x="1")], selector=None, file_name="m").output == [
        "configmap/a unchanged"
    ]


def test_delete_reports_missing_objects_and_deletes_the_rest():
    cluster = cluster_with(obj("ConfigMap", "a"))
    outcome = cluster.delete([obj("ConfigMap", "missing"), obj("ConfigMap", "a")], file_name="m")
    assert outcome.exit_code == 1 and "NotFound" in outcome.errors[0]
    assert cluster.find("ConfigMap", "a", "training") is None


def test_the_api_server_needs_namespaces_definitions_and_queues():
    cluster = Cluster.new("c")
    outcome = cluster.apply([obj("ConfigMap", "a")], selector=None, file_name="m")
    assert 'namespaces "training" not found' in outcome.errors[0]
    vcjob = obj("Job", "j", api="batch.volcano.sh/v1alpha1")
    vcjob["spec"] = {"queue": "training", "tasks": VOLCANO_TASKS}
    cluster.apply([NAMESPACE], selector=None, file_name="m")
    assert "ensure CRDs are installed first" in cluster.apply([vcjob], selector=None, file_name="m").errors[0]
    install = cluster.helm_upgrade_install(
        "volcano", namespace="vs", chart="volcano", version="1", values="", create_namespace=False
    )
    assert 'namespaces "vs" not found' in install.errors[0]
    cluster.helm_upgrade_install(
        "volcano", namespace="vs", chart="volcano", version="1", values="", create_namespace=True
    )
    assert "unable to find job queue" in cluster.apply([vcjob], selector=None, file_name="m").errors[0]
    no_task = json.loads(json.dumps(vcjob))
    no_task["spec"]["tasks"] = []
    assert "No task specified" in cluster.apply([no_task], selector=None, file_name="m").errors[0]
    cluster.apply([obj("Queue", "training", None, api="scheduling.volcano.sh/v1beta1")], selector=None, file_name="m")
    assert cluster.apply([vcjob], selector=None, file_name="m").exit_code == 0
    changed = json.loads(json.dumps(vcjob))
    changed["spec"]["schedulerName"] = "other"
    assert "job updates may not change" in cluster.apply([changed], selector=None, file_name="m").errors[0]
    scaled = json.loads(json.dumps(vcjob))
    scaled["spec"]["minAvailable"] = 4
    assert cluster.apply([scaled], selector=None, file_name="m").exit_code == 0
    batch_job = obj("Job", "b", api="batch/v1")
    batch_job["spec"] = {"template": {"spec": {"containers": [{"image": "a"}]}}}
    cluster.apply([batch_job], selector=None, file_name="m")
    batch_job["spec"]["template"]["spec"]["containers"][0]["image"] = "b"
    assert "field is immutable" in cluster.apply([batch_job], selector=None, file_name="m").errors[0]


def test_helm_upgrades_in_place_and_uninstall_removes_the_definitions():
    cluster = Cluster.new("c")
    first = cluster.helm_upgrade_install(
        "volcano", namespace="vs", chart="volcano", version="1", values="", create_namespace=True
    )
    assert [e.op for e in first.effects] == ["created", "installed"]
    cluster.apply([obj("Queue", "training", None, api="scheduling.volcano.sh/v1beta1")], selector=None, file_name="m")
    second = cluster.helm_upgrade_install(
        "volcano", namespace="vs", chart="volcano", version="2", values="", create_namespace=True
    )
    assert [e.op for e in second.effects] == ["upgraded"] and cluster.releases[("vs", "volcano")].revision == 2
    gone = cluster.helm_uninstall("volcano", namespace="vs")
    assert ("deleted with its definition", "scheduling.volcano.sh/v1beta1 Queue training") in [
        (e.op, e.target) for e in gone.effects
    ]
    assert cluster.find("Namespace", "vs") is not None, "helm never deletes the namespace it created"
    assert "release: not found" in cluster.helm_uninstall("volcano", namespace="vs").errors[0]


def test_the_model_round_trips_through_json():
    model = ClusterModel()
    model.create_cluster("c").apply([NAMESPACE, obj("ConfigMap", "a", x="1")], selector=None, file_name="m")
    assert ClusterModel.from_json(json.loads(json.dumps(model.to_json()))).to_json() == model.to_json()


# --- the allow-list and the layer's real kubectl -----------------------------------------------------------------


@pytest.mark.skipif(not can_run_layer_binaries(), reason="the kubectl layer's binary is linux/amd64")
def test_the_allow_list_is_what_the_layers_kubectl_prunes(tmp_path):
    from trainium_eks.facts import versions

    layer_module, _ = versions.KUBECTL_LAYERS[versions.DEFAULT_KUBERNETES_VERSION]
    kubectl = layer_kubectl(tmp_path, layer_module)
    assert kubectl_version(kubectl).startswith(f"v{versions.DEFAULT_KUBERNETES_VERSION}.")
    listed = observe_prune(kubectl, tmp_path, namespace="training")
    assert [entry[:4] for entry in listed] == list(KUBECTL_DEFAULT_PRUNE_ALLOWLIST)
    assert {entry[4] for entry in listed if entry[3]} == {"training"}, "namespaced kinds: visited namespaces only"


# --- fake commands -----------------------------------------------------------------------------------------------


def run_fake(tmp_path: Path, *argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    """Run a fake command through its shim, with the model and log in ``tmp_path``."""
    bin_dir = tmp_path / "bin"
    if not bin_dir.exists():
        fake_commands.install(bin_dir, python=sys.executable, import_root=Path(__file__).resolve().parents[2])
    env = {
        "PATH": str(bin_dir),
        fake_commands.CLUSTER_ENV: str(tmp_path / "clusters.json"),
        fake_commands.LOG_ENV: str(tmp_path / "log.jsonl"),
        "AWS_REGION": "us-west-2",
    }
    return subprocess.run(
        [str(bin_dir / argv[0]), *argv[1:]], env=env, cwd=tmp_path, input=stdin, capture_output=True, text=True
    )


def test_the_fake_commands_record_and_change_the_model(tmp_path):
    model = ClusterModel()
    model.create_cluster("c1")
    model.save(tmp_path / "clusters.json")
    kubeconfig = str(tmp_path / "kubeconfig")
    missing = run_fake(tmp_path, "aws", "eks", "update-kubeconfig", "--name", "nope", "--kubeconfig", kubeconfig)
    assert missing.returncode == 254 and "No cluster found for name: nope" in missing.stderr
    found = run_fake(tmp_path, "aws", "eks", "update-kubeconfig", "--name", "c1", "--kubeconfig", kubeconfig)
    assert found.returncode == 0 and json.loads(Path(kubeconfig).read_text())["current-context"].endswith("/c1")
    (tmp_path / "manifest.yaml").write_text(json.dumps(NAMESPACE) + json.dumps(obj("ConfigMap", "a")))
    applied = run_fake(tmp_path, "kubectl", "apply", "--kubeconfig", kubeconfig, "-f", "manifest.yaml")
    assert applied.returncode == 0 and "configmap/a created" in applied.stdout
    again = run_fake(tmp_path, "kubectl", "create", "--kubeconfig", kubeconfig, "-f", "manifest.yaml", "--save-config")
    assert again.returncode == 1 and "AlreadyExists" in again.stderr
    assert run_fake(tmp_path, "kubectl", "get", "pods").returncode == 2, "unknown commands are refused"
    pulled = run_fake(
        tmp_path, "helm", "pull", "oci://123.dkr.ecr.us-west-2.amazonaws.com/c/volcano", "--version", "9", "--untar"
    )
    assert pulled.returncode == 0 and "version: 9" in (tmp_path / "volcano" / "Chart.yaml").read_text()
    login = run_fake(tmp_path, "helm", "registry", "login", "--username", "AWS", "--password-stdin", "h", stdin="pw")
    assert login.returncode == 0
    records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["tool"] for r in records] == ["aws", "aws", "kubectl", "kubectl", "kubectl", "helm", "helm"]
    assert records[2]["argv"] == ["apply", "--kubeconfig", kubeconfig, "-f", "manifest.yaml"]
    assert records[2]["files"]["manifest.yaml"]["objects"] == ["v1 Namespace training", "v1 ConfigMap training/a"]
    assert records[2]["effects"] == [["created", "v1 Namespace training"], ["created", "v1 ConfigMap training/a"]]
    assert ClusterModel.load(tmp_path / "clusters.json").clusters["c1"].find("ConfigMap", "a", "training")


# --- the real handler --------------------------------------------------------------------------------------------


def test_the_handler_and_the_framework_come_from_the_installed_aws_cdk_lib():
    import tarfile

    with tarfile.open(aws_cdk_lib_tarball()) as archive:
        framework = archive.extractfile(FRAMEWORK_IN_TARBALL).read().decode()
    assert 'case"Create":return req.RequestId;case"Update":case"Delete":return req.PhysicalResourceId' in framework
    event = {"RequestType": "Update", "RequestId": "r", "PhysicalResourceId": "p"}
    assert framework_physical_id(event, None) == "p"
    assert framework_physical_id(dict(event, RequestType="Create"), None) == "r"


@pytest.fixture(scope="module")
def workspace():
    """One handler workspace (a warm handler process) for the module."""
    with HandlerWorkspace("us-west-2") as ws:
        yield ws


def invoke(ws: HandlerWorkspace, model: ClusterModel, event: Dict[str, Any]):
    """Run the handler on ``model`` with ``event``: (invocation, the model after)."""
    model.save(ws.cluster_file)
    invocation = ws.invoke(event)
    return invocation, ClusterModel.load(ws.cluster_file)


def test_the_real_handler_applies_prunes_and_deletes_a_tiny_manifest(workspace):
    assert (workspace.handler_dir / "apply" / "__init__.py").is_file()
    model = ClusterModel()
    model.create_cluster("c1").apply([NAMESPACE], selector=None, file_name="m")
    first = [obj("ConfigMap", "a", **{PRUNE: ""}), obj("NetworkPolicy", "p", api="networking.k8s.io/v1", **{PRUNE: ""})]
    second = [obj("ConfigMap", "b", **{PRUNE: ""})]
    properties = {"ServiceToken": "arn:aws:lambda:us-west-2:1:function:f", "ClusterName": "c1", "PruneLabel": PRUNE}
    create = {
        "RequestType": "Create",
        "ResourceType": KUBERNETES,
        "LogicalResourceId": "M",
        "RequestId": "req-1",
        "ResourceProperties": dict(properties, Manifest=json.dumps(first)),
    }
    created, model = invoke(workspace, model, create)
    assert created.succeeded and created.physical_id == "req-1"
    assert [c["argv"][:2] for c in created.commands] == [["eks", "update-kubeconfig"], ["create", "--kubeconfig"]]
    assert created.commands[1]["argv"][-1] == "--save-config"
    update = dict(
        create, RequestType="Update", PhysicalResourceId="req-1", OldResourceProperties=create["ResourceProperties"]
    )
    update["ResourceProperties"] = dict(properties, Manifest=json.dumps(second))
    updated, model = invoke(workspace, model, update)
    assert updated.succeeded and updated.physical_id == "req-1"
    assert updated.commands[1]["argv"][0] == "apply" and updated.commands[1]["argv"][-3:] == ["--prune", "-l", PRUNE]
    cluster = model.clusters["c1"]
    assert cluster.find("ConfigMap", "a", "training") is None, "pruned"
    assert cluster.find("NetworkPolicy", "p", "training") is not None, "outside the allow-list: never pruned"
    deleted, model = invoke(
        workspace, model, dict(update, RequestType="Delete", ResourceProperties=update["ResourceProperties"])
    )
    assert deleted.succeeded and model.clusters["c1"].find("ConfigMap", "b", "training") is None
    again, _ = invoke(workspace, model, create)
    assert not again.succeeded and "AlreadyExists" in again.error, "Create without overwrite runs kubectl create"
    gone, _ = invoke(workspace, ClusterModel(), dict(update, RequestType="Delete"))
    assert not gone.succeeded and "update-kubeconfig" in gone.error, "the handler fails when the cluster is gone"


def test_the_real_helm_handler_upgrades_in_place_from_an_oci_repository(workspace):
    model = ClusterModel()
    model.create_cluster("c1")
    properties = {
        "ServiceToken": "arn",
        "ClusterName": "c1",
        "Release": "volcano",
        "Chart": "volcano",
        "Version": "1.15.1",
        "Namespace": "volcano-system",
        "Repository": "oci://123456789012.dkr.ecr.us-west-2.amazonaws.com/charts/volcano",
        "CreateNamespace": "true",
        "Wait": "true",
        "Values": json.dumps({"a": 1}),
    }
    create = {
        "RequestType": "Create",
        "ResourceType": HELM,
        "LogicalResourceId": "H",
        "RequestId": "h1",
        "ResourceProperties": properties,
    }
    created, model = invoke(workspace, model, create)
    assert created.succeeded
    assert [c["argv"][0] for c in created.commands] == ["eks", "ecr", "registry", "pull", "upgrade"]
    update = dict(
        create,
        RequestType="Update",
        PhysicalResourceId="h1",
        OldResourceProperties=properties,
        ResourceProperties=dict(properties, Version="1.16.0"),
    )
    updated, model = invoke(workspace, model, update)
    assert updated.succeeded and model.clusters["c1"].releases[("volcano-system", "volcano")].version == "1.16.0"
    assert [e[0] for e in updated.commands[-1]["effects"]] == ["upgraded"]


# --- scenarios on hand-written templates -------------------------------------------------------------------------


def app_template(job_name: str, *, prune: bool) -> Dict[str, Any]:
    """A cluster, Volcano, its queue and one Volcano Job, applied like aws-eks-v2 applies manifests."""
    token = {"Fn::GetAtt": ["Provider", "Arn"]}
    cluster_name = {"Ref": "Cluster"}
    job = obj("Job", job_name, api="batch.volcano.sh/v1alpha1", **({PRUNE: ""} if prune else {}))
    job["spec"] = {"queue": "training", "tasks": [{"name": "t", "replicas": 1}]}
    queue = obj("Queue", "training", None, api="scheduling.volcano.sh/v1beta1")
    job_properties = {
        "ServiceToken": token,
        "ClusterName": cluster_name,
        "Manifest": json.dumps([job]),
        "Overwrite": True,
    }
    if prune:
        job_properties["PruneLabel"] = PRUNE
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
        "Job" if prune else f"Job{job_name.replace('-', '')}": {
            "Type": KUBERNETES,
            "DependsOn": ["Queue", "Namespace"],
            "Properties": job_properties,
        },
    }
    return {"Resources": resources}


def hand_written(prune: bool) -> Rehearsal:
    """A rehearsal of :func:`app_template` with the job ``train-aaaa`` (old) and ``train-bbbb`` (new)."""
    templates = {"old": app_template("train-aaaa", prune=prune), "new": app_template("train-bbbb", prune=prune)}
    return Rehearsal({"Hand": lambda variant: (templates[variant.label], "us-west-2")})


def test_a_job_updated_in_place_with_prune_leaves_the_old_volcano_job_behind():
    """The defect of a job manifest that keeps its logical id: the handler's ``kubectl apply --prune`` never
    deletes a Volcano Job (outside kubectl's allow-list)."""
    with hand_written(prune=True) as rehearsal:
        result = rehearsal.run(Scenario("changed job", "Hand", Variant("old"), Variant("new"), DEPLOY_PROMISES))
    assert [s.operation for s in result.plan.steps] == ["Update"]
    assert result.failed_promises() == {
        "exactly one copy of each job, none of an old spec": [
            "Job.batch.volcano.sh training/train-aaaa survives, but the app no longer has it (a job of an old spec)"
        ]
    }


def test_a_job_keyed_by_its_name_is_created_then_the_old_one_deleted():
    with hand_written(prune=False) as rehearsal:
        result = rehearsal.run(Scenario("changed job", "Hand", Variant("old"), Variant("new"), DEPLOY_PROMISES))
        destroyed = rehearsal.run(Scenario("destroy", "Hand", Variant("old"), None, DEPLOY_PROMISES[:2]))
    assert [(s.phase, s.operation) for s in result.plan.steps] == [("update", "Create"), ("cleanup", "Delete")]
    assert result.failed_promises() == {}
    assert one_copy_of_each_job(result) == []
    order = [run.step.logical_id for run in destroyed.runs]
    assert order.index("Jobtrainaaaa") < order.index("Queue") < order.index("Volcano") < order.index("Cluster")
    assert [run.step.operation for run in destroyed.runs if run.step.logical_id == "Namespace"] == ["Retain"]
    assert destroyed.failed_promises() == {} and destroyed.cluster_after.clusters == {}


def test_the_event_carries_strings_old_properties_and_the_physical_id():
    result = plan(deploy(app_template("a", prune=False)), app_template("b", prune=False), IDENTITY)
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


def test_no_real_command_is_reachable_from_the_handler(workspace):
    assert sorted(os.listdir(workspace.bin_dir)) == ["aws", "helm", "kubectl"]
    assert workspace.environment()["PATH"] == str(workspace.bin_dir)
