"""Instance catalog: the facts the library needs about each supported EC2 instance type, one row per type.

Every row cites its sources. Abbreviations used in the rows:

- EC2-AC: Amazon EC2 instance types guide, accelerated computing specifications
  (https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html), network cards and EFA per type.
- EC2-GP: the same guide, general purpose specifications (https://docs.aws.amazon.com/ec2/latest/instancetypes/gp.html).
- CNI: aws/amazon-vpc-cni-k8s ``pkg/vpc/vpc_ip_resource_limit.go`` (generated from DescribeInstanceTypes):
  network cards and interfaces per card.
- NEURON-TRN1: Neuron docs, "Trn1/Trn1n architecture" (trn1-arch.rst) and "setup-trn1-multi-node-execution" (EFA
  devices 8 and 16). NEURON-TRN2: Neuron docs, "Trn2 architecture" (trn2-arch.html) and "Logical NeuronCore
  configuration" (64 NeuronCores visible at the default LNC=2).
- PRICE: On-demand Linux price in US East (N. Virginia), USD per hour, from the EC2 on-demand pricing page as
  recorded by aws/karpenter-provider-aws ``pkg/providers/pricing/zz_generated.pricing_aws.go`` (generated
  2026-02-09) and checked against the Pricing API figures of a 2026-10 survey. Other regions may differ.
- OFFER: regions that offer the type, from a survey of ``describe-instance-type-offerings`` in all commercial
  regions of one account (2026-10-03, third-party note); AZ IDs from aws-neuron-eks-samples
  ``scripts/determine_eks_azs.sh`` (us-west-2: usw2-az4, usw2-az3; us-east-1: use1-az6, use1-az5, earlier
  use1-az4), data-on-eks ``ai-ml/trainium-inferentia/main.tf`` (us-east-2: use2-az3) and the same survey (trn2).
  Offerings change; where a region is listed without AZ IDs, the library cannot tell and only warns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping, Optional, Tuple


class Accelerator(Enum):
    """The accelerator family of an instance type."""

    NEURON = "neuron"
    NVIDIA = "nvidia"
    NONE = "none"


@dataclass(frozen=True)
class InstanceFacts:
    """Facts about one EC2 instance type.

    :param name: EC2 instance type name.
    :param vcpus: vCPUs.
    :param memory_gib: Host memory, GiB.
    :param network_cards: Network cards; each can carry one EFA device.
    :param efa_interfaces: EFA devices the type supports (0 without EFA); one per network card.
    :param accelerator: The accelerator family.
    :param neuron_devices: Neuron devices (Trainium chips) the Neuron device plugin advertises as
        ``aws.amazon.com/neuron``.
    :param neuron_cores: NeuronCores the device plugin advertises as ``aws.amazon.com/neuroncore`` at the default
        logical NeuronCore configuration; one training process per core is the Neuron default.
    :param gpus: NVIDIA GPUs (``nvidia.com/gpu``).
    :param on_demand_usd_per_hour: On-demand price (see PRICE), or None when AWS sells the type only through
        Capacity Blocks.
    :param offered_az_ids: Region -> AZ IDs known to offer the type; an empty tuple means the region offers it but
        the AZs are not known. A region missing from a non-empty mapping does not offer the type. An empty mapping
        means nothing is known.
    :param sources: Where each fact comes from.
    """

    name: str
    vcpus: int
    memory_gib: int
    network_cards: int
    efa_interfaces: int
    accelerator: Accelerator
    on_demand_usd_per_hour: Optional[float]
    sources: str
    neuron_devices: int = 0
    neuron_cores: int = 0
    gpus: int = 0
    offered_az_ids: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)

    @property
    def efa_supported(self) -> bool:
        """Whether the type has EFA, and so can run collectives across nodes."""
        return self.efa_interfaces > 0


MAX_NODES_PER_MANAGED_NODE_GROUP = 450
"""Service quota "Nodes per managed node group" of Amazon EKS. Source: Amazon EKS user guide, "View and manage
Amazon EKS and Fargate service quotas" (https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html)."""

_TRN1_OFFERS = {
    "us-west-2": ("usw2-az3", "usw2-az4"),
    "us-east-1": ("use1-az4", "use1-az5", "use1-az6"),
    "us-east-2": ("use2-az3",),
}

