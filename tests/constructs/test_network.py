"""TrainingNetwork: subnets placed by AZ ID, NAT per AZ, S3 endpoint, flow logs."""

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from tests.support.apps import default_template, new_app, only, resources_of, stack_template
from trainium_eks.constructs.network import FLOW_LOG_PRINCIPAL, TrainingNetwork, default_availability_zone_ids
from trainium_eks.stacks.app_context import STACKS


def subnets(template):
    return {k: v["Properties"] for k, v in resources_of(template, "AWS::EC2::Subnet").items()}


def test_every_subnet_is_placed_by_az_id_and_none_by_name(template):
    for props in subnets(template).values():
        assert "AvailabilityZoneId" in props
        assert "AvailabilityZone" not in props


def test_public_and_private_subnets_in_two_azs_and_the_accelerated_subnet_in_the_trainium_az(template):
    found = subnets(template)
    public = [p for k, p in found.items() if "Public" in k]
    private = [p for k, p in found.items() if "Private" in k]
    accelerated = [p for k, p in found.items() if "Accelerated" in k]
    assert sorted(p["AvailabilityZoneId"] for p in public) == ["usw2-az1", "usw2-az4"]
    assert sorted(p["AvailabilityZoneId"] for p in private) == ["usw2-az1", "usw2-az4"]
    assert [p["AvailabilityZoneId"] for p in accelerated] == ["usw2-az4"]
    assert all(p["MapPublicIpOnLaunch"] for p in public)
    assert not any(p["MapPublicIpOnLaunch"] for p in private + accelerated)
    assert accelerated[0]["CidrBlock"] == "10.0.128.0/18"


def test_trainium_az_context_moves_the_accelerated_subnet():
    found = subnets(default_template(trainiumAzId="usw2-az3"))
    (accelerated,) = [p for k, p in found.items() if "Accelerated" in k]
    assert accelerated["AvailabilityZoneId"] == "usw2-az3"


def test_load_balancer_tags(template):
    for logical_id, props in subnets(template).items():
        tags = {t["Key"]: t["Value"] for t in props["Tags"]}
        role = "kubernetes.io/role/elb" if "Public" in logical_id else "kubernetes.io/role/internal-elb"
        assert tags[role] == "1"


def test_private_subnets_route_through_the_nat_gateway_of_their_own_az(template):
    nats = resources_of(template, "AWS::EC2::NatGateway")
    assert len(nats) == 2
    routes = [r["Properties"] for r in resources_of(template, "AWS::EC2::Route").values()]
    nat_routes = [r for r in routes if "NatGatewayId" in r]
    assert len(nat_routes) == 3  # two private subnets and the accelerated subnet
    accelerated_route = next(
        r for k, r in resources_of(template, "AWS::EC2::Route").items() if k.startswith("NetworkAccelerated")
    )
    assert accelerated_route["Properties"]["NatGatewayId"] == {"Ref": next(k for k in nats if "NatGateway0" in k)}


def test_s3_gateway_endpoint_serves_private_and_accelerated_route_tables(template):
    endpoint = only(template, "AWS::EC2::VPCEndpoint")["Properties"]
    assert endpoint["VpcEndpointType"] == "Gateway"
    assert len(endpoint["RouteTableIds"]) == 3
    assert "s3" in str(endpoint["ServiceName"])


def test_flow_logs_capture_all_traffic_into_a_retained_log_group(template):
    flow_log = only(template, "AWS::EC2::FlowLog")["Properties"]
    assert flow_log["TrafficType"] == "ALL"
    assert flow_log["ResourceType"] == "VPC"
    template.has_resource(
        "AWS::Logs::LogGroup",
        {
            "Properties": {"RetentionInDays": 365},
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
        },
    )


def test_default_companion_az_skips_the_azs_eks_refuses():
    assert default_availability_zone_ids("use1-az2") == ["use1-az2", "use1-az1"]
    assert default_availability_zone_ids("use1-az1") == ["use1-az1", "use1-az2"]
    assert "use1-az3" not in default_availability_zone_ids("use1-az2")


def build(**props):
    app = new_app()
    stack = cdk.Stack(app, "S")
    network = TrainingNetwork(stack, "Net", **props)
    return network, assertions.Template.from_stack(stack)


def test_three_azs_split_the_private_quarter():
    network, template = build(node_az_id="use1-az5", availability_zone_ids=["use1-az5", "use1-az6", "use1-az4"])
    private = sorted(p["CidrBlock"] for k, p in subnets(template).items() if "Private" in k)
    assert private == ["10.0.64.0/20", "10.0.80.0/20", "10.0.96.0/20"]
    assert len(network.vpc.private_subnets) == 3


@pytest.mark.parametrize(
    "props,message",
    [
        (
            {"node_az_id": "usw2-az4", "availability_zone_ids": ["usw2-az1", "usw2-az2"]},
            r"node_az_id='usw2-az4': must be one of availability_zone_ids",
        ),
        ({"node_az_id": "usw2-az4", "availability_zone_ids": ["usw2-az4"]}, r"at least two distinct AZs"),
        (
            {"node_az_id": "use1-az3", "availability_zone_ids": ["use1-az3", "use1-az1"]},
            r"EKS does not place control planes in \['use1-az3'\]",
        ),
        (
            {"node_az_id": "usw2-az4", "availability_zone_ids": ["usw2-az4", "use1-az1"]},
            r"AZ IDs of one known region",
        ),
        ({"node_az_id": "usw2-az4", "cidr": "10.0.0.0/24"}, r"cidr='10.0.0.0/24': a /16 to /20"),
    ],
)
def test_inconsistent_network_settings_are_refused(props, message):
    with pytest.raises(ValueError, match=message):
        build(**props)


@pytest.mark.parametrize("name", STACKS)
def test_the_flow_log_role_trusts_vpc_flow_logs_of_this_account_only(name):
    template = stack_template(name)
    (role,) = [
        r["Properties"]
        for r in resources_of(template, "AWS::IAM::Role").values()
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": FLOW_LOG_PRINCIPAL}
    ]
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
        "ArnLike": {
            "aws:SourceArn": {
                "Fn::Join": [
                    "",
                    ["arn:aws:ec2:us-west-2:", {"Ref": "AWS::AccountId"}, ":vpc-flow-log/*"],
                ]
            }
        },
    }
