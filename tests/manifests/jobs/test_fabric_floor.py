"""The fabric floor: a fraction of the EFA link rate, high above a TCP flow on the types this library is for."""

import math

import pytest

from trainium_eks.core.validation import ConfigurationError, Problems
from trainium_eks.facts.catalog import INSTANCE_CATALOG, Accelerator, instance_facts
from trainium_eks.manifests.jobs.fabric_floor import (
    DEFAULT_FABRIC_FLOOR_FRACTION,
    check_fabric_floor,
    fabric_floor_gbps,
)

ONE_FLOW_GBPS = {"outside a placement group": 5, "in a cluster placement group": 10, "with ENA Express": 25}
"""EC2 user guide, "Amazon EC2 instance network bandwidth": the single-flow limits of TCP between instances."""

EFA_TYPES = [facts for facts in INSTANCE_CATALOG.values() if facts.efa_supported]


def test_the_default_floors_of_the_seed_types():
    assert DEFAULT_FABRIC_FLOOR_FRACTION == 0.25
    floors = {name: fabric_floor_gbps(instance_facts(name)) for name in ("trn1.32xlarge", "trn1n.32xlarge")}
    assert floors == {"trn1.32xlarge": 200, "trn1n.32xlarge": 400}
    assert fabric_floor_gbps(instance_facts("trn2.48xlarge")) == 800
    assert fabric_floor_gbps(instance_facts("p4d.24xlarge")) == 100
    assert fabric_floor_gbps(instance_facts("p5.48xlarge")) == 800
    assert fabric_floor_gbps(instance_facts("trn1.32xlarge"), 0.5) == 400


@pytest.mark.parametrize("facts", EFA_TYPES, ids=lambda f: f.name)
def test_every_efa_type_has_a_floor_below_its_link_and_above_one_flow_outside_a_placement_group(facts):
    floor = fabric_floor_gbps(facts)
    assert ONE_FLOW_GBPS["outside a placement group"] < floor < facts.efa_link_gbps


@pytest.mark.parametrize(
    "facts",
    [f for f in EFA_TYPES if f.accelerator is Accelerator.NEURON or f.name.startswith("p")],
    ids=lambda f: f.name,
)
def test_on_trainium_and_p_types_a_tcp_flow_is_far_below_the_floor(facts):
    assert fabric_floor_gbps(facts) >= 4 * ONE_FLOW_GBPS["with ENA Express"]


def test_a_type_without_efa_has_no_floor():
    with pytest.raises(ValueError, match="trn1.2xlarge has no EFA link rate"):
        fabric_floor_gbps(instance_facts("trn1.2xlarge"))


@pytest.mark.parametrize("fraction", [0.01, 0.25, 0.9, 1, 1.0])
def test_fractions_above_0_up_to_1_are_accepted(fraction):
    problems = Problems("fabric check")
    assert check_fabric_floor(problems, "fabric_floor_fraction", fraction)
    assert not problems


@pytest.mark.parametrize("fraction", [0, -0.1, 1.5, True, "0.3", None, math.nan, math.inf])
def test_other_fractions_are_one_problem_naming_the_setting_the_value_and_what_is_allowed(fraction):
    problems = Problems("fabric check", setting_names={"fabric_floor_fraction": "fabricFloorFraction"})
    assert not check_fabric_floor(problems, "fabric_floor_fraction", fraction)
    (message,) = list(problems)
    assert message.startswith(
        f"fabricFloorFraction={fraction!r}: a fraction of the EFA link rate above 0 and at most 1"
    )
    assert "the first real run sets the baseline" in message


def test_a_bad_fraction_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match=r"fraction=2: a fraction of the EFA link rate"):
        fabric_floor_gbps(instance_facts("trn1.32xlarge"), 2)
