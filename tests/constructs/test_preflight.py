"""Preflight: the plan it reads from the stack, its place first in the deploy, and its exact permissions."""

from __future__ import annotations

import json
from typing import Any, Dict, Set

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2

from tests.support.apps import (
    COMPOSER_TRAINING,
    KUBEFLOW_TRAINING,
    TRAINIUM_EKS,
    build_default_app,
    default_template,
    new_app,
    only,
    resources_of,
    stack_template,
)
from trainium_eks.constructs.efa_layout import EfaLayout
from trainium_eks.constructs.node_capacity import NodeCapacity
from trainium_eks.constructs.node_provisioning import NodeProvisioning
from trainium_eks.constructs.preflight import RESOURCE_TYPE, RUNTIME, SOURCE, Preflight
from trainium_eks.core.lambda_sources import load_lambda_module
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.stacks.trainium_eks_stack import TrainiumEksStack

CHECKS = load_lambda_module(SOURCE, "preflight_checks")


def _plan(template) -> Dict[str, Any]:
    return json.loads(only(template, RESOURCE_TYPE)["Properties"]["Plan"])


def _preflight_ids(template) -> Set[str]:
    """The logical ids of the preflight's own resources (custom resource, function, role, policy, log group)."""
    return {logical for logical in template.to_json()["Resources"] if logical.startswith("Preflight")}


