"""The delete path as CloudFormation runs it: deletions in parallel waves, and what a delete needs beyond the template's
dependencies (:mod:`rehearsal.delete_needs`), checked by the order promise. Each of the three destroy defects the
library had (the kubectl handler's network deleted first, Karpenter's policy deleted before its NodePools and
EC2NodeClasses, a retained file system holding a deleted subnet and security group) is rebuilt on today's templates
by taking its fix out, and the promise reports it."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import pytest

from rehearsal.cfn_changes import Deployment, deletion_waves, plan
from rehearsal.intrinsics import StackIdentity
from rehearsal.promises import ORDER, order_respects_needs
from rehearsal.scenario import ScenarioResult
from rehearsal.scenarios import all_scenarios
from tests.support.apps import COMPOSER_TRAINING, KUBEFLOW_TRAINING, TRAINIUM_EKS, stack_template
from tests.support.destroy import IDENTITY, scenario_result

KUBERNETES = "Custom::AWSCDK-EKS-KubernetesResource"
HELM = "Custom::AWSCDK-EKS-HelmChart"
VPC = {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}
SUBNET = {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.0.0.0/24"}}
TABLE = {"Type": "AWS::EC2::RouteTable", "Properties": {"VpcId": {"Ref": "Vpc"}}}
ROUTE = {
    "Type": "AWS::EC2::Route",
    "Properties": {"RouteTableId": {"Ref": "Table"}, "DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": "nat-1"},
}
LOGS = {"Type": "AWS::Logs::LogGroup", "Properties": {"RetentionInDays": 7}}


def template(**resources: Dict[str, Any]) -> Dict[str, Any]:
    """A template of ``resources``."""
    return {"Resources": resources}


def manifest(*kinds: str) -> Dict[str, Any]:
    """A kubectl handler resource applying one object of each of ``kinds``."""
    objects = [{"apiVersion": "karpenter.sh/v1", "kind": kind, "metadata": {"name": "pool"}} for kind in kinds]
    return {"Type": KUBERNETES, "Properties": {"ServiceToken": "arn:handler", "Manifest": json.dumps(objects)}}


def chart(name: str) -> Dict[str, Any]:
    """A kubectl handler resource installing the Helm chart ``name``."""
    return {"Type": HELM, "Properties": {"ServiceToken": "arn:handler", "Chart": name, "Release": name}}


def after(resource: Dict[str, Any], *names: str) -> Dict[str, Any]:
    """``resource`` with ``DependsOn`` ``names``."""
    return dict(resource, DependsOn=list(names))


def retained(resource: Dict[str, Any]) -> Dict[str, Any]:
    """``resource`` with ``DeletionPolicy: Retain``."""
    return dict(resource, DeletionPolicy="Retain")


def waves(old: Dict[str, Any], new: Optional[Dict[str, Any]] = None) -> List[Set[str]]:
    """``operation:logical id`` of the cleanup steps from ``old`` to ``new``, per wave."""
    found: List[Set[str]] = []
    for step in plan(plan(Deployment.empty(), old, IDENTITY).result, new, IDENTITY).steps:
        if step.wave is not None:
            found.extend(set() for _ in range(step.wave + 1 - len(found)))
            found[step.wave].add(f"{step.operation}:{step.logical_id}")
    return found


PAIR = re.compile(r"\((?:Delete|Retain) (\w+)\).*? (?:needs|keeps) (\w+)")


def violated(result: ScenarioResult) -> Set[Tuple[str, str]]:
    """(resource, what it needs) of every violation of the order promise."""
    return {match.groups() for match in map(PAIR.search, order_respects_needs(result)) if match}


# --- waves ---------------------------------------------------------------------------------------------------------


def test_a_destroy_deletes_in_waves_what_nothing_left_depends_on_and_a_retained_resource_counts_as_gone():
    old = template(Vpc=VPC, Subnet=SUBNET, Table=retained(TABLE), Route=ROUTE, Logs=LOGS)
    assert waves(old) == [
        {"Delete:Subnet", "Delete:Route", "Delete:Logs"},
        {"Retain:Table"},
        {"Delete:Vpc"},
    ]
    assert deletion_waves(old, set(old["Resources"])) == [["Logs", "Route", "Subnet"], ["Table"], ["Vpc"]]


def test_an_update_cleans_up_in_waves_of_what_leaves_the_stack_and_creates_one_step_at_a_time():
    old = template(Vpc=VPC, Subnet=SUBNET, Table=TABLE, Route=ROUTE)
    bigger = dict(VPC, Properties={"CidrBlock": "10.1.0.0/16"})
    changes = plan(plan(Deployment.empty(), old, IDENTITY).result, template(Vpc=bigger, Subnet=SUBNET), IDENTITY)
    assert [(s.phase, s.operation, s.logical_id, s.wave) for s in changes.steps] == [
        ("update", "Create", "Vpc", None),
        ("update", "Create", "Subnet", None),
        ("cleanup", "Delete", "Route", 0),
        ("cleanup", "Delete", "Subnet", 0),
        ("cleanup", "Delete", "Table", 1),
        ("cleanup", "Delete", "Vpc", 2),
    ]


def test_a_wave_is_concurrent_for_the_template_dependencies_too():
    result = scenario_result(template(Vpc=VPC, Subnet=SUBNET))
    assert order_respects_needs(result) == []
    result.plan.steps = [dataclasses.replace(step, wave=0) for step in result.plan.steps]
    assert order_respects_needs(result) == ["step 1 (Delete Subnet) needs Vpc, deleted at the same time by step 2"]


# --- needs beyond the template, on small templates -----------------------------------------------------------------


def test_a_kubernetes_object_needs_the_private_subnets_network_path_until_it_is_deleted():
    route = "NetworkPrivate0DefaultRoute"
    old = template(Vpc=VPC, Table=TABLE, **{route: ROUTE}, NetworkAcceleratedDefaultRoute=ROUTE, Pool=manifest("Pod"))
    assert violated(scenario_result(old)) == {("Pool", route)}
    old["Resources"]["Pool"] = after(manifest("Pod"), route)
    assert order_respects_needs(scenario_result(old)) == []


def test_karpenters_release_node_pools_and_node_classes_need_its_policy_until_they_are_deleted():
    policy = "KarpenterControllerRoleDefaultPolicy1234"
    old = template(
        **{policy: {"Type": "AWS::IAM::Policy", "Properties": {"PolicyName": "p", "Roles": ["r"]}}},
        Pool=manifest("NodePool"),
        Class=manifest("EC2NodeClass"),
        Release=chart("karpenter"),
        Crds=chart("karpenter-crd"),
        Other=manifest("ConfigMap"),
    )
    assert violated(scenario_result(old)) == {("Pool", policy), ("Class", policy), ("Release", policy)}
    for name in ("Pool", "Class", "Release"):
        old["Resources"][name] = after(old["Resources"][name], policy)
    assert order_respects_needs(scenario_result(old)) == []


def test_a_retained_resource_keeps_the_subnet_security_group_and_vpc_it_references():
    group = {"Type": "AWS::EC2::SecurityGroup", "Properties": {"GroupDescription": "g", "VpcId": {"Ref": "Vpc"}}}
    file_system = {
        "Type": "AWS::FSx::FileSystem",
        "DeletionPolicy": "Retain",
        "Properties": {
            "FileSystemType": "LUSTRE",
            "SubnetIds": [{"Ref": "Subnet"}],
            "SecurityGroupIds": [{"Ref": "Group"}],
        },
    }
    old = template(Vpc=VPC, Subnet=SUBNET, Group=group, Files=file_system)
    assert violated(scenario_result(old)) == {("Files", "Subnet"), ("Files", "Group")}
    kept = template(Vpc=VPC, Subnet=retained(SUBNET), Group=retained(group), Files=file_system)
    assert violated(scenario_result(kept)) == {("Subnet", "Vpc"), ("Group", "Vpc")}
    kept["Resources"]["Vpc"] = retained(VPC)
    assert order_respects_needs(scenario_result(kept)) == []


def test_every_scenario_checks_the_order():
    assert all(ORDER in scenario.promises for scenario in all_scenarios())


# --- the three defects, rebuilt on today's templates ----------------------------------------------------------------


def default_template(stack: str = TRAINIUM_EKS, **context: str) -> Dict[str, Any]:
    """A copy of the default app's template of ``stack``."""
    return copy.deepcopy(stack_template(stack, **context).to_json())


