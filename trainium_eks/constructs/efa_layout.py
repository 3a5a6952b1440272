"""EFA network-interface layouts of a launch template, one interface per network card."""

from __future__ import annotations

from enum import Enum
from typing import Any, Dict, List, Optional, Sequence

from aws_cdk import aws_ec2 as ec2

from trainium_eks.facts.catalog import InstanceFacts


class EfaLayout(Enum):
    """How the EFA devices of a multi-card instance are attached: one interface on every network card.

    ``IP_OPTIMIZED`` (default): the primary interface (network card 0, device 0) is an EFA with ENA, the only
    interface that takes an IP address; every other card gets an EFA-only interface at device index 0. A node then
    consumes one subnet IP for its interfaces instead of one per card (16 on trn1n.32xlarge and trn2.48xlarge),
    which is what the EC2 guide recommends for instances with multiple network cards. EFA-only interfaces need the
    VPC CNI 1.18.5 or newer. The primary interface can never be EFA-only.

    ``ALL_EFA``: every interface is an EFA with ENA, as in the aws-neuron-eks-samples tutorial: card 0 at device
    index 0, every other card at device index 1, so that only one interface is eth0 and the OS routes outbound
    traffic through it. Each interface takes a subnet IP.

    Sources: EC2 user guide, "Maximize network bandwidth on accelerated instance types with EFA"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html) and "EFA-only interfaces";
    Amazon EKS user guide, "Run machine learning training on Amazon EKS with Elastic Fabric Adapter"
    (https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html); aws-neuron-eks-samples
    cfn/eks_trn1_ng_stack.yaml and cfn/eks_trn2_ng_stack_al2023.yaml.
    """

    IP_OPTIMIZED = "ip-optimized"
    ALL_EFA = "all-efa"


def efa_network_interfaces(
    instance: InstanceFacts, layout: EfaLayout, security_group_ids: Sequence[str]
) -> List[ec2.CfnLaunchTemplate.NetworkInterfaceProperty]:
    """The launch template's network interfaces: one per network card, each carrying an EFA device.

    Returns an empty list for an instance type without EFA (the launch template then names only security groups).
    No interface names a subnet: a managed node group places its instances through its own subnets.
    """
    if not instance.efa_supported:
        return []
    interfaces = []
    for card in range(instance.network_cards):
        primary = card == 0
        if layout is EfaLayout.IP_OPTIMIZED:
            interface_type, device_index = ("efa", 0) if primary else ("efa-only", 0)
        else:
            interface_type, device_index = ("efa", 0 if primary else 1)
        interfaces.append(
            ec2.CfnLaunchTemplate.NetworkInterfaceProperty(
                network_card_index=card,
                device_index=device_index,
                interface_type=interface_type,
                groups=list(security_group_ids),
                delete_on_termination=True,
                description=f"{'primary ' if primary else ''}{interface_type} on network card {card}",
            )
        )
    return interfaces


def karpenter_network_interfaces(instance: InstanceFacts, layout: EfaLayout) -> Optional[List[Dict[str, Any]]]:
    """The ``EC2NodeClass.spec.networkInterfaces`` of the same layout, or None to leave the field out.

    Karpenter's field knows two interface types, ``interface`` (ENA, the only one that takes an IP) and ``efa-only``;
    the node advertises one ``vpc.amazonaws.com/efa`` per ``efa-only`` entry (aws/karpenter-provider-aws v1.14.1
    ``pkg/providers/instancetype/types.go`` ``efas``), and its CRD requires the primary (card 0, device 0) to be an
    ``interface`` and allows one EFA per card. ``IP_OPTIMIZED`` is therefore the primary ENA interface plus an
    ``efa-only`` interface at device 1 of card 0 and at device 0 of every other card: one EFA device per card and
    one subnet IP per node, as the launch template's layout.

    ``ALL_EFA`` leaves the field out: Karpenter then attaches an ``efa`` interface (EFA with ENA) to every card, card
    0 at device 0 and the others at device 1, whenever the pods it launches for ask for ``vpc.amazonaws.com/efa``
    (``pkg/providers/launchtemplate/launchtemplate.go`` ``generateNetworkInterfaces``; ``pkg/providers/instance/
    instance.go`` ``getEFACountForInstance``) - the launch template's ``ALL_EFA`` layout. None for a type without EFA.
    """
    if not instance.efa_supported or layout is EfaLayout.ALL_EFA:
        return None
    interfaces: List[Dict[str, Any]] = [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}]
    for card in range(instance.network_cards):
        interfaces.append({"networkCardIndex": card, "deviceIndex": 1 if card == 0 else 0, "interfaceType": "efa-only"})
    return interfaces
