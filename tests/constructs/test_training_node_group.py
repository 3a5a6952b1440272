"""The accelerated node group as synthesized by the default app and by the construct on its own."""

import aws_cdk as cdk
import pytest
from aws_cdk import Stack, assertions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Match

from tests.support.apps import default_template, new_app, only, resources_of
from trainium_eks.constructs.cluster import TrainingCluster
from trainium_eks.constructs.efa_layout import EfaLayout
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.constructs.node_capacity import NodeCapacity
from trainium_eks.constructs.training_node_group import TrainingNodeGroup
from trainium_eks.core.validation import ConfigurationError


def accelerated_launch_template(template):
    templates = [
        lt
        for lt in resources_of(template, "AWS::EC2::LaunchTemplate").values()
        if lt["Properties"]["LaunchTemplateData"]["InstanceType"].startswith(("trn", "p", "g"))
    ]
    assert len(templates) == 1
    return templates[0]["Properties"]["LaunchTemplateData"]


def accelerated_nodegroup(template):
    groups = [
        ng["Properties"]
        for ng in resources_of(template, "AWS::EKS::Nodegroup").values()
        if ng["Properties"]["AmiType"] != "AL2023_x86_64_STANDARD"
    ]
    assert len(groups) == 1
    return groups[0]


def standalone(**props):
    """A stack holding only what an TrainingNodeGroup needs, and the node group built with ``props``."""
    app = new_app()
    stack = cdk.Stack(app, "Standalone", env=cdk.Environment(region="us-west-2"))
    network = TrainingNetwork(stack, "Network", node_az_id="usw2-az4")
    cluster = TrainingCluster(stack, "Cluster", vpc=network.vpc)
    group = TrainingNodeGroup(stack, "Trn", cluster=cluster.cluster, subnet=network.node_subnet, **props)
    return group, assertions.Template.from_stack(stack)


NODE_GROUP = {"provisioning": "node-group"}
"""The default app with managed node groups (``provisioning=node-group``), which this module tests."""


@pytest.fixture(scope="module")
def template():
    """The default app's template with its accelerated nodes as a managed node group."""
    return default_template(**NODE_GROUP)


def test_default_launch_template_has_the_trn1_layout(template):
    data = accelerated_launch_template(template)
    assert data["InstanceType"] == "trn1.32xlarge"
    interfaces = data["NetworkInterfaces"]
    assert [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in interfaces] == (
        [(0, 0, "efa")] + [(card, 0, "efa-only") for card in range(1, 8)]
    )
    assert all("SubnetId" not in i for i in interfaces)
    assert "SecurityGroupIds" not in data, "groups go on the interfaces when interfaces are explicit"
    assert "ImageId" not in data and "UserData" not in data, "EKS picks the Neuron AMI and writes the bootstrap"


def test_launch_template_requires_imdsv2_and_encrypts_a_500_gib_gp3_root(template):
    data = accelerated_launch_template(template)
    assert data["MetadataOptions"] == {
        "HttpEndpoint": "enabled",
        "HttpTokens": "required",
        "HttpPutResponseHopLimit": 1,
    }
    assert data["BlockDeviceMappings"] == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {"VolumeSize": 500, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True},
        }
    ]


def test_launch_template_uses_a_cluster_placement_group(template):
    placement = only(template, "AWS::EC2::PlacementGroup")
    assert placement["Properties"] == {"Strategy": "cluster"}
    group_name = accelerated_launch_template(template)["Placement"]["GroupName"]
    assert group_name == {"Fn::GetAtt": [next(iter(resources_of(template, "AWS::EC2::PlacementGroup"))), "GroupName"]}


def test_instance_type_context_gives_sixteen_interfaces_on_trn1n():
    data = accelerated_launch_template(default_template(instanceType="trn1n.32xlarge", **NODE_GROUP))
    assert data["InstanceType"] == "trn1n.32xlarge"
    assert len(data["NetworkInterfaces"]) == 16
    assert sorted(i["NetworkCardIndex"] for i in data["NetworkInterfaces"]) == list(range(16))


def test_node_count_context_sets_the_node_group_size():
    scaling = accelerated_nodegroup(default_template(nodeCount="4", **NODE_GROUP))["ScalingConfig"]
    assert scaling == {"MinSize": 4, "DesiredSize": 4, "MaxSize": 4}


