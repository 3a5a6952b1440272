"""facts.regions: AZ IDs by region, the AZs EKS refuses, the default node AZs, EKS registries and partitions."""

import re

import pytest

from trainium_eks.facts.catalog import instance_facts
from trainium_eks.facts.regions import (
    AZ_IDS_BY_REGION,
    EKS_REGISTRY_ACCOUNTS,
    EKS_UNSUPPORTED_CONTROL_PLANE_AZ_IDS,
    NODE_AZ_ID_BY_REGION,
    eks_registry,
    partition_of,
    region_of_az_id,
)

DIRECTIONS = {
    "east": "e",
    "west": "w",
    "north": "n",
    "south": "s",
    "central": "c",
    "northeast": "ne",
    "southeast": "se",
    "northwest": "nw",
    "southwest": "sw",
}


def short_code(region: str) -> str:
    """``us-west-2`` -> ``usw2``, ``ap-northeast-1`` -> ``apne1``: the prefix of the region's AZ IDs."""
    area, direction, number = region.split("-")
    return f"{area}{DIRECTIONS[direction]}{number}"


@pytest.mark.parametrize("region", sorted(AZ_IDS_BY_REGION))
def test_every_az_id_is_the_regions_short_code_and_a_zone_number_listed_once_in_order(region):
    az_ids = AZ_IDS_BY_REGION[region]
    assert az_ids, region
    numbers = []
    for az_id in az_ids:
        match = re.fullmatch(rf"{short_code(region)}-az([0-9]+)", az_id)
        assert match, f"{az_id} does not belong to {region}"
        numbers.append(int(match.group(1)))
    assert numbers == sorted(set(numbers)), az_ids


def test_region_of_az_id_finds_each_known_id_and_nothing_else():
    all_ids = [az for ids in AZ_IDS_BY_REGION.values() for az in ids]
    assert len(all_ids) == len(set(all_ids)), "an AZ ID is in one region only"
    for region, ids in AZ_IDS_BY_REGION.items():
        assert {region_of_az_id(az) for az in ids} == {region}
    for unknown in ("usw2-az9", "usw2-az4 ", "USW2-AZ4", "us-west-2a", "", "usw1-az2"):
        assert region_of_az_id(unknown) is None, unknown


def test_every_region_keeps_two_az_ids_for_an_eks_control_plane():
    known_prefixes = {short_code(region) for region in AZ_IDS_BY_REGION}
    for az_id in EKS_UNSUPPORTED_CONTROL_PLANE_AZ_IDS:
        assert az_id.split("-az")[0] in known_prefixes, az_id
    for region, ids in AZ_IDS_BY_REGION.items():
        usable = [az for az in ids if az not in EKS_UNSUPPORTED_CONTROL_PLANE_AZ_IDS]
        assert len(usable) >= 2, f"{region}: EKS needs subnets in two AZs, it accepts only {usable}"


@pytest.mark.parametrize("region", sorted(NODE_AZ_ID_BY_REGION))
def test_the_default_node_az_of_a_region_is_one_of_its_zones_that_offers_trn1(region):
    az_id = NODE_AZ_ID_BY_REGION[region]
    assert region_of_az_id(az_id) == region
    assert az_id not in EKS_UNSUPPORTED_CONTROL_PLANE_AZ_IDS, "the node AZ also holds a control-plane subnet"
    assert az_id in instance_facts("trn1.32xlarge").offered_az_ids[region]


def test_every_known_region_has_an_eks_registry_and_an_unknown_one_is_refused_by_name():
    assert set(AZ_IDS_BY_REGION) <= set(EKS_REGISTRY_ACCOUNTS), "the EFA device plugin image comes from there"
    for region, account in EKS_REGISTRY_ACCOUNTS.items():
        assert re.fullmatch(r"[0-9]{12}", account), (region, account)
        assert eks_registry(region) == f"{account}.dkr.ecr.{region}.amazonaws.com"
    assert eks_registry("us-west-2") == "602401143452.dkr.ecr.us-west-2.amazonaws.com"
    with pytest.raises(KeyError, match="no EKS image registry known for region 'eu-mars-1'"):
        eks_registry("eu-mars-1")


@pytest.mark.parametrize(
    "region,partition",
    [
        ("cn-north-1", "aws-cn"),
        ("cn-northwest-1", "aws-cn"),
        ("us-gov-west-1", "aws-us-gov"),
        ("us-gov-east-1", "aws-us-gov"),
        ("us-west-2", "aws"),
        ("eu-central-1", "aws"),
    ],
)
def test_the_partition_follows_the_region_name(region, partition):
    assert partition_of(region) == partition
