"""List prices: the instances of the catalog per region, an idle cluster's other components, and their conversion to
USD per hour."""

import math
import re

import pytest

from trainium_eks.facts import catalog, pricing
from trainium_eks.facts.catalog import INSTANCE_CATALOG, SAGEMAKER_TRAINING_TYPES, Accelerator
from trainium_eks.facts.pricing import (
    COMPONENTS,
    EFS_STANDARD,
    HOURS_PER_MONTH,
    LUSTRE_PERSISTENT_2_TIERS,
    ON_DEMAND_USD_PER_HOUR_BY_REGION,
    PRICE_GAPS,
    PRICING_REGIONS,
    SAGEMAKER_TRAINING,
    efs_standard_usd_per_hour,
    eks_control_plane_usd_per_hour,
    gp3_usd_per_hour,
    hourly_price,
    lustre_usd_per_hour,
    nat_gateways_usd_per_hour,
    rate,
    sagemaker_training_usd_per_hour,
    usd_per_hour,
)


@pytest.mark.parametrize("name", COMPONENTS)
def test_every_component_records_every_region_with_a_source(name):
    component = COMPONENTS[name]
    assert set(component.usd) == set(PRICING_REGIONS)
    assert component.unit in ("cluster-hour", "gateway-hour", "GB-month")
    assert component.source and component.checked
    for price in component.usd.values():
        assert price is None or (math.isfinite(price) and price > 0)
    if None in component.usd.values():
        assert "not verified" in component.source


def test_every_lustre_tier_is_a_component():
    assert {f"fsx-lustre-persistent-2-{tier}" for tier in LUSTRE_PERSISTENT_2_TIERS} <= set(COMPONENTS)


def test_list_rates():
    assert rate("eks-control-plane", "us-west-2") == 0.10
    assert rate("eks-control-plane-extended-support", "us-east-1") == 0.60
    assert rate("nat-gateway", "us-east-2") == 0.045
    assert rate("ebs-gp3", "us-east-2") == 0.08
    assert [rate(f"fsx-lustre-persistent-2-{tier}", "us-east-1") for tier in LUSTRE_PERSISTENT_2_TIERS] == [
        0.145,
        0.21,
        0.34,
        0.60,
    ]
    assert [rate("efs-standard", region) for region in PRICING_REGIONS] == [0.30, 0.30, 0.30]


def test_efs_standard_in_ohio_and_oregon_rests_on_the_2017_offer_records():
    """us-east-2 and us-west-2 come from the Price List records of SKUs R3JWPWRUN558WBDE and GQN8D8ZABJSBVTUG."""
    assert efs_standard_usd_per_hour("us-east-2", 100) == pytest.approx(0.30 * 100 / 730)
    assert efs_standard_usd_per_hour("us-west-2", 1000) == pytest.approx(0.30 * 1000 / 730)
    assert "R3JWPWRUN558WBDE" in EFS_STANDARD.source and "GQN8D8ZABJSBVTUG" in EFS_STANDARD.source


@pytest.mark.parametrize("region", ["us-east-2", "us-west-2"])
@pytest.mark.parametrize("tier", LUSTRE_PERSISTENT_2_TIERS)
def test_lustre_outside_us_east_1_stays_unverified(tier, region):
    assert rate(f"fsx-lustre-persistent-2-{tier}", region) is None
    assert "not verified" in COMPONENTS[f"fsx-lustre-persistent-2-{tier}"].source


def test_hourly_components_are_not_converted():
    assert eks_control_plane_usd_per_hour("us-east-1") == 0.10
    assert eks_control_plane_usd_per_hour("us-east-1", extended_support=True) == 0.60
    assert nat_gateways_usd_per_hour("us-west-2", 2) == pytest.approx(0.09)


def test_storage_is_converted_from_gb_months_with_730_hours():
    assert HOURS_PER_MONTH == 730
    assert gp3_usd_per_hour("us-east-1", 2 * 500) == pytest.approx(0.08 * 1000 / 730)
    assert lustre_usd_per_hour("us-east-1", 1200, 250) == pytest.approx(0.21 * 1200 / 730)
    assert efs_standard_usd_per_hour("us-east-1", 100) == pytest.approx(0.30 * 100 / 730)
    assert usd_per_hour("ebs-gp3", "us-west-2", 0) == 0