def test_node_group_runs_the_neuron_ami_in_one_subnet_with_taint_labels_and_repair(template):
    group = accelerated_nodegroup(template)
    assert group["AmiType"] == "AL2023_x86_64_NEURON"
    assert "InstanceTypes" not in group, "the instance type lives in the launch template"
    assert group["Subnets"] == [
        {
            "Ref": next(
                logical_id for logical_id in resources_of(template, "AWS::EC2::Subnet") if "Accelerated" in logical_id
            )
        }
    ]
    assert group["Taints"] == [{"Key": "aws.amazon.com/neuron", "Value": "true", "Effect": "NO_SCHEDULE"}]
    assert group["Labels"]["vpc.amazonaws.com/efa.present"] == "true"
    assert group["Labels"]["aws.amazon.com/neuron.present"] == "true"
    assert group["CapacityType"] == "ON_DEMAND"
    assert group["NodeRepairConfig"] == {"Enabled": True}
    assert group["ScalingConfig"] == {"MinSize": 2, "DesiredSize": 2, "MaxSize": 2}


def test_node_group_waits_for_the_vpc_cni_add_on(template):
    groups = template.find_resources("AWS::EKS::Nodegroup", {"Properties": {"AmiType": "AL2023_x86_64_NEURON"}})
    (group,) = groups.values()
    cni = template.find_resources("AWS::EKS::Addon", {"Properties": {"AddonName": "vpc-cni"}})
    assert set(cni) <= set(group["DependsOn"])


def security_group_ids(template):
    groups = resources_of(template, "AWS::EC2::SecurityGroup")
    node_sg = next(k for k, v in groups.items() if "Accelerated nodes" in v["Properties"]["GroupDescription"])
    return {"Fn::GetAtt": [node_sg, "GroupId"]}


def cluster_sg():
    return {"Fn::GetAtt": [Match.string_like_regexp("^Cluster[0-9A-F]{8}$"), "ClusterSecurityGroupId"]}


def test_node_security_group_has_self_ingress_and_self_egress_for_efa(template):
    node_sg = security_group_ids(template)
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "GroupId": node_sg,
            "SourceSecurityGroupId": node_sg,
            "IpProtocol": "-1",
        },
    )
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress",
        {
            "GroupId": node_sg,
            "DestinationSecurityGroupId": node_sg,
            "IpProtocol": "-1",
        },
    )


def test_node_security_group_talks_with_the_cluster_security_group_both_ways(template):
    node_sg = security_group_ids(template)
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "GroupId": node_sg,
            "SourceSecurityGroupId": cluster_sg(),
            "IpProtocol": "-1",
        },
    )
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "GroupId": cluster_sg(),
            "SourceSecurityGroupId": node_sg,
            "IpProtocol": "-1",
        },
    )


def test_all_efa_layout_and_efa_interface_count():
    group, template = standalone(efa_layout=EfaLayout.ALL_EFA)
    data = accelerated_launch_template(template)
    assert [(i["DeviceIndex"], i["InterfaceType"]) for i in data["NetworkInterfaces"]] == (
        [(0, "efa")] + [(1, "efa")] * 7
    )
    assert group.efa_interfaces == 8
    assert group.instance.neuron_devices == 16


def test_capacity_block_targets_the_reservation_without_a_placement_group():
    group, template = standalone(capacity=NodeCapacity.capacity_block("cr-0123456789abcdef0"))
    data = accelerated_launch_template(template)
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}
    }
    assert "Placement" not in data
    assert accelerated_nodegroup(template)["CapacityType"] == "CAPACITY_BLOCK"
    template.resource_count_is("AWS::EC2::PlacementGroup", 0)
    warnings = assertions.Annotations.from_stack(Stack.of(group)).find_warning(
        "*", Match.string_like_regexp("Capacity Block cr-0123456789abcdef0: instances launch only inside")
    )
    assert len(warnings) == 1


