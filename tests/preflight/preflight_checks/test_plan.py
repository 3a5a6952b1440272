"""The plan a stack gives its preflight: the sample is valid, a bad one gets one message per problem."""

from __future__ import annotations

import pytest

from tests.support.preflight_aws import node as _node
from tests.support.preflight_aws import plan as _plan


def test_the_sample_plan_is_valid(checks):
    assert checks.check_plan(_plan()) == []
    assert checks.check_plan(_plan(_node(availabilityZoneId=None), kubernetesVersion=None, region=None)) == []


def test_a_bad_plan_gets_one_clear_message_per_problem(checks):
    assert checks.check_plan(_plan(version=2)) == ["plan version 2: this preflight reads version 1 only"]
    plan = _plan(_node(count=True, capacityType="spot"), fileSystems=[{"kind": "lustre", "storageGib": 1200}])
    del plan["stack"]
    problems = checks.check_plan(plan)
    assert "the plan: stack is missing" in problems
    assert "nodes[0] (AcceleratedNodes): count=True must be an integer" in problems
    assert any("capacityType 'spot'" in p for p in problems)
    assert any("fileSystems[0]: deploymentType None" in p for p in problems)
    # A reservation the stack itself makes has no ID before the deploy: the plan is valid, the reservation unchecked.
    assert checks.check_plan(_plan(_node(capacityType="capacity-block"))) == []
    with pytest.raises(ValueError, match="invalid preflight plan: plan version 2"):
        checks.run_checks(_plan(version=2), object())


def test_subnet_created_is_optional_and_a_boolean(checks):
    assert checks.check_plan(_plan(_node())) == [], "plans of earlier versions have no subnetCreated"
    assert checks.check_plan(_plan(_node(subnetCreated=True))) == []
    assert checks.check_plan(_plan(_node(subnetCreated="yes"))) == [
        "nodes[0] (AcceleratedNodes): subnetCreated='yes' must be true or false"
    ]


def test_a_lustre_file_systems_name_is_optional_and_a_string(checks):
    lustre = {"kind": "lustre", "storageGib": 1200, "deploymentType": "PERSISTENT_2"}
    assert checks.check_plan(_plan(fileSystems=[lustre])) == [], "plans of earlier versions name no file system"
    assert checks.check_plan(_plan(fileSystems=[dict(lustre, name="Storage")])) == []
    assert checks.check_plan(_plan(fileSystems=[dict(lustre, name=7)])) == ["fileSystems[0]: name=7 must be a string"]
