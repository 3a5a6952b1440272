"""KarpenterNodePoolChart: the EC2NodeClass and NodePool of one kind of training node, launched for pending pods."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from trainium_eks.core.conventions import IMDS_HOP_LIMIT, ROOT_DEVICE_NAME, Taint
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import InstanceFacts
from trainium_eks.manifests.chart import LibraryChart

NODE_POOL_API_VERSION = "karpenter.sh/v1"
NODE_CLASS_API_VERSION = "karpenter.k8s.aws/v1"


ON_DEMAND = "on-demand"
RESERVED = "reserved"
"""Karpenter's ``karpenter.sh/capacity-type`` of Capacity Blocks and On-Demand Capacity Reservations
(aws/karpenter-provider-aws v1.14.1, ``pkg/providers/capacityreservation``; Karpenter docs "NodeClasses",
capacityReservationSelectorTerms)."""


class KarpenterNodePoolChart(LibraryChart):
    """An ``EC2NodeClass`` and a ``NodePool`` (both named ``name``) that launch nodes of one instance type in one AZ
    when pods that only they can hold are pending, and remove them once they have been empty for ``idle_after``.

    The EC2NodeClass: the AL2023 AMI alias pinned at :data:`~trainium_eks.facts.versions.EKS_AMI_RELEASE` (Karpenter
    picks the Neuron, NVIDIA or standard variant of that release by instance type), the one subnet and the node
    security group by ID, the node role, IMDSv2 with hop limit
    :data:`~trainium_eks.core.conventions.IMDS_HOP_LIMIT` (Karpenter's own default), an encrypted gp3 root volume, the
    EFA interfaces
    (``network_interfaces``), the placement group and the capacity reservations, and tags that name the pool.

    The NodePool: requirements that pin the instance type, the AZ ID (``topology.k8s.aws/zone-id``) and the capacity
    type; the labels and taints the jobs select on; ``limits.nodes`` (and the vCPUs of that many nodes) as the most
    it launches; ``WhenEmpty`` consolidation after ``idle_after`` (a node with a job's pod is never consolidated; the
    timer restarts with every pod change, kubernetes-sigs/karpenter ``pkg/controllers/nodeclaim/disruption``
    ``consolidation.go``); a budget of 0 for drift so that an AMI change never drains a running job's node (an
    empty drifted node is still removed as empty); ``expireAfter: Never`` (the default 720 h would end a node under
    a month-long run; these nodes are short-lived anyway).

    :param name: Name of both objects (a DNS label). Required.
    :param instance: The instance type. Required.
    :param availability_zone_id: The subnet's AZ ID, a requirement of the pool; None leaves the zone to the subnet.
        Required.
    :param subnet_id: Required.
    :param security_group_ids: Required.
    :param node_role_name: The IAM role of the nodes; Karpenter makes its instance profile. Required.
    :param max_nodes: Required.
    :param idle_after: Seconds a node stays empty before Karpenter removes it. Required.
    :param root_volume_gib: Required.
    :param labels: Node labels. Default: none.
    :param taints: Node taints. Default: none.
    :param network_interfaces: ``spec.networkInterfaces``
        (:func:`~trainium_eks.constructs.efa_layout.karpenter_network_interfaces`). Default: none.
    :param placement_group_name: Default: none.
    :param reservation_ids: Capacity Block or ODCR ids: the pool then launches ``reserved`` capacity only.
        Default: none (on demand).
    :param tags: EC2 tags of the instances, volumes and interfaces. Default: none.
    """

    def __init__(
        self,
        *,
        name: str,
        instance: InstanceFacts,
        availability_zone_id: Optional[str],
        subnet_id: str,
        security_group_ids: Sequence[str],
        node_role_name: str,
        max_nodes: int,
        idle_after: int,
        root_volume_gib: int,
        labels: Optional[Mapping[str, str]] = None,
        taints: Sequence[Taint] = (),
        network_interfaces: Optional[Sequence[Mapping[str, Any]]] = None,
        placement_group_name: Optional[str] = None,
        reservation_ids: Sequence[str] = (),
        tags: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(f"karpenter-{name}")
        self.pool_name = name
        node_class: Dict[str, Any] = {
            "role": node_role_name,
            "amiSelectorTerms": [{"alias": f"al2023@{versions.EKS_AMI_RELEASE}"}],
            "subnetSelectorTerms": [{"id": subnet_id}],
            "securityGroupSelectorTerms": [{"id": group} for group in security_group_ids],
            "metadataOptions": {
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": IMDS_HOP_LIMIT,
                "httpTokens": "required",
            },
            "blockDeviceMappings": [
                {
                    "deviceName": ROOT_DEVICE_NAME,
                    "rootVolume": True,
                    "ebs": {
                        "volumeSize": f"{root_volume_gib}Gi",
                        "volumeType": "gp3",
                        "encrypted": True,
                        "deleteOnTermination": True,
                    },
                }
            ],
        }
        if network_interfaces:
            node_class["networkInterfaces"] = [dict(interface) for interface in network_interfaces]
        if placement_group_name:
            node_class["placementGroupSelector"] = {"name": placement_group_name}
        if reservation_ids:
            node_class["capacityReservationSelectorTerms"] = [{"id": rid} for rid in reservation_ids]
        if tags:
            node_class["tags"] = dict(tags)
        self.add_object(
            {
                "apiVersion": NODE_CLASS_API_VERSION,
                "kind": "EC2NodeClass",
                "metadata": {"name": name},
                "spec": node_class,
            }
        )
        requirements: List[Dict[str, Any]] = [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance.name]},
        ]
        if availability_zone_id is not None:
            requirements.append({"key": "topology.k8s.aws/zone-id", "operator": "In", "values": [availability_zone_id]})
        requirements.append(
            {
                "key": "karpenter.sh/capacity-type",
                "operator": "In",
                "values": [RESERVED if reservation_ids else ON_DEMAND],
            }
        )
        template_spec: Dict[str, Any] = {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name},
            "requirements": requirements,
            "expireAfter": "Never",
        }
        if taints:
            template_spec["taints"] = [taint.manifest() for taint in taints]
        self.add_object(
            {
                "apiVersion": NODE_POOL_API_VERSION,
                "kind": "NodePool",
                "metadata": {"name": name},
                "spec": {
                    "template": {"metadata": {"labels": dict(labels or {})}, "spec": template_spec},
                    "disruption": {
                        "consolidationPolicy": "WhenEmpty",
                        "consolidateAfter": karpenter_duration(idle_after),
                        "budgets": [{"nodes": "100%", "reasons": ["Empty"]}, {"nodes": "0", "reasons": ["Drifted"]}],
                    },
                    "limits": {"nodes": str(max_nodes), "cpu": str(max_nodes * instance.vcpus)},
                },
            }
        )


def karpenter_duration(seconds: int) -> str:
    """``seconds`` as a Karpenter duration: ``10m`` for 600, ``90s`` for 90, ``2h`` for 7200."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