INSTANCE_CATALOG: Mapping[str, InstanceFacts] = {
    facts.name: facts
    for facts in (
        InstanceFacts(
            name="trn1.2xlarge",
            vcpus=8,
            memory_gib=32,
            network_cards=1,
            efa_interfaces=0,
            accelerator=Accelerator.NEURON,
            neuron_devices=1,
            neuron_cores=2,
            on_demand_usd_per_hour=1.34375,
            offered_az_ids={"us-east-1": (), "us-east-2": (), "us-west-2": ()},
            sources="NEURON-TRN1 (1 Trainium, 2 NeuronCore-v2, 8 vCPU, 32 GiB; 'EFA is currently not available on "
            "the smaller instance sizes'); CNI (1 card); PRICE; OFFER",
        ),
        InstanceFacts(
            name="trn1.32xlarge",
            vcpus=128,
            memory_gib=512,
            network_cards=8,
            efa_interfaces=8,
            accelerator=Accelerator.NEURON,
            neuron_devices=16,
            neuron_cores=32,
            on_demand_usd_per_hour=21.50,
            offered_az_ids={**_TRN1_OFFERS, "ap-south-1": (), "ap-southeast-2": (), "ap-southeast-4": ()},
            sources="NEURON-TRN1 (16 Trainium, 32 NeuronCore-v2, 128 vCPU, 512 GiB, 8 EFA); CNI (8 cards x 5 "
            "interfaces); PRICE; OFFER",
        ),
        InstanceFacts(
            name="trn1n.32xlarge",
            vcpus=128,
            memory_gib=512,
            network_cards=16,
            efa_interfaces=16,
            accelerator=Accelerator.NEURON,
            neuron_devices=16,
            neuron_cores=32,
            on_demand_usd_per_hour=24.78,
            offered_az_ids={"us-east-1": (), "us-east-2": (), "us-west-2": ()},
            sources="NEURON-TRN1 (16 EFA, 1600 Gbps); CNI (16 cards x 5 interfaces); PRICE; OFFER (regions only)",
        ),
        InstanceFacts(
            name="trn2.48xlarge",
            vcpus=192,
            memory_gib=2048,
            network_cards=16,
            efa_interfaces=16,
            accelerator=Accelerator.NEURON,
            neuron_devices=16,
            neuron_cores=64,
            on_demand_usd_per_hour=None,
            offered_az_ids={
                "us-east-2": ("use2-az1", "use2-az2", "use2-az3"),
                "ap-south-2": ("aps2-az1", "aps2-az2", "aps2-az3"),
            },
            sources="NEURON-TRN2 (16 Trainium2, 128 physical NeuronCore-v3, 64 at LNC=2, 192 vCPU, 2048 GiB); CNI "
            "(16 cards x 2 interfaces); aws-neuron-eks-samples cfn/eks_trn2_ng_stack_al2023.yaml (16 EFA); no "
            "on-demand list price, Capacity Blocks only (Pricing API, 2026-10); OFFER",
        ),
        InstanceFacts(
            name="p4d.24xlarge",
            vcpus=96,
            memory_gib=1152,
            network_cards=4,
            efa_interfaces=4,
            accelerator=Accelerator.NVIDIA,
            gpus=8,
            on_demand_usd_per_hour=21.957642,
            sources="EC2-AC (8 A100, 4 network cards, EFA on each); CNI (4 cards x 15 interfaces); PRICE",
        ),
        InstanceFacts(
            name="p5.48xlarge",
            vcpus=192,
            memory_gib=2048,
            network_cards=32,
            efa_interfaces=32,
            accelerator=Accelerator.NVIDIA,
            gpus=8,
            on_demand_usd_per_hour=55.04,
            sources="EC2-AC and EC2 user guide p5-efa.html (8 H100, 32 network cards, 32 EFA); CNI (32 x 2); PRICE",
        ),
        InstanceFacts(
            name="m7i.xlarge",
            vcpus=4,
            memory_gib=16,
            network_cards=1,
            efa_interfaces=0,
            accelerator=Accelerator.NONE,
            on_demand_usd_per_hour=0.2016,
            sources="EC2-GP; PRICE",
        ),
        InstanceFacts(
            name="m6i.xlarge",
            vcpus=4,
            memory_gib=16,
            network_cards=1,
            efa_interfaces=0,
            accelerator=Accelerator.NONE,
            on_demand_usd_per_hour=0.192,
            sources="EC2-GP; PRICE",
        ),
        InstanceFacts(
            name="m5.xlarge",
            vcpus=4,
            memory_gib=16,
            network_cards=1,
            efa_interfaces=0,
            accelerator=Accelerator.NONE,
            on_demand_usd_per_hour=0.192,
            sources="EC2-GP; CNI (1 card x 4 interfaces); PRICE",
        ),
    )
}
"""The supported instance types, by name."""


def instance_facts(name: str) -> InstanceFacts:
    """The catalog row of ``name``; raises KeyError with the list of supported types when it is unknown."""
    try:
        return INSTANCE_CATALOG[name]
    except KeyError:
        raise KeyError(f"unknown instance type; supported: {', '.join(INSTANCE_CATALOG)}") from None


class Offering(Enum):
    """What the catalog knows about an instance type in an AZ."""

    OFFERED = "offered"
    NOT_OFFERED = "not offered"
    UNKNOWN = "unknown"


def offering(facts: InstanceFacts, region: str, az_id: str) -> Offering:
    """Whether the catalog knows ``facts.name`` to be offered in ``az_id`` of ``region``."""
    if not facts.offered_az_ids:
        return Offering.UNKNOWN
    if region not in facts.offered_az_ids:
        return Offering.NOT_OFFERED
    az_ids = facts.offered_az_ids[region]
    if not az_ids:
        return Offering.UNKNOWN
    return Offering.OFFERED if az_id in az_ids else Offering.NOT_OFFERED