def without_depends_on(tmpl: Dict[str, Any], dropped: Callable[[str], bool]) -> Dict[str, Any]:
    """``tmpl`` with every ``DependsOn`` entry that ``dropped`` says removed."""
    for resource in tmpl["Resources"].values():
        depends_on = resource.get("DependsOn")
        if depends_on is not None:
            names = [depends_on] if isinstance(depends_on, str) else depends_on
            resource["DependsOn"] = [name for name in names if not dropped(name)]
    return tmpl


def destroy(tmpl: Dict[str, Any]) -> Set[Tuple[str, str]]:
    """The violated needs of destroying ``tmpl`` deployed as the TrainiumEks stack."""
    return violated(scenario_result(tmpl, None, StackIdentity(TRAINIUM_EKS, "us-west-2")))


@pytest.mark.parametrize(
    "stack, context",
    [
        (stack, context)
        for stack in (TRAINIUM_EKS, KUBEFLOW_TRAINING, COMPOSER_TRAINING)
        for context in ({}, {"provisioning": "node-group"})
    ],
)
def test_todays_templates_are_destroyed_without_deleting_what_a_delete_needs(stack, context):
    result = scenario_result(default_template(stack, **context), None, StackIdentity(stack, "us-west-2"))
    assert max(step.wave or 0 for step in result.plan.steps) > 5
    assert order_respects_needs(result) == []