@pytest.mark.parametrize(
    "value",
    [
        lambda: rate("nat-gateway", "eu-west-1"),  # a region the module does not record
        lambda: rate("load-balancer", "us-east-1"),  # a component it does not price
        lambda: usd_per_hour("nat-gateway", "mars-north-1"),
        lambda: lustre_usd_per_hour("us-west-2", 1200, 250),  # recorded as not verified
        lambda: lustre_usd_per_hour("us-east-1", 1200, 200),  # a PERSISTENT_1 tier
        lambda: lustre_usd_per_hour("us-east-2", 2400, 125),  # recorded as not verified
        lambda: efs_standard_usd_per_hour("eu-west-1", 10),  # a region the module does not record
        lambda: eks_control_plane_usd_per_hour("eu-central-1"),
    ],
)
def test_none_without_a_verified_price(value):
    assert value() is None


@pytest.mark.parametrize("quantity", [-1, math.nan, math.inf, True, "10"])
def test_a_quantity_must_be_a_finite_number_of_at_least_zero(quantity):
    with pytest.raises(ValueError, match="quantity="):
        usd_per_hour("ebs-gp3", "us-east-1", quantity)


def test_sagemaker_training_prices_the_workflows_instance_types():
    assert tuple(SAGEMAKER_TRAINING) == SAGEMAKER_TRAINING_TYPES


@pytest.mark.parametrize("instance_type", SAGEMAKER_TRAINING)
def test_every_sagemaker_training_rate_records_every_region_with_a_source(instance_type):
    training = SAGEMAKER_TRAINING[instance_type]
    assert set(training.usd) == set(PRICING_REGIONS)
    assert training.unit == "instance-hour" and not training.monthly
    assert training.source and training.checked
    for region, price in training.usd.items():
        if price is None:
            assert f"{region} not verified" in training.source or "not verified in any region" in training.source
        else:
            assert math.isfinite(price) and price > 0
            assert f"{region}: SM-" in training.source


def test_sagemaker_training_list_rates():
    """The Training component's rates, as the Price List records quoted by SM-USE1-CSV, SM-USE1-P4D and SM-USW2-PL
    give them."""
    assert sagemaker_training_usd_per_hour("ml.m5.xlarge", "us-east-1") == 0.23
    assert sagemaker_training_usd_per_hour("ml.g5.xlarge", "us-east-1") == 1.408
    assert sagemaker_training_usd_per_hour("ml.g6.xlarge", "us-east-1") == 1.127
    assert sagemaker_training_usd_per_hour("ml.p4d.24xlarge", "us-east-1") == 25.251
    assert [
        sagemaker_training_usd_per_hour(f"ml.{family}.{size}", "us-west-2")
        for family in ("g5", "g6", "g6e")
        for size in ("xlarge", "12xlarge", "48xlarge")
    ] == [1.408, 7.09, 20.36, 1.127, 5.752, 16.688, 2.61, 13.12, 37.66]


@pytest.mark.parametrize(("instance_type", "ec2_type"), [("ml.m5.xlarge", "m5.xlarge"), ("ml.g5.xlarge", "g5.xlarge")])
def test_sagemaker_training_costs_more_than_the_ec2_instance(instance_type, ec2_type):
    """The SageMaker rate is its own price, not the EC2 one: the premium is why neither may stand in for the other."""
    assert sagemaker_training_usd_per_hour(instance_type, "us-east-1") > hourly_price(ec2_type, "us-east-1")


@pytest.mark.parametrize("instance_type", SAGEMAKER_TRAINING)
def test_sagemaker_training_in_ohio_stays_unverified(instance_type):
    assert sagemaker_training_usd_per_hour(instance_type, "us-east-2") is None


