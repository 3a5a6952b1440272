"""The GPU rows of the instance catalog and the on-demand prices per region of every row."""

import math
import re

import pytest

from trainium_eks.constructs.efa_layout import EfaLayout, efa_network_interfaces
from trainium_eks.facts import catalog
from trainium_eks.facts.catalog import (
    CATALOG_REGIONS,
    INSTANCE_CATALOG,
    ON_DEMAND_USD_PER_HOUR_BY_REGION,
    PRICE_GAPS,
    Accelerator,
    hourly_price,
    instance_facts,
)
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
    assert facts.on_demand_usd_per_hour == price
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


# --- prices per region ---------------------------------------------------------------------------------------------


def test_every_catalog_type_has_a_price_row_and_nothing_else_has():
    assert set(ON_DEMAND_USD_PER_HOUR_BY_REGION) == set(INSTANCE_CATALOG)


@pytest.mark.parametrize("name", INSTANCE_CATALOG)
def test_every_type_is_priced_in_the_catalog_regions_or_says_why_not(name):
    prices = ON_DEMAND_USD_PER_HOUR_BY_REGION[name]
    assert set(CATALOG_REGIONS) <= set(prices)
    missing = [region for region in CATALOG_REGIONS if prices[region] is None]
    if missing:
        assert name in PRICE_GAPS and PRICE_GAPS[name]
    for region, price in prices.items():
        assert re.fullmatch(r"[a-z]{2}-[a-z]+-[0-9]", region), region
        assert price is None or (isinstance(price, float) and math.isfinite(price) and price > 0), (region, price)


def test_no_gap_is_documented_for_a_fully_priced_type():
    for name in PRICE_GAPS:
        assert None in ON_DEMAND_USD_PER_HOUR_BY_REGION[name].values(), name


@pytest.mark.parametrize("facts", INSTANCE_CATALOG.values(), ids=lambda f: f.name)
def test_the_us_east_1_price_is_the_rows_price(facts):
    assert hourly_price(facts.name, "us-east-1") == facts.on_demand_usd_per_hour


def test_the_three_us_regions_cost_the_same_for_the_gpu_types():
    for name in GPU_ROWS:
        east_1, east_2, west_2 = (hourly_price(name, region) for region in CATALOG_REGIONS)
        assert east_1 == pytest.approx(east_2, abs=1e-5) and east_1 == pytest.approx(west_2, abs=1e-5)


GENERAL_PURPOSE_PRICES = {"m7i.xlarge": 0.2016, "m6i.xlarge": 0.192, "m5.xlarge": 0.192}
"""USD per hour in each of us-east-1, us-east-2 and us-west-2 (PRICE; SKYPILOT for the last two)."""


@pytest.mark.parametrize("name", GENERAL_PURPOSE_PRICES)
def test_the_general_purpose_types_are_priced_in_every_catalog_region(name):
    assert [hourly_price(name, region) for region in CATALOG_REGIONS] == [GENERAL_PURPOSE_PRICES[name]] * 3
    assert name not in PRICE_GAPS


def test_only_trn2_lacks_a_price_in_the_catalog_regions():
    unpriced = {name for name, prices in ON_DEMAND_USD_PER_HOUR_BY_REGION.items() if None in prices.values()}
    assert unpriced == set(PRICE_GAPS) == {"trn2.48xlarge"}


def test_the_regional_price_sources_are_defined():
    assert {"PRICE", "VANTAGE", "SKYPILOT"} <= defined_abbreviations()


def test_hourly_price():
    assert hourly_price("g5.12xlarge", "us-west-2") == 5.672
    assert hourly_price("g6e.xlarge", "eu-central-1") == 2.327
    assert hourly_price("p5.48xlarge", "ap-northeast-1") == 68.8
    assert hourly_price("trn1.32xlarge", "us-east-2") == 21.5


@pytest.mark.parametrize(
    "instance_type,region",
    [
        ("trn2.48xlarge", "us-east-2"),  # Capacity Blocks only
        ("trn2.48xlarge", "us-west-2"),  # Capacity Blocks only
        ("m7i.xlarge", "eu-west-1"),  # the catalog records no price there
        ("g6e.xlarge", "eu-west-1"),  # the source lists no price there
        ("trn1.32xlarge", "ap-south-1"),  # offered, price not known
        ("g5.xlarge", "mars-north-1"),
        ("x9.huge", "us-east-1"),
    ],
)
def test_hourly_price_is_none_without_a_known_price(instance_type, region):
    assert hourly_price(instance_type, region) is None
