"""NodeLaunchTemplate: the EC2 launch template of an EKS managed node group."""

from __future__ import annotations

from typing import Optional, Sequence

from aws_cdk import Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from trainium_eks.constructs.node_capacity import NodeCapacity
from trainium_eks.core.conventions import IMDS_HOP_LIMIT, ROOT_DEVICE_NAME

DEFAULT_ROOT_VOLUME_GIB = 100
"""Root volume size of a node, in GiB, unless the node group says otherwise."""


class NodeLaunchTemplate(Construct):
    """A launch template for an EKS managed node group, with the settings every node of this library gets.

    - the instance type (set here, not on the node group: ``aws_eks_v2`` refuses Trainium instance types for the
      Neuron AMI type on the node group, and capacity blocks need it here);
    - IMDSv2 required with a hop limit of :data:`~trainium_eks.core.conventions.IMDS_HOP_LIMIT` (1): pods outside the
      host network cannot reach the node role's credentials and get theirs from EKS Pod Identity;
    - an encrypted gp3 root volume on :data:`ROOT_DEVICE_NAME`, deleted with the instance;
    - either explicit network interfaces (EFA layouts) or the security groups of the primary interface;
    - optionally a placement group and a capacity reservation;
    - no AMI and no user data: EKS picks the AMI of the node group's AMI type and writes the bootstrap itself.

    :param instance_type: EC2 instance type. Required.
    :param security_group_ids: Security groups of the primary interface when ``network_interfaces`` is not given.
    :param network_interfaces: Explicit interfaces (their security groups included). Default: none.
    :param placement_group: Default: none.
    :param capacity: How instances are bought. Default: on demand, no reservation.
    :param root_volume_size_gib: Default: :data:`DEFAULT_ROOT_VOLUME_GIB`.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        instance_type: str,
        security_group_ids: Sequence[str] = (),
        network_interfaces: Optional[Sequence[ec2.CfnLaunchTemplate.NetworkInterfaceProperty]] = None,
        placement_group: Optional[ec2.IPlacementGroup] = None,
        capacity: Optional[NodeCapacity] = None,
        root_volume_size_gib: int = DEFAULT_ROOT_VOLUME_GIB,
    ) -> None:
        super().__init__(scope, id_)
        capacity = capacity or NodeCapacity.on_demand()
        self.launch_template = ec2.CfnLaunchTemplate(
            self,
            "LaunchTemplate",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
                instance_type=instance_type,
                metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
                    http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=IMDS_HOP_LIMIT
                ),
                block_device_mappings=[
                    ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                        device_name=ROOT_DEVICE_NAME,
                        ebs=ec2.CfnLaunchTemplate.EbsProperty(
                            volume_size=root_volume_size_gib,
                            volume_type="gp3",
                            encrypted=True,
                            delete_on_termination=True,
                        ),
                    )
                ],
                network_interfaces=list(network_interfaces) if network_interfaces else None,
                security_group_ids=None if network_interfaces else list(security_group_ids),
                placement=(
                    ec2.CfnLaunchTemplate.PlacementProperty(group_name=placement_group.placement_group_name)
                    if placement_group
                    else None
                ),
                capacity_reservation_specification=capacity.capacity_reservation_specification(),
                instance_market_options=capacity.instance_market_options(),
                tag_specifications=[
                    ec2.CfnLaunchTemplate.TagSpecificationProperty(
                        resource_type=resource_type,
                        tags=[{"key": "Name", "value": scope.node.path}],
                    )
                    for resource_type in ("instance", "volume", "network-interface")
                ],
            ),
        )
        Tags.of(self.launch_template).add("Name", scope.node.path)
        self.spec = eks.LaunchTemplateSpec(
            id=self.launch_template.ref, version=self.launch_template.attr_latest_version_number
        )
