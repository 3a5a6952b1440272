"""NodeLaunchTemplate: the launch template's defaults, its interfaces or groups, placement and capacity, and spec."""

import json

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from tests.support.apps import new_app, only, resources_of, stack_template
from tests.support.clusters import ENV
from trainium_eks.constructs.node_capacity import NodeCapacity
from trainium_eks.constructs.node_launch_template import (
    DEFAULT_ROOT_VOLUME_GIB,
    ROOT_DEVICE_NAME,
    NodeLaunchTemplate,
)
from trainium_eks.core.conventions import IMDS_HOP_LIMIT
from trainium_eks.stacks.app_context import STACKS

NODE_SG = "sg-0123456789abcdef0"


def build(**props):
    """A stack with the launch template of a node group ``Nodes``, built with ``props``; the construct and the
    template's ``LaunchTemplateData``."""
    stack = cdk.Stack(new_app(), "Launch", env=ENV)
    owner = Construct(stack, "Nodes")
    launch_template = NodeLaunchTemplate(owner, "LaunchTemplate", **{"instance_type": "m5.xlarge", **props})
    data = only(assertions.Template.from_stack(stack), "AWS::EC2::LaunchTemplate")["Properties"]["LaunchTemplateData"]
    return stack, launch_template, data


def test_defaults_a_100_gib_encrypted_root_imdsv2_groups_on_the_primary_interface_and_names_from_the_owner():
    _, _, data = build(security_group_ids=[NODE_SG])
    assert DEFAULT_ROOT_VOLUME_GIB == 100 and ROOT_DEVICE_NAME == "/dev/xvda"
    assert data["InstanceType"] == "m5.xlarge"
    assert data["BlockDeviceMappings"] == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {"VolumeSize": 100, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True},
        }
    ]
    assert data["MetadataOptions"] == {
        "HttpEndpoint": "enabled",
        "HttpTokens": "required",
        "HttpPutResponseHopLimit": 1,
    }
    assert data["SecurityGroupIds"] == [NODE_SG]
    for absent in ("NetworkInterfaces", "Placement", "CapacityReservationSpecification", "InstanceMarketOptions"):
        assert absent not in data, absent
    assert "ImageId" not in data and "UserData" not in data, "EKS picks the AMI and writes the bootstrap"
    assert data["TagSpecifications"] == [
        {"ResourceType": kind, "Tags": [{"Key": "Name", "Value": "Launch/Nodes"}]}
        for kind in ("instance", "volume", "network-interface")
    ]


def test_explicit_interfaces_carry_the_groups_instead_of_the_template():
    interfaces = [
        ec2.CfnLaunchTemplate.NetworkInterfaceProperty(
            network_card_index=card, device_index=0, interface_type="efa", groups=[NODE_SG]
        )
        for card in range(2)
    ]
    _, _, data = build(instance_type="trn1.32xlarge", security_group_ids=[NODE_SG], network_interfaces=interfaces)
    assert "SecurityGroupIds" not in data, "EC2 refuses groups on both the template and its interfaces"
    assert data["NetworkInterfaces"] == [
        {"NetworkCardIndex": card, "DeviceIndex": 0, "InterfaceType": "efa", "Groups": [NODE_SG]} for card in range(2)
    ]


def test_a_placement_group_a_capacity_block_and_a_larger_root_volume():
    stack = cdk.Stack(new_app(), "Placed", env=ENV)
    placement = ec2.PlacementGroup.from_placement_group_name(stack, "Reserved", "reserved-pg")
    NodeLaunchTemplate(
        stack,
        "LaunchTemplate",
        instance_type="trn1.32xlarge",
        security_group_ids=[NODE_SG],
        placement_group=placement,
        capacity=NodeCapacity.capacity_block("cr-0123456789abcdef0"),
        root_volume_size_gib=750,
    )
    data = only(assertions.Template.from_stack(stack), "AWS::EC2::LaunchTemplate")["Properties"]["LaunchTemplateData"]
    assert data["Placement"] == {"GroupName": "reserved-pg"}
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}
    }
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 750


def test_the_spec_follows_the_latest_version_of_the_template():
    stack, launch_template, _ = build(security_group_ids=[NODE_SG])
    logical_id = stack.get_logical_id(launch_template.launch_template)
    assert stack.resolve(launch_template.spec.id) == {"Ref": logical_id}
    assert stack.resolve(launch_template.spec.version) == {"Fn::GetAtt": [logical_id, "LatestVersionNumber"]}


@pytest.mark.parametrize("name", STACKS)
def test_every_node_of_every_stack_keeps_imds_credentials_from_pods_with_hop_limit_1(name):
    """Launch templates (system nodes, node groups) and Karpenter's EC2NodeClasses (in the applied manifests)."""
    template = stack_template(name)
    templates = resources_of(template, "AWS::EC2::LaunchTemplate")
    assert templates
    for logical_id, launch_template in templates.items():
        options = launch_template["Properties"]["LaunchTemplateData"]["MetadataOptions"]
        assert (options["HttpTokens"], options["HttpPutResponseHopLimit"]) == ("required", IMDS_HOP_LIMIT), logical_id
    manifests = json.dumps(template.to_json())
    assert '\\"kind\\":\\"EC2NodeClass\\"' in manifests, "the default provisioning is Karpenter"
    assert manifests.count('\\"httpPutResponseHopLimit\\":') == manifests.count(
        f'\\"httpPutResponseHopLimit\\":{IMDS_HOP_LIMIT}'
    ), "every EC2NodeClass"
    assert IMDS_HOP_LIMIT == 1
