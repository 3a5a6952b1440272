"""Regions and their Availability Zone IDs.

AZ IDs (``usw2-az4``) name the same physical zone in every account, unlike AZ names (``us-west-2a``), so the
library places subnets by ID and needs no lookup at synth. An AZ ID starts with the region's short code
(``usw2`` -> ``us-west-2``).

Source of the AZ ID lists: AWS RAM user guide, "Availability Zone IDs for your AWS resources"
(https://docs.aws.amazon.com/ram/latest/userguide/working-with-az-ids.html) and the AWS Regions and Availability
Zones page (https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-availability-zones.html), read
2026-11.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

AZ_IDS_BY_REGION: Dict[str, Tuple[str, ...]] = {
    "us-east-1": ("use1-az1", "use1-az2", "use1-az3", "use1-az4", "use1-az5", "use1-az6"),
    "us-east-2": ("use2-az1", "use2-az2", "use2-az3"),
    "us-west-1": ("usw1-az1", "usw1-az3"),
    "us-west-2": ("usw2-az1", "usw2-az2", "usw2-az3", "usw2-az4"),
    "ca-central-1": ("cac1-az1", "cac1-az2", "cac1-az4"),
    "sa-east-1": ("sae1-az1", "sae1-az2", "sae1-az3"),
    "eu-central-1": ("euc1-az1", "euc1-az2", "euc1-az3"),
    "eu-west-1": ("euw1-az1", "euw1-az2", "euw1-az3"),
    "eu-west-2": ("euw2-az1", "euw2-az2", "euw2-az3"),
    "eu-west-3": ("euw3-az1", "euw3-az2", "euw3-az3"),
    "eu-north-1": ("eun1-az1", "eun1-az2", "eun1-az3"),
    "ap-northeast-1": ("apne1-az1", "apne1-az2", "apne1-az4"),
    "ap-northeast-2": ("apne2-az1", "apne2-az2", "apne2-az3", "apne2-az4"),
    "ap-south-1": ("aps1-az1", "aps1-az2", "aps1-az3"),
    "ap-southeast-1": ("apse1-az1", "apse1-az2", "apse1-az3"),
    "ap-southeast-2": ("apse2-az1", "apse2-az2", "apse2-az3"),
    "ap-southeast-4": ("apse4-az1", "apse4-az2", "apse4-az3"),
}
"""The AZ IDs of each region the library knows."""

EKS_UNSUPPORTED_CONTROL_PLANE_AZ_IDS: Tuple[str, ...] = ("use1-az3", "usw1-az2", "cac1-az3")
"""AZ IDs where EKS does not create control-plane network interfaces.

Source: Amazon EKS user guide, "View Amazon EKS networking requirements for VPC and subnets"
(https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html), subnet requirements.
"""


NODE_AZ_ID_BY_REGION: Dict[str, str] = {"us-west-2": "usw2-az4", "us-east-1": "use1-az6", "us-east-2": "use2-az3"}
"""The default AZ ID of every stack's nodes in a region: the Trainium AZ of the AWS samples (aws-neuron-eks-samples
``scripts/determine_eks_azs.sh``: usw2-az4, use1-az6; data-on-eks ``ai-ml/trainium-inferentia/main.tf``: use2-az3),
each one the instance catalog knows to offer trn1.32xlarge, so that a Trainium group fits in any stack. In another
region the default app asks for the stack's AZ ID key."""


def region_of_az_id(az_id: str) -> Optional[str]:
    """The region an AZ ID belongs to, or None when the library does not know the ID."""
    for region, az_ids in AZ_IDS_BY_REGION.items():
        if az_id in az_ids:
            return region
    return None


EKS_REGISTRY_ACCOUNTS: Dict[str, str] = {
    **{
        region: "602401143452"
        for region in (
            "us-east-1",
            "us-east-2",
            "us-west-1",
            "us-west-2",
            "ca-central-1",
            "sa-east-1",
            "eu-central-1",
            "eu-west-1",
            "eu-west-2",
            "eu-west-3",
            "eu-north-1",
            "ap-south-1",
            "ap-northeast-1",
            "ap-northeast-2",
            "ap-northeast-3",
            "ap-southeast-1",
            "ap-southeast-2",
        )
    },
    "af-south-1": "877085696533",
    "ap-east-1": "800184023465",
    "ap-south-2": "900889452093",
    "ap-southeast-3": "296578399912",
    "ap-southeast-4": "491585149902",
    "ap-southeast-5": "151610086707",
    "ap-southeast-7": "121268973566",
    "ca-west-1": "761377655185",
    "eu-central-2": "900612956339",
    "eu-south-1": "590381155156",
    "eu-south-2": "455263428931",
    "il-central-1": "066635153087",
    "me-central-1": "759879836304",
    "me-south-1": "558608220178",
    "mx-central-1": "730335286997",
}
"""Account of the Amazon EKS container image registry of each region
(``<account>.dkr.ecr.<region>.amazonaws.com``), which serves the EFA device plugin image. Source: Amazon EKS user
guide, "View Amazon container image registries for Amazon EKS add-ons" (add-ons-images.html;
awsdocs/amazon-eks-user-guide@1cc6ebb latest/ug/workloads/add-ons-images.adoc), read 2026-11-30."""


def eks_registry(region: str) -> str:
    """The EKS container image registry host of ``region``; raises KeyError for a region the table lacks."""
    try:
        account = EKS_REGISTRY_ACCOUNTS[region]
    except KeyError:
        raise KeyError(f"no EKS image registry known for region {region!r}") from None
    return f"{account}.dkr.ecr.{region}.amazonaws.com"


def partition_of(region: str) -> str:
    """The AWS partition of ``region``: ``aws-cn`` for China, ``aws-us-gov`` for GovCloud, else ``aws``."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"
