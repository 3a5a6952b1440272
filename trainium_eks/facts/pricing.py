"""What a training cluster costs besides its nodes, per region: the list prices of the components that bill while the
cluster sits idle, and small functions that turn them into USD per hour.

Instance prices live in :mod:`trainium_eks.facts.catalog` (:func:`~trainium_eks.facts.catalog.hourly_price`); this
module holds the rest: the EKS control plane, NAT gateways, FSx for Lustre, EFS and the gp3 root volumes of the nodes,
and the SageMaker training instances of the hybrid workflow (:data:`SAGEMAKER_TRAINING`,
:func:`sagemaker_training_usd_per_hour`). Every figure is an on-demand list price in USD, before tax, free tier and
discounts; each :class:`Rate` names its source and when it was read. A price the module could not verify is ``None``,
never a guess, and the functions then return ``None``.

Sources, by abbreviation:

- OFFERS-2026-08: AWS Price List bulk offer files for us-east-1, versions AmazonEKS 20260831092157 and AmazonEC2
  20260831181331, with the SKUs named in each rate, as recorded (version, SKU, rate) by a public cost model; the offer
  files themselves were not fetched here. Read 2026-12-01.
- OFFERS-USW2-2026-10: the AWS Price List current offers for us-west-2 (AmazonEC2 usage types
  ``USW2-EBS:VolumeUsage.gp3`` and ``USW2-NatGateway-Hours``; AmazonEKS), as checked on 2026-10-04 by a public EKS lab
  guide that quotes their rates. Read 2026-12-01.
- EKS-BLOG: AWS Containers blog, "Amazon EKS extended support for Kubernetes versions pricing" (2024): "$0.60 per
  cluster per hour" in extended support, "$0.10 per cluster per hour" in standard support, one rate with no regional
  qualification. Read 2026-12-01.
- OPENCOST: opencost ``pkg/cloud/aws/provider_test.go``, which embeds the AWS Price List record of SKU
  M6UGCCQ3CDJQAA37: "$0.08 per GB-month of General Purpose (gp3) provisioned storage - US East (Ohio)", effective
  2023-03-01. Read 2026-12-01.
- THIRD-PARTY: cost guides that quote the AWS pricing pages (cloudburn.io "AWS NAT Gateway Pricing", 2026-02-24: one
  NAT gateway in US East (Ohio) costs $32.40 for 720 hours; c3x.dev FSx for Lustre page and a public cost tool's table
  of FSx for Lustre us-east-1 rates: PERSISTENT_2 SSD 125/250/500/1000 MB/s/TiB at 0.145/0.21/0.34/0.60 USD per
  GB-month; factualminds.com "Amazon EFS Pricing", 2026-06-13: Standard $0.30/GB-month in us-east-1). Read
  2026-12-01. Weaker than an AWS source: the rows that rest on them say so.
- EFS-PAGE: the Amazon EFS pricing page (aws.amazon.com/efs/pricing), an older stored copy: "$0.30/GB-month" for
  Standard storage, without naming the region (corroborates THIRD-PARTY, which names us-east-1). Read 2026-12-01.
- OFFERS-EFS-2017: the AWS Price List bulk offer file AmazonEFS version 20170721195242 (published 2017-07-21, rates
  effective 2017-06-01), as recorded by ligoj/plugin-prov-aws in ``src/test/resources/mock-server/aws/pricing-efs.csv``
  (commit 80aeb26) and ``src/test/resources/mock-server/aws/offers/v1.0/aws/AmazonEFS/current/index.csv`` (commit
  2c02801): "Storage used in GB-months", storage class General Purpose (the only class then), 0.30 USD/GB-month in
  US East (N. Virginia) (SKU YFV3RHAD3CDDP3VE), US East (Ohio) (SKU R3JWPWRUN558WBDE, USE2-TimedStorage-ByteHrs) and
  US West (Oregon) (SKU GQN8D8ZABJSBVTUG, USW2-TimedStorage-ByteHrs). Old, but not contradicted: its us-east-1 rate
  is the one EFS-PAGE and THIRD-PARTY (2026) still give. Read 2026-12-01.
- SM-USE1-CSV: HBX814/AmazonMLChallenge ``.claude/skills/er-compute-and-aws/reference-aws-prices-throughput.md``
  (commit 8f86b16), table "SageMaker AI on-demand, USD per hour, per component", column "us-east-1 Train" (usage type
  ``Train``), parsed from the AWS Price List bulk CSV of the AmazonSageMaker offer published 2026-09-24: ml.m5.xlarge
  0.2300, ml.g5.xlarge 1.4080, ml.g6.xlarge 1.1270. Read 2026-12-01.
- SM-USE1-P4D: spore-host/truffle ``pkg/aws/sagemaker_component_test.go`` (added in commit 21bfbe8, 2026-07-27; read
  at commit 8125bcd): AmazonSageMaker Price List rates "measured 2026-07-27 in us-east-1 for ml.p4d.24xlarge",
  "Cluster (HyperPod) $25.910", "Hosting/Training/... $25.251"; its CHANGELOG gives "a real rate of $25.25/hr". Read
  2026-12-01.
- SM-USW2-PL: OKUniversity/agentcore-public-stack ``backend/src/apis/app_api/fine_tuning/pricing.py`` (commit
  af09e6d), ``TRAINING_COST_PER_HOUR``: "us-west-2 on-demand USD/hour, taken from the AWS Price List API (aws pricing
  get-products --service-code AmazonSageMaker), filtered to the Training and BatchTransform components", printed by
  ``backend/scripts/refresh_instance_pricing.py`` (same commit: regionCode us-west-2, component Training, families
  g5, g6 and g6e only). The date of the query is not stated. Read 2026-12-01.

SageMaker training prices are not EC2 prices (ml.g5.xlarge trains at 1.408 USD/hour, g5.xlarge costs 1.006 on EC2)
and differ slightly between SageMaker components (ml.g5.xlarge: 1.408 to train, 1.41 for a notebook, SM-USE1-CSV), so
only a figure a source gives for the Training component is recorded. Not used: price tables that do not name the
component (or price Studio, hosting or HyperPod), older tables that still give ml.p4d.24xlarge at 37.688 USD/hour
(superseded: SM-USE1-P4D), and a US East (Ohio) table that names no component and prices ml.m5.xlarge above
ml.m5.2xlarge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional, Tuple

HOURS_PER_MONTH = 730
"""Hours in the month that AWS pricing uses to turn a monthly rate into an hourly one (8,760 hours a year / 12): a
GB-month rate divided by 730 is the rate per GB-hour. A real month has 672 to 744 hours, so a monthly bill differs
slightly from 730 times the hourly figure."""

PRICING_REGIONS: Tuple[str, ...] = ("us-east-1", "us-east-2", "us-west-2")
"""Regions every :class:`Rate` of this module records, with a price or ``None`` (the catalog's
:data:`~trainium_eks.facts.catalog.CATALOG_REGIONS`)."""

LUSTRE_PERSISTENT_2_TIERS: Tuple[int, ...] = (125, 250, 500, 1000)
"""Throughput tiers of FSx for Lustre PERSISTENT_2 SSD file systems, MB/s per TiB of storage (FSx API reference,
``PerUnitStorageThroughput``)."""


@dataclass(frozen=True)
class Rate:
    """The list price of one billing component, per region.

    :param unit: What one unit is: ``"cluster-hour"``, ``"gateway-hour"``, ``"instance-hour"`` (hourly rates) or
        ``"GB-month"`` (storage, converted to hours with :data:`HOURS_PER_MONTH`).
    :param usd: Region -> USD per unit, or ``None`` where the price could not be verified.
    :param source: Where each figure comes from (abbreviations of the module docstring).
    :param checked: When the sources were read.
    """

    unit: str
    usd: Mapping[str, Optional[float]]
    source: str
    checked: str

    @property
    def monthly(self) -> bool:
        """Whether the rate is per month (storage) rather than per hour."""
        return self.unit.endswith("-month")


EKS_CONTROL_PLANE = Rate(
    unit="cluster-hour",
    usd={"us-east-1": 0.10, "us-east-2": 0.10, "us-west-2": 0.10},
    source="us-east-1: OFFERS-2026-08 (AmazonEKS SKU ZYWMR684YSMFHWEU, 0.10/cluster-hour); us-west-2: "
    "OFFERS-USW2-2026-10; us-east-2: EKS-BLOG (one rate, no regional qualification)",
    checked="2026-12-01",
)
"""An EKS cluster whose Kubernetes version is in standard support."""

EKS_CONTROL_PLANE_EXTENDED_SUPPORT = Rate(
    unit="cluster-hour",
    usd={"us-east-1": 0.60, "us-east-2": 0.60, "us-west-2": 0.60},
    source="us-east-1: OFFERS-2026-08 (0.10 plus the extended-support surcharge, SKU M7977BSVFGDUJZ67, "
    "0.50/cluster-hour); us-west-2: OFFERS-USW2-2026-10 (0.60); us-east-2: EKS-BLOG ($0.60 in total)",
    checked="2026-12-01",
)
"""An EKS cluster whose Kubernetes version is in extended support (in total, not on top of the standard rate)."""

NAT_GATEWAY = Rate(
    unit="gateway-hour",
    usd={"us-east-1": 0.045, "us-east-2": 0.045, "us-west-2": 0.045},
    source="us-east-1: OFFERS-2026-08 (AmazonEC2 SKU M2YSHUBETB3JX4M4, NatGateway-Hours); us-west-2: "
    "OFFERS-USW2-2026-10; us-east-2: THIRD-PARTY only ($32.40 / 720 h)",
    checked="2026-12-01",
)
"""One NAT gateway, provisioned time only: the charge per GB it processes (0.045 USD/GB in us-east-1, SKU
59S5R83GFPUAGVR5) and data transfer are excluded, because an idle cluster moves almost no data."""

LUSTRE_PERSISTENT_2: Mapping[int, Rate] = {
    tier: Rate(
        unit="GB-month",
        usd={"us-east-1": price, "us-east-2": None, "us-west-2": None},
        source="us-east-1: THIRD-PARTY (two independent tables quoting the FSx for Lustre pricing page); us-east-2 "
        "and us-west-2 not verified: no source of their PERSISTENT_2 rates was found (searched 2026-12-01: the stored "
        "copies of the FSx for Lustre pricing page hold only its us-east-1 examples; the cost tools and Price List "
        "records found in public code price us-east-1 only, or other FSx file system types)",
        checked="2026-12-01",
    )
    for tier, price in ((125, 0.145), (250, 0.21), (500, 0.34), (1000, 0.60))
}
"""FSx for Lustre PERSISTENT_2 SSD storage by throughput tier (MB/s/TiB); the throughput is included in the storage
price. Backups, metadata IOPS and data transfer are excluded."""

EFS_STANDARD = Rate(
    unit="GB-month",
    usd={"us-east-1": 0.30, "us-east-2": 0.30, "us-west-2": 0.30},
    source="us-east-1: EFS-PAGE and THIRD-PARTY (2026-06-13), also OFFERS-EFS-2017 (SKU YFV3RHAD3CDDP3VE); us-east-2: "
    "OFFERS-EFS-2017 only (SKU R3JWPWRUN558WBDE, 0.30); us-west-2: OFFERS-EFS-2017 only (SKU GQN8D8ZABJSBVTUG, 0.30). "
    "The us-east-2 and us-west-2 figures rest on a 2017 Price List record: no newer source of them was found",
    checked="2026-12-01",
)
"""Amazon EFS Standard (Regional) storage, per GB stored. Infrequent Access, throughput charges (Elastic throughput
bills reads and writes per GB) and backups are excluded."""

EBS_GP3 = Rate(
    unit="GB-month",
    usd={"us-east-1": 0.08, "us-east-2": 0.08, "us-west-2": 0.08},
    source="us-east-1: OFFERS-2026-08 (AmazonEC2 SKU JG3KUJMBRGHV3N8G); us-east-2: OPENCOST (SKU M6UGCCQ3CDJQAA37); "
    "us-west-2: OFFERS-USW2-2026-10",
    checked="2026-12-01",
)
"""EBS gp3 provisioned storage (the nodes' root volumes), per GB provisioned, with the included 3,000 IOPS and 125
MiB/s; IOPS and throughput provisioned above those, and snapshots, are excluded."""

COMPONENTS: Mapping[str, Rate] = {
    "eks-control-plane": EKS_CONTROL_PLANE,
    "eks-control-plane-extended-support": EKS_CONTROL_PLANE_EXTENDED_SUPPORT,
    "nat-gateway": NAT_GATEWAY,
    **{f"fsx-lustre-persistent-2-{tier}": rate for tier, rate in LUSTRE_PERSISTENT_2.items()},
    "efs-standard": EFS_STANDARD,
    "ebs-gp3": EBS_GP3,
}
"""Every component of an idle cluster this module prices, by name."""


def rate(component: str, region: str) -> Optional[float]:
    """The list price of ``component`` (a key of :data:`COMPONENTS`) in ``region``, in the component's own unit
    (:attr:`Rate.unit`: USD per cluster-hour, gateway-hour or GB-month); None for an unknown component or region, or
    a price the module could not verify."""
    found = COMPONENTS.get(component)
    return None if found is None else found.usd.get(region)


def usd_per_hour(component: str, region: str, quantity: float = 1) -> Optional[float]:
    """What ``quantity`` units of ``component`` cost per hour in ``region``, USD.

    :param component: A key of :data:`COMPONENTS`.
    :param region: An AWS region code.
    :param quantity: Clusters or gateways for hourly rates; GB for storage (``GB-month``) rates, which are divided by
        :data:`HOURS_PER_MONTH`. AWS bills a provisioned size in GiB as that many GB-months (EBS); the same is assumed
        for FSx, whose capacity is set in GiB and priced per GB-month. Default: 1.
    :returns: USD per hour, or None when :func:`rate` is None.
    :raises ValueError: When ``quantity`` is negative or not a finite number.
    """
    if isinstance(quantity, bool) or not isinstance(quantity, (int, float)) or not math.isfinite(quantity):
        raise ValueError(f"quantity={quantity!r}: a finite number of clusters, gateways or GB")
    if quantity < 0:
        raise ValueError(f"quantity={quantity!r}: not negative")
    price = rate(component, region)
    if price is None:
        return None
    hourly = price / HOURS_PER_MONTH if COMPONENTS[component].monthly else price
    return hourly * quantity


def eks_control_plane_usd_per_hour(region: str, *, extended_support: bool = False) -> Optional[float]:
    """One EKS cluster's control plane, USD per hour in ``region``; ``extended_support`` (default False) for a
    Kubernetes version past standard support. None for a region without a verified price."""
    return usd_per_hour("eks-control-plane-extended-support" if extended_support else "eks-control-plane", region)


def nat_gateways_usd_per_hour(region: str, count: int = 1) -> Optional[float]:
    """``count`` NAT gateways (default 1; the library's network has one per AZ), USD per hour in ``region``,
    provisioned time only (data processing excluded). None for a region without a verified price."""
    return usd_per_hour("nat-gateway", region, count)


def lustre_usd_per_hour(region: str, storage_gib: float, throughput_mbps_per_tib: int) -> Optional[float]:
    """An FSx for Lustre PERSISTENT_2 SSD file system of ``storage_gib`` GiB at ``throughput_mbps_per_tib`` MB/s/TiB
    (one of :data:`LUSTRE_PERSISTENT_2_TIERS`), USD per hour in ``region`` (its GB-month price / 730). None for
    another tier or a region without a verified price."""
    return usd_per_hour(f"fsx-lustre-persistent-2-{throughput_mbps_per_tib}", region, storage_gib)


def efs_standard_usd_per_hour(region: str, stored_gb: float) -> Optional[float]:
    """``stored_gb`` GB in EFS Standard storage, USD per hour in ``region`` (GB-month price / 730). None for a
    region without a verified price."""
    return usd_per_hour("efs-standard", region, stored_gb)


def gp3_usd_per_hour(region: str, size_gib: float) -> Optional[float]:
    """``size_gib`` GiB of gp3 volumes (node root volumes: node count x root size), USD per hour in ``region``
    (GB-month price / 730). None for a region without a verified price."""
    return usd_per_hour("ebs-gp3", region, size_gib)


_USE2_NOT_VERIFIED = (
    "us-east-2 not verified: no source of a us-east-2 SageMaker Training rate was found (searched 2026-12-01: "
    "USE2-Train usage types, Price List records with regionCode us-east-2 and component Training, SageMaker price "
    "tables naming US East (Ohio))"
)
_USE1_NOT_VERIFIED = (
    "us-east-1 not verified: the us-east-1 figures found for this type come from tables that do not name the SageMaker "
    "component they price (or price Studio, hosting or HyperPod), or predate the current rates"
)
_USW2_NOT_VERIFIED = (
    "us-west-2 not verified: SM-USW2-PL queried only the g5, g6 and g6e families, and no other us-west-2 Training rate "
    "was found"
)
_TRAINIUM_NOT_VERIFIED = (
    "not verified in any region: no source of a SageMaker Training rate for Trainium types was found (searched "
    "2026-12-01: Train usage types, Price List records with component Training; the tables found give EC2 rates or "
    "name no component)"
)


def _training(use1: Optional[float], usw2: Optional[float], source: str) -> Rate:
    """A SageMaker training rate with ``source`` followed by why each missing region is missing."""
    missing = [
        reason
        for price, reason in ((use1, _USE1_NOT_VERIFIED), (None, _USE2_NOT_VERIFIED), (usw2, _USW2_NOT_VERIFIED))
        if price is None
    ]
    return Rate(
        unit="instance-hour",
        usd={"us-east-1": use1, "us-east-2": None, "us-west-2": usw2},
        source="; ".join(part for part in (source, *missing) if part),
        checked="2026-12-01",
    )


_TRAINIUM = Rate(
    unit="instance-hour",
    usd={region: None for region in PRICING_REGIONS},
    source=_TRAINIUM_NOT_VERIFIED,
    checked="2026-12-01",
)

SAGEMAKER_TRAINING: Mapping[str, Rate] = {
    "ml.m5.xlarge": _training(0.23, None, "us-east-1: SM-USE1-CSV (0.2300)"),
    "ml.m6i.xlarge": _training(None, None, ""),
    "ml.m7i.xlarge": _training(None, None, ""),
    "ml.g5.xlarge": _training(1.408, 1.408, "us-east-1: SM-USE1-CSV (1.4080); us-west-2: SM-USW2-PL (1.408)"),
    "ml.g5.12xlarge": _training(None, 7.09, "us-west-2: SM-USW2-PL (7.09)"),
    "ml.g5.48xlarge": _training(None, 20.36, "us-west-2: SM-USW2-PL (20.36)"),
    "ml.g6.xlarge": _training(1.127, 1.127, "us-east-1: SM-USE1-CSV (1.1270); us-west-2: SM-USW2-PL (1.127)"),
    "ml.g6.12xlarge": _training(None, 5.752, "us-west-2: SM-USW2-PL (5.752)"),
    "ml.g6.48xlarge": _training(None, 16.688, "us-west-2: SM-USW2-PL (16.688)"),
    "ml.g6e.xlarge": _training(None, 2.61, "us-west-2: SM-USW2-PL (2.61)"),
    "ml.g6e.12xlarge": _training(None, 13.12, "us-west-2: SM-USW2-PL (13.12)"),
    "ml.g6e.48xlarge": _training(None, 37.66, "us-west-2: SM-USW2-PL (37.66)"),
    "ml.p4d.24xlarge": _training(25.251, None, "us-east-1: SM-USE1-P4D (25.251, quoted to the tenth of a cent)"),
    "ml.p5.48xlarge": _training(None, None, ""),
    "ml.trn1.2xlarge": _TRAINIUM,
    "ml.trn1.32xlarge": _TRAINIUM,
    "ml.trn1n.32xlarge": _TRAINIUM,
    "ml.trn2.48xlarge": _TRAINIUM,
}
"""On-demand SageMaker AI training instances (the Training component: usage type ``<region>-Train:<type>``), USD per
instance-hour, for the SageMaker instance types of the hybrid workflow
(:data:`trainium_eks.facts.catalog.SAGEMAKER_TRAINING_TYPES`, a test keeps the two in step). Excluded:
the ML storage volume, data transfer, managed spot training and Savings Plans. Sources: SM-USE1-CSV, SM-USE1-P4D and
SM-USW2-PL of the module docstring; us-east-2 has no verified rate yet."""


def sagemaker_training_usd_per_hour(instance_type: str, region: str) -> Optional[float]:
    """One SageMaker training instance of ``instance_type`` (``"ml.g5.xlarge"``: a key of :data:`SAGEMAKER_TRAINING`),
    USD per hour on demand in ``region``. None for an unknown type or region, or a price the module could not verify;
    a job of ``n`` instances costs ``n`` times this while it trains."""
    found = SAGEMAKER_TRAINING.get(instance_type)
    return None if found is None else found.usd.get(region)
