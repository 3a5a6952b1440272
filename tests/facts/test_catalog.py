"""The GPU rows of the instance catalog."""

import re

import pytest

from trainium_eks.constructs.efa_layout import EfaLayout, efa_network_interfaces
from trainium_eks.facts import catalog
from trainium_eks.facts.catalog import (
    INSTANCE_CATALOG,
    Accelerator,
    instance_facts,
)
from trainium_eks.facts.pricing import hourly_price
from trainium_eks.manifests.addons.efa_device_plugin import efa_instance_types

GPU_ROWS = {
    # name: (vCPUs, memory GiB, GPUs, network cards, EFA interfaces, us-east-1 USD/hour)
    "g5.xlarge": (4, 16, 1, 1, 0, 1.006),
    "g5.12xlarge": (48, 192, 4, 1, 1, 5.672),
    "g5.48xlarge": (192, 768, 8, 1, 1, 16.288),
    "g6.xlarge": (4, 16, 1, 1, 0, 0.8048),
    "g6.12xlarge": (48, 192, 4, 1, 1, 4.6016),
    "g6.48xlarge": (192, 768, 8, 1, 1, 13.3504),
    "g6e.xlarge": (4, 32, 1, 1, 0, 1.861),
    "g6e.12xlarge": (48, 384, 4, 1, 1, 10.49264),
    "g6e.48xlarge": (192, 1536, 8, 4, 4, 30.13118),
    "p4d.24xlarge": (96, 1152, 8, 4, 4, 21.957642),
    "p5.48xlarge": (192, 2048, 8, 32, 32, 55.04),
}


def defined_abbreviations():
    """Abbreviations the catalog's docstring defines: ``- NAME:`` at the start of a bullet or after a sentence."""
    return set(re.findall(r"(?:^- |\. )([A-Z][A-Z0-9-]+):", catalog.__doc__, flags=re.MULTILINE))


@pytest.mark.parametrize("name", GPU_ROWS)
def test_gpu_rows(name):
    vcpus, memory_gib, gpus, network_cards, efa_interfaces, price = GPU_ROWS[name]
    facts = instance_facts(name)
    assert facts.accelerator is Accelerator.NVIDIA
    assert (facts.vcpus, facts.memory_gib, facts.gpus) == (vcpus, memory_gib, gpus)
    assert (facts.network_cards, facts.efa_interfaces) == (network_cards, efa_interfaces)
    assert hourly_price(name, "us-east-1") == price
    assert (facts.neuron_devices, facts.neuron_cores) == (0, 0)


@pytest.mark.parametrize("facts", INSTANCE_CATALOG.values(), ids=lambda f: f.name)
def test_accelerator_counts_match_the_family(facts):
    if facts.accelerator is Accelerator.NVIDIA:
        assert facts.gpus > 0 and facts.neuron_devices == 0
    else:
        assert facts.gpus == 0
    assert facts.efa_interfaces in (0, facts.network_cards), "one EFA per network card, or none"


@pytest.mark.parametrize("facts", INSTANCE_CATALOG.values(), ids=lambda f: f.name)
def test_sources_use_only_defined_abbreviations(facts):
    leading = [segment.split()[0].strip("(,") for segment in facts.sources.split(";") if segment.strip()]
    cited = {word for word in leading if re.fullmatch(r"[A-Z][A-Z0-9-]+", word)}
    assert cited, f"{facts.name} cites no source"
    assert cited <= defined_abbreviations(), f"undefined: {sorted(cited - defined_abbreviations())}"


def test_the_smallest_sizes_have_no_efa_and_the_large_ones_do():
    for family in ("g5", "g6", "g6e"):
        assert not instance_facts(f"{family}.xlarge").efa_supported
        assert instance_facts(f"{family}.12xlarge").efa_supported
        assert instance_facts(f"{family}.48xlarge").efa_supported


def test_the_efa_device_plugin_runs_on_the_efa_gpu_types_only():
    types = set(efa_instance_types())
    assert {"g5.12xlarge", "g6.48xlarge", "g6e.48xlarge", "p4d.24xlarge", "p5.48xlarge"} <= types
    assert not types & {"g5.xlarge", "g6.xlarge", "g6e.xlarge"}


def test_g6e_48xlarge_gets_one_efa_interface_per_network_card():
    interfaces = efa_network_interfaces(instance_facts("g6e.48xlarge"), EfaLayout.IP_OPTIMIZED, ["sg-123"])
    assert [(i.network_card_index, i.device_index, i.interface_type) for i in interfaces] == [
        (0, 0, "efa"),
        (1, 0, "efa-only"),
        (2, 0, "efa-only"),
        (3, 0, "efa-only"),
    ]


EFA_LINK_GBPS = {
    # name: the network bandwidth of EC2's accelerated-computing network specifications (EC2-NET), Gbps
    "trn1.32xlarge": 800,
    "trn1n.32xlarge": 1600,
    "trn2.48xlarge": 3200,
    "p4d.24xlarge": 400,
    "p5.48xlarge": 3200,
    "g5.12xlarge": 40,
    "g5.48xlarge": 100,
    "g6.12xlarge": 40,
    "g6.48xlarge": 100,
    "g6e.12xlarge": 100,
    "g6e.48xlarge": 400,
}


@pytest.mark.parametrize("facts", INSTANCE_CATALOG.values(), ids=lambda f: f.name)
def test_every_efa_type_has_a_link_rate_with_its_source_and_no_other_type_has_one(facts):
    if facts.efa_interfaces > 0:
        assert facts.efa_link_gbps > 0, f"{facts.name} has EFA but no efa_link_gbps"
        assert f"EC2-NET ({facts.efa_link_gbps} Gbps)" in facts.sources
    else:
        assert facts.efa_link_gbps == 0


def test_the_link_rates_are_those_of_the_ec2_network_specifications():
    assert {f.name: f.efa_link_gbps for f in INSTANCE_CATALOG.values() if f.efa_link_gbps} == EFA_LINK_GBPS