def _nodes(plan: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {entry["name"]: entry for entry in plan["nodes"]}


def test_the_plan_is_what_the_seed_stack_launches():
    plan = _plan(default_template())
    assert plan["version"] == CHECKS.PLAN_VERSION
    assert (plan["stack"], plan["region"], plan["kubernetesVersion"]) == (TRAINIUM_EKS, "us-west-2", "1.36")
    nodes = _nodes(plan)
    assert nodes["AcceleratedNodes"] == {
        "name": "AcceleratedNodes",
        "instanceType": "trn1.32xlarge",
        "count": 2,
        "availabilityZoneId": "usw2-az4",
        "subnetId": None,
        "subnetCreated": True,
        "ipInterfaces": 1,
        "efaInterfaces": 8,
        "capacityReservationId": None,
        "capacityType": "on-demand",
        "provisioning": "karpenter",
    }
    assert nodes["SystemNodes"]["instanceType"] == "m7i.xlarge" and nodes["SystemNodes"]["count"] == 2
    assert nodes["SystemNodes"]["provisioning"] == "node-group" and nodes["SystemNodes"]["subnetCreated"] is False
    assert plan["fileSystems"] == [
        {
            "kind": "lustre",
            "name": "Storage",
            "storageGib": 1200,
            "deploymentType": "PERSISTENT_2",
            "throughputPerUnitStorage": 250,
        }
    ]
    assert CHECKS.check_plan(plan) == []


@pytest.mark.parametrize("name", [TRAINIUM_EKS, KUBEFLOW_TRAINING, COMPOSER_TRAINING])
def test_every_other_resource_of_each_stack_comes_after_the_preflight(name):
    template = stack_template(name)
    resources = template.to_json()["Resources"]
    (checks,) = resources_of(template, RESOURCE_TYPE)
    own = _preflight_ids(template)
    assert checks in own and len(own) == 4  # custom resource, function, role (inline policy), log group
    for logical, resource in resources.items():
        if logical not in own:
            assert checks in resource.get("DependsOn", []), f"{logical} does not wait for the preflight"
    # And nothing of the preflight waits for, or refers to, anything else of the stack.
    for logical in own:
        text = json.dumps(resources[logical])
        others = [other for other in resources if other not in own and f'"{other}"' in text]
        assert others == [], f"{logical} refers to {others}"
        assert set(resources[logical].get("DependsOn", [])) <= own


def test_the_function_may_make_exactly_the_checks_calls():
    template = default_template()
    (role,) = [
        resource
        for logical, resource in resources_of(template, "AWS::IAM::Role").items()
        if logical.startswith("Preflight")
    ]
    assert not [logical for logical in resources_of(template, "AWS::IAM::Policy") if logical.startswith("Preflight")]
    (policy,) = role["Properties"]["Policies"]
    statements = policy["PolicyDocument"]["Statement"]
    wildcard = [s for s in statements if s["Resource"] == "*"]
    assert len(wildcard) == 1
    actions = wildcard[0]["Action"]
    assert sorted(actions if isinstance(actions, list) else [actions]) == sorted(CHECKS.IAM_ACTIONS)
    assert all(a.split(":")[1].startswith(("Describe", "Get", "List")) for a in CHECKS.IAM_ACTIONS)
    scoped = {json.dumps(s["Action"]): s["Resource"] for s in statements if s["Resource"] != "*"}
    assert set(scoped) == {'["logs:CreateLogStream", "logs:PutLogEvents"]', '"cloudformation:DescribeStacks"'}
    assert scoped['"cloudformation:DescribeStacks"'] == {"Ref": "AWS::StackId"}


def test_the_function_runs_the_lambda_folder_on_the_newest_python():
    (function,) = [
        resource["Properties"]
        for logical, resource in resources_of(default_template(), "AWS::Lambda::Function").items()
        if logical.startswith("Preflight")
    ]
    assert function["Handler"] == "index.handler"
    assert function["Runtime"] == RUNTIME.name == "python3.14"
    assert function["Timeout"] == 120


def test_preflight_false_leaves_it_out():
    template = default_template(preflight="false")
    assert resources_of(template, RESOURCE_TYPE) == {}
    assert not any("Preflight" in logical for logical in template.to_json()["Resources"])


def test_a_bad_preflight_setting_is_one_clear_message():
    with pytest.raises(ConfigurationError, match="preflight.*true or false"):
        build_default_app(preflight="maybe")


def test_karpenter_pools_count_their_node_limit_and_groups_their_maximum():
    for provisioning in ("karpenter", "node-group"):
        plan = _plan(default_template(provisioning=provisioning, nodeCount=4))
        assert _nodes(plan)["AcceleratedNodes"]["count"] == 4
        assert _nodes(plan)["AcceleratedNodes"]["provisioning"] == provisioning


def _seed_stack(**props: Any) -> TrainiumEksStack:
    app = new_app()
    return TrainiumEksStack(app, "Seed", env=cdk.Environment(region="us-west-2"), **props)


def test_an_existing_subnet_is_checked_by_id_and_all_efa_takes_an_address_per_card():
    app = new_app()
    holder = cdk.Stack(app, "Holder", env=cdk.Environment(region="us-west-2"))
    vpc = ec2.Vpc.from_vpc_attributes(
        holder,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        availability_zones=["us-west-2d"],
        private_subnet_ids=["subnet-0123456789abcdef1"],  # the private endpoint's subnets
    )
    subnet = ec2.Subnet.from_subnet_attributes(
        holder, "Subnet", subnet_id="subnet-0123456789abcdef0", availability_zone="us-west-2d"
    )
    stack = TrainiumEksStack(
        app,
        "Seed",
        env=cdk.Environment(region="us-west-2"),
        vpc=vpc,
        node_subnet=subnet,
        efa_layout=EfaLayout.ALL_EFA,
        provisioning=NodeProvisioning.NODE_GROUP,
    )
    nodes = _nodes(stack.preflight.plan)["AcceleratedNodes"]
    assert (nodes["subnetId"], nodes["subnetCreated"]) == ("subnet-0123456789abcdef0", False)
    assert (nodes["ipInterfaces"], nodes["efaInterfaces"]) == (8, 8)


def test_a_capacity_block_is_in_the_plan():
    stack = _seed_stack(capacity=NodeCapacity.capacity_block("cr-0123456789abcdef0"))
    nodes = _nodes(stack.preflight.plan)["AcceleratedNodes"]
    assert (nodes["capacityType"], nodes["capacityReservationId"]) == ("capacity-block", "cr-0123456789abcdef0")


def test_an_odcr_is_in_the_plan():
    stack = _seed_stack(capacity=NodeCapacity.capacity_reservation("cr-0123456789abcdef1"))
    nodes = _nodes(stack.preflight.plan)["AcceleratedNodes"]
    assert (nodes["capacityType"], nodes["capacityReservationId"]) == ("reservation", "cr-0123456789abcdef1")


def test_timeout_outside_one_to_five_minutes_is_refused():
    app = new_app()
    stack = cdk.Stack(app, "Lone", env=cdk.Environment(region="us-west-2"))
    with pytest.raises(ConfigurationError, match="timeout.*from 1 to 5 minutes"):
        Preflight(stack, "Preflight", timeout=cdk.Duration.minutes(10))


def test_a_reservation_id_that_is_a_token_is_left_out_of_the_plan_so_that_it_refers_to_no_resource():
    app = new_app()
    reservations = cdk.Stack(app, "Reservations", env=cdk.Environment(region="us-west-2"))
    reservation = ec2.CfnCapacityReservation(
        reservations,
        "Reservation",
        availability_zone="us-west-2d",
        instance_count=2,
        instance_platform="Linux/UNIX",
        instance_type="trn1.32xlarge",
    )
    seed = TrainiumEksStack(
        app,
        "SeedWithReservation",
        env=cdk.Environment(region="us-west-2"),
        capacity=NodeCapacity.capacity_reservation(reservation.ref),
    )
    nodes = _nodes(seed.preflight.plan)["AcceleratedNodes"]
    assert (nodes["capacityType"], nodes["capacityReservationId"]) == ("reservation", None)
    assert CHECKS.check_plan(seed.preflight.plan) == []
