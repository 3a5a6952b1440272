"""EFA interface layouts per instance type: count, network cards, device indexes, interface types."""

import pytest

from trainium_eks.constructs.efa_layout import EfaLayout, efa_network_interfaces
from trainium_eks.facts.catalog import INSTANCE_CATALOG, instance_facts

EXPECTED_INTERFACES = {"trn1.32xlarge": 8, "trn1n.32xlarge": 16, "trn2.48xlarge": 16, "trn1.2xlarge": 0}


def layout(instance_type, efa_layout):
    interfaces = efa_network_interfaces(instance_facts(instance_type), efa_layout, ["sg-123"])
    return [(i.network_card_index, i.device_index, i.interface_type) for i in interfaces]


@pytest.mark.parametrize("instance_type,count", EXPECTED_INTERFACES.items())
@pytest.mark.parametrize("efa_layout", list(EfaLayout))
def test_one_interface_per_network_card(instance_type, count, efa_layout):
    interfaces = layout(instance_type, efa_layout)
    assert len(interfaces) == count
    assert [card for card, _, _ in interfaces] == list(range(count))


@pytest.mark.parametrize("instance_type", ["trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge"])
def test_ip_optimized_has_one_ip_bearing_primary_and_efa_only_elsewhere(instance_type):
    primary, *others = layout(instance_type, EfaLayout.IP_OPTIMIZED)
    assert primary == (0, 0, "efa")
    assert others and all(device == 0 and kind == "efa-only" for _, device, kind in others)


@pytest.mark.parametrize("instance_type", ["trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge"])
def test_all_efa_puts_only_the_primary_at_device_index_zero(instance_type):
    primary, *others = layout(instance_type, EfaLayout.ALL_EFA)
    assert primary == (0, 0, "efa")
    assert others and all(device == 1 and kind == "efa" for _, device, kind in others)


def test_interfaces_carry_the_security_groups_and_no_subnet():
    interfaces = efa_network_interfaces(instance_facts("trn1.32xlarge"), EfaLayout.IP_OPTIMIZED, ["sg-a", "sg-b"])
    assert all(i.groups == ["sg-a", "sg-b"] and i.subnet_id is None for i in interfaces)
    assert all(i.delete_on_termination for i in interfaces)


@pytest.mark.parametrize("facts", INSTANCE_CATALOG.values(), ids=lambda f: f.name)
def test_catalog_rows_are_consistent(facts):
    assert facts.efa_interfaces in (0, facts.network_cards), "one EFA per network card, or none"
    assert facts.sources
    if facts.neuron_devices:
        assert facts.neuron_cores >= facts.neuron_devices