def test_the_kubectl_handlers_network_deleted_first_is_caught():
    tmpl = without_depends_on(default_template(), lambda name: name.startswith(("NetworkPrivate", "NetworkS3Endpoint")))
    found = destroy(tmpl)
    types = {name: resource["Type"] for name, resource in tmpl["Resources"].items()}
    needers = {name for name, needed in found if needed.startswith("NetworkPrivate0DefaultRoute")}
    assert needers and all(types[name].startswith("Custom::AWSCDK-EKS-") for name in needers)
    assert any(needed.startswith("NetworkS3Endpoint") for _, needed in found)


def test_karpenters_policy_deleted_before_its_node_pools_and_classes_is_caught():
    tmpl = without_depends_on(default_template(), lambda name: name.startswith("KarpenterControllerRoleDefaultPolicy"))
    needers = {name for name, needed in destroy(tmpl) if needed.startswith("KarpenterControllerRoleDefaultPolicy")}
    assert any(name.startswith("KarpenterRelease") for name in needers)
    assert any("NodePoolNodePool" in name for name in needers)
    assert any("NodePoolEC2NodeClass" in name for name in needers)


def test_a_retained_file_system_holding_a_deleted_subnet_and_security_group_is_caught():
    tmpl = default_template()
    for name, resource in tmpl["Resources"].items():
        if name.startswith(("NetworkAcceleratedSubnet", "NetworkVpc", "StorageSecurityGroup")):
            resource.pop("DeletionPolicy", None)
    types = {name: resource["Type"] for name, resource in tmpl["Resources"].items()}
    assert {(types[name], types[needed]) for name, needed in destroy(tmpl)} == {
        ("AWS::FSx::FileSystem", "AWS::EC2::Subnet"),
        ("AWS::FSx::FileSystem", "AWS::EC2::SecurityGroup"),
    }