def test_capacity_reservation_is_on_demand_capacity_targeting_the_reservation():
    _, template = standalone(capacity=NodeCapacity.capacity_reservation("cr-0123456789abcdef0"))
    data = accelerated_launch_template(template)
    assert "InstanceMarketOptions" not in data
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationId": "cr-0123456789abcdef0"
    }
    assert accelerated_nodegroup(template)["CapacityType"] == "ON_DEMAND"


def test_an_existing_placement_group_is_used_as_given():
    app = new_app()
    stack = cdk.Stack(app, "S", env=cdk.Environment(region="us-west-2"))
    network = TrainingNetwork(stack, "Network", node_az_id="usw2-az4")
    cluster = TrainingCluster(stack, "Cluster", vpc=network.vpc)
    existing = ec2.PlacementGroup.from_placement_group_name(stack, "Existing", "my-reserved-pg")
    TrainingNodeGroup(
        stack,
        "Trn",
        cluster=cluster.cluster,
        subnet=network.node_subnet,
        capacity=NodeCapacity.capacity_reservation("cr-0123456789abcdef0"),
        placement_group=existing,
    )
    template = assertions.Template.from_stack(stack)
    assert accelerated_launch_template(template)["Placement"] == {"GroupName": "my-reserved-pg"}


def test_single_node_without_efa_gets_no_explicit_interfaces():
    group, template = standalone(instance_type="trn1.2xlarge", node_count=1)
    data = accelerated_launch_template(template)
    assert "NetworkInterfaces" not in data
    assert data["SecurityGroupIds"] == [security_group_ids(template)]
    assert group.efa_interfaces == 0
    template.resource_count_is("AWS::EC2::PlacementGroup", 0)


def test_cpu_nodes_are_not_tainted_and_use_the_standard_ami():
    group, template = standalone(instance_type="m7i.xlarge", node_count=1)
    assert group.taints == []
    nodegroups = resources_of(template, "AWS::EKS::Nodegroup")
    trn = next(v["Properties"] for k, v in nodegroups.items() if k.startswith("Trn"))
    assert trn["AmiType"] == "AL2023_x86_64_STANDARD"
    assert "Taints" not in trn


def test_sizes_can_differ_from_the_node_count():
    _, template = standalone(node_count=2, min_size=0, max_size=8)
    assert accelerated_nodegroup(template)["ScalingConfig"] == {"MinSize": 0, "DesiredSize": 2, "MaxSize": 8}


@pytest.mark.parametrize(
    "props,message",
    [
        ({"node_count": 3, "max_size": 2}, r"node_count=3: an integer from 1 to 2 \(max_size=2\)"),
        ({"min_size": 3}, r"min_size=3: an integer from 0 to 2"),
        ({"capacity": NodeCapacity.capacity_block("")}, r"capacity='': a capacity-block needs its reservation id"),
        ({"root_volume_size_gib": 10}, r"root_volume_size_gib=10"),
    ],
)
def test_construct_rejects_inconsistent_sizes(props, message):
    with pytest.raises(ValueError, match=message):
        standalone(**props)


def test_taint_key_is_the_one_the_neuron_device_plugin_tolerates():
    group, _ = standalone()
    assert [(t.key, t.value, t.effect) for t in group.taints] == [
        ("aws.amazon.com/neuron", "true", eks.TaintEffect.NO_SCHEDULE)
    ]


def test_without_an_az_id_a_type_the_stacks_region_does_not_offer_is_refused():
    with pytest.raises(ConfigurationError) as raised:
        standalone(instance_type="trn2.48xlarge")
    assert any("trn2.48xlarge is offered in regions us-east-2, ap-south-2" in p for p in raised.value.problems)


def test_without_an_az_id_the_offering_is_not_checked_and_synth_says_so_with_the_command_to_check():
    group, _ = standalone()
    warnings = assertions.Annotations.from_stack(Stack.of(group)).find_warning(
        "*", Match.string_like_regexp("No availability_zone_id: the library cannot check")
    )
    assert len(warnings) == 1
    text = str(warnings[0].entry.data)
    assert "describe-instance-type-offerings" in text and "trn1.32xlarge --region us-west-2" in text
    group, _ = standalone(availability_zone_id="usw2-az4")
    assert not assertions.Annotations.from_stack(Stack.of(group)).find_warning(
        "*", Match.string_like_regexp("No availability_zone_id")
    )