@pytest.mark.parametrize(
    ("instance_type", "region"),
    [
        ("ml.p5.48xlarge", "us-east-1"),  # only tables that name no component, or older rates
        ("ml.p5.48xlarge", "us-west-2"),
        ("ml.p4d.24xlarge", "us-west-2"),
        ("ml.m5.xlarge", "us-west-2"),
        ("ml.m6i.xlarge", "us-east-1"),
        ("ml.g5.12xlarge", "us-east-1"),
        ("ml.g6e.48xlarge", "us-east-1"),
        ("ml.trn1.32xlarge", "us-east-1"),
        ("ml.trn1.32xlarge", "us-west-2"),
        ("ml.trn2.48xlarge", "us-west-2"),
        ("ml.g5.xlarge", "eu-west-1"),  # a region the module does not record
        ("g5.xlarge", "us-east-1"),  # the EC2 name, not a SageMaker type
        ("ml.g4dn.xlarge", "us-east-1"),  # a type the workflow does not offer
        ("ML.G5.XLARGE", "us-east-1"),
    ],
)
def test_sagemaker_training_none_without_a_verified_price(instance_type, region):
    assert sagemaker_training_usd_per_hour(instance_type, region) is None


# --- prices per region ---------------------------------------------------------------------------------------------


def test_every_catalog_type_has_a_price_row_and_nothing_else_has():
    assert set(ON_DEMAND_USD_PER_HOUR_BY_REGION) == set(INSTANCE_CATALOG)


@pytest.mark.parametrize("name", INSTANCE_CATALOG)
def test_every_type_is_priced_in_the_catalog_regions_or_says_why_not(name):
    prices = ON_DEMAND_USD_PER_HOUR_BY_REGION[name]
    assert set(PRICING_REGIONS) <= set(prices)
    missing = [region for region in PRICING_REGIONS if prices[region] is None]
    if missing:
        assert name in PRICE_GAPS and PRICE_GAPS[name]
    for region, price in prices.items():
        assert re.fullmatch(r"[a-z]{2}-[a-z]+-[0-9]", region), region
        assert price is None or (isinstance(price, float) and math.isfinite(price) and price > 0), (region, price)


def test_no_gap_is_documented_for_a_fully_priced_type():
    for name in PRICE_GAPS:
        assert None in ON_DEMAND_USD_PER_HOUR_BY_REGION[name].values(), name


def test_the_three_us_regions_cost_the_same_for_the_gpu_types():
    for name in (facts.name for facts in INSTANCE_CATALOG.values() if facts.accelerator is Accelerator.NVIDIA):
        east_1, east_2, west_2 = (hourly_price(name, region) for region in PRICING_REGIONS)
        assert east_1 == pytest.approx(east_2, abs=1e-5) and east_1 == pytest.approx(west_2, abs=1e-5)


GENERAL_PURPOSE_PRICES = {"m7i.xlarge": 0.2016, "m6i.xlarge": 0.192, "m5.xlarge": 0.192}
"""USD per hour in each of us-east-1, us-east-2 and us-west-2 (PRICE; SKYPILOT for the last two)."""


@pytest.mark.parametrize("name", GENERAL_PURPOSE_PRICES)
def test_the_general_purpose_types_are_priced_in_every_catalog_region(name):
    assert [hourly_price(name, region) for region in PRICING_REGIONS] == [GENERAL_PURPOSE_PRICES[name]] * 3
    assert name not in PRICE_GAPS


def test_only_trn2_lacks_a_price_in_the_catalog_regions():
    unpriced = {name for name, prices in ON_DEMAND_USD_PER_HOUR_BY_REGION.items() if None in prices.values()}
    assert unpriced == set(PRICE_GAPS) == {"trn2.48xlarge"}


def test_the_instance_price_sources_are_defined():
    defined = set(re.findall(r"^- ([A-Z][A-Z0-9-]+):", pricing.__doc__, flags=re.MULTILINE))
    assert {"PRICE", "VANTAGE", "SKYPILOT"} <= defined


def test_the_old_catalog_names_of_the_prices_still_work_and_warn():
    with pytest.warns(DeprecationWarning, match=r"catalog\.hourly_price is now trainium_eks\.facts\.pricing"):
        assert catalog.hourly_price is hourly_price
    with pytest.warns(DeprecationWarning, match="PRICING_REGIONS"):
        assert catalog.CATALOG_REGIONS is PRICING_REGIONS
    with pytest.warns(DeprecationWarning, match="hourly_price"):
        assert INSTANCE_CATALOG["trn1.32xlarge"].on_demand_usd_per_hour == 21.5


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
