"""TrainingNetwork: a VPC whose every subnet is placed by Availability Zone ID."""

from __future__ import annotations

import ipaddress
from typing import Any, List, Optional, Sequence

from aws_cdk import CfnTag, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct, DependencyGroup, IDependable

from trainium_eks.core.cost import CostLine, priced, stack_region
from trainium_eks.core.validation import Problems, check_instance, check_strings, check_text, is_concrete
from trainium_eks.facts.pricing import nat_gateways_usd_per_hour
from trainium_eks.facts.regions import AZ_IDS_BY_REGION, EKS_UNSUPPORTED_CONTROL_PLANE_AZ_IDS, region_of_az_id
from trainium_eks.moved import renamed_attribute, renamed_props

DEFAULT_VPC_CIDR = "10.0.0.0/16"
"""The VPC's address range. Default of :class:`TrainingNetwork`."""

DEFAULT_FLOW_LOG_RETENTION = logs.RetentionDays.ONE_YEAR
"""How long VPC flow logs are kept. Default of :class:`TrainingNetwork`."""


class TrainingNetwork(Construct):
    """A VPC for a training cluster, with every subnet placed by AZ ID, so synth needs no lookup.

    AZ names (``us-west-2a``) map to different physical zones in different accounts; AZ IDs (``usw2-az4``) do not.
    Placing subnets by ID (``AWS::EC2::Subnet.AvailabilityZoneId``) puts the accelerated nodes in the zone that
    offers the instance type in every account, and keeps the control plane out of the zones EKS refuses.

    Layout of the VPC range (a /16 by default), split in four quarters:

    - quarter 0: one public /24 per AZ (NAT gateways, internet-facing load balancers);
    - quarter 1: the private subnets, one per AZ (control-plane interfaces, system nodes), each of the quarter's size
      divided by the number of AZs;
    - quarter 2: the accelerated subnet, in the accelerated AZ, the whole quarter (a /18 in a /16): accelerated
      nodes and the FSx for Lustre file system;
    - quarter 3: left free for growth (a second accelerated subnet, say).

    Every private subnet routes to the internet through the NAT gateway of its own AZ, and to Amazon S3 through a
    gateway endpoint. VPC flow logs (all traffic) go to a CloudWatch Logs group.

    :param availability_zone_ids: The AZ IDs of the public and private subnets, at least two, in one region. The
        EKS control plane uses the private subnets. Default: the nodes' AZ and the next AZ ID of the region
        that EKS accepts for a control plane.
    :param node_az_id: The AZ ID of the node subnet (:attr:`node_subnet`), one of ``availability_zone_ids``.
        Required. (``accelerated_az_id``, its name until 0.1, still works and warns.)
    :param cidr: The VPC's IPv4 range, a /16 to /20. Default: ``10.0.0.0/16``.
    :param flow_log_retention: Retention of the flow-log group. Default: one year.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        node_az_id: Optional[str] = None,
        availability_zone_ids: Optional[Sequence[str]] = None,
        cidr: str = DEFAULT_VPC_CIDR,
        flow_log_retention: logs.RetentionDays = DEFAULT_FLOW_LOG_RETENTION,
        **renamed: Any,
    ) -> None:
        node_az_id = renamed_props("TrainingNetwork", renamed, {"accelerated_az_id": "node_az_id"}).get(
            "node_az_id", node_az_id
        )
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        if check_text(problems, "node_az_id", node_az_id, allowed="an AZ ID such as usw2-az4"):
            az_ids = availability_zone_ids or default_availability_zone_ids(node_az_id)
            if check_strings(problems, "availability_zone_ids", az_ids):
                _validate(problems, node_az_id, list(az_ids), Stack.of(self).region)
        check_instance(problems, "flow_log_retention", flow_log_retention, logs.RetentionDays, "a logs.RetentionDays")
        _validate_cidr(problems, cidr, availability_zone_ids)
        problems.raise_if_any()
        az_ids = list(availability_zone_ids or default_availability_zone_ids(node_az_id))
        self.availability_zone_ids: List[str] = az_ids
        self.node_az_id = node_az_id
        network = ipaddress.ip_network(cidr)
        quarters = list(network.subnets(prefixlen_diff=2))
        private_prefix = quarters[1].prefixlen + (len(az_ids) - 1).bit_length()

        self._path = self.node.path
        self.cfn_vpc = ec2.CfnVPC(
            self,
            "Vpc",
            cidr_block=cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=[CfnTag(key="Name", value=self._path)],
        )
        internet_gateway = ec2.CfnInternetGateway(self, "InternetGateway")
        attachment = ec2.CfnVPCGatewayAttachment(
            self, "InternetGatewayAttachment", vpc_id=self.cfn_vpc.ref, internet_gateway_id=internet_gateway.ref
        )

        public_ids, public_tables, private_ids, private_tables, private_azs = [], [], [], [], []
        private_parts: List[_SubnetParts] = []
        public_path: List[IDependable] = []  # the NAT gateways' way out: the public subnets' associations and routes
        nat_by_az = {}
        public_cidrs = list(quarters[0].subnets(new_prefix=24))
        private_cidrs = list(quarters[1].subnets(new_prefix=private_prefix))
        for index, az_id in enumerate(az_ids):
            public = self._subnet(f"Public{index}", az_id, public_cidrs[index], public=True)
            public_route = ec2.CfnRoute(
                self,
                f"Public{index}DefaultRoute",
                route_table_id=public.route_table.ref,
                destination_cidr_block="0.0.0.0/0",
                gateway_id=internet_gateway.ref,
            )
            public_route.node.add_dependency(attachment)
            elastic_ip = ec2.CfnEIP(self, f"NatIp{index}", domain="vpc")
            nat = ec2.CfnNatGateway(
                self, f"NatGateway{index}", subnet_id=public.subnet.ref, allocation_id=elastic_ip.attr_allocation_id
            )
            nat.node.add_dependency(public_route)
            public_path += [public.association, public_route]
            nat_by_az[az_id] = nat
            public_ids.append(public.subnet.ref)
            public_tables.append(public.route_table.ref)

            private = self._subnet(f"Private{index}", az_id, private_cidrs[index], public=False)
            private.route = self._route_to_nat(f"Private{index}", private.route_table, nat)
            private_parts.append(private)
            private_ids.append(private.subnet.ref)
            private_tables.append(private.route_table.ref)
            private_azs.append(private.subnet.attr_availability_zone)

        accelerated = self._subnet(
            "Accelerated",
            node_az_id,
            quarters[2],
            public=False,
            tags=[CfnTag(key="trainium-eks/subnet", value="accelerated")],
        )
        accelerated.route = self._route_to_nat("Accelerated", accelerated.route_table, nat_by_az[node_az_id])

        self.vpc: ec2.IVpc = ec2.Vpc.from_vpc_attributes(
            self,
            "Imported",
            vpc_id=self.cfn_vpc.ref,
            vpc_cidr_block=cidr,
            availability_zones=private_azs,
            public_subnet_ids=public_ids,
            public_subnet_route_table_ids=public_tables,
            private_subnet_ids=private_ids,
            private_subnet_route_table_ids=private_tables,
        )
        self.node_subnet: ec2.ISubnet = ec2.Subnet.from_subnet_attributes(
            self,
            "AcceleratedSubnetRef",
            subnet_id=accelerated.subnet.ref,
            availability_zone=accelerated.subnet.attr_availability_zone,
            route_table_id=accelerated.route_table.ref,
            ipv4_cidr_block=str(quarters[2]),
        )

        self.s3_endpoint = endpoint = ec2.GatewayVpcEndpoint(
            self,
            "S3Endpoint",
            vpc=self.vpc,
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnets=list(self.vpc.private_subnets) + [self.node_subnet])],
        )
        """The S3 gateway endpoint of the private subnets and the node subnet: S3 requests of the region from them pass
        through it, so a policy can require it (``aws:SourceVpce``)."""
        for subnet, parts in zip(
            [*self.vpc.private_subnets, self.node_subnet], [*private_parts, accelerated], strict=True
        ):
            _connects_through(subnet, parts, endpoint, public_path)
        flow_log_group = logs.LogGroup(
            self, "FlowLogGroup", retention=flow_log_retention, removal_policy=RemovalPolicy.RETAIN
        )
        flow_log = ec2.FlowLog(
            self,
            "FlowLog",
            resource_type=ec2.FlowLogResourceType.from_vpc(self.vpc),
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )
        _confine_flow_log_role(flow_log)
        region = stack_region(self)
        self.nat_gateway_count = len(az_ids)
        self.usd_per_hour: Optional[float] = priced(
            self,
            f"{self.nat_gateway_count} NAT gateways",
            nat_gateways_usd_per_hour(region, self.nat_gateway_count) if region else None,
        )
        """USD per hour of the NAT gateways (one per AZ; provisioned hours only, not the data they process), or None
        where the library has no verified price."""

    accelerated_subnet = renamed_attribute("TrainingNetwork", "accelerated_subnet", "node_subnet")
    accelerated_az_id = renamed_attribute("TrainingNetwork", "accelerated_az_id", "node_az_id")

    @property
    def cost_line(self) -> CostLine:
        """The NAT gateways as a line of the stack's idle cost."""
        return CostLine("NAT gateways", f"{self.nat_gateway_count}, one per AZ", self.usd_per_hour, idle=True)

    def _subnet(
        self, name: str, az_id: str, cidr: ipaddress.IPv4Network, *, public: bool, tags: Sequence[CfnTag] = ()
    ) -> "_SubnetParts":
        subnet = ec2.CfnSubnet(
            self,
            f"{name}Subnet",
            vpc_id=self.cfn_vpc.ref,
            availability_zone_id=az_id,
            cidr_block=str(cidr),
            map_public_ip_on_launch=public,
            tags=[
                CfnTag(key="Name", value=f"{self._path}/{name}"),
                CfnTag(key="kubernetes.io/role/elb" if public else "kubernetes.io/role/internal-elb", value="1"),
                *tags,
            ],
        )
        route_table = ec2.CfnRouteTable(self, f"{name}RouteTable", vpc_id=self.cfn_vpc.ref)
        association = ec2.CfnSubnetRouteTableAssociation(
            self, f"{name}RouteTableAssociation", subnet_id=subnet.ref, route_table_id=route_table.ref
        )
        return _SubnetParts(subnet, route_table, association)

    def _route_to_nat(self, name: str, route_table: ec2.CfnRouteTable, nat: ec2.CfnNatGateway) -> ec2.CfnRoute:
        return ec2.CfnRoute(
            self,
            f"{name}DefaultRoute",
            route_table_id=route_table.ref,
            destination_cidr_block="0.0.0.0/0",
            nat_gateway_id=nat.ref,
        )


class _SubnetParts:
    def __init__(
        self, subnet: ec2.CfnSubnet, route_table: ec2.CfnRouteTable, association: ec2.CfnSubnetRouteTableAssociation
    ) -> None:
        self.subnet = subnet
        self.route_table = route_table
        self.association = association
        self.route: Optional[ec2.CfnRoute] = None


def _connects_through(
    subnet: ec2.ISubnet, parts: _SubnetParts, endpoint: ec2.GatewayVpcEndpoint, public_path: Sequence[IDependable]
) -> None:
    """Make ``subnet``'s ``internet_connectivity_established`` its route table association, its default route (to
    its AZ's NAT gateway, which references its EIP and the internet gateway attachment), the S3 endpoint, and the
    NAT gateways' own way out: the public subnets' route table associations and routes to the internet gateway
    (``public_path``). Those are not dependencies of the NAT gateways themselves: a public subnet moved to another AZ
    replaces its association before its NAT gateway (delete, then create), which the old gateway must survive.

    Why: aws-cdk-lib's ``Function`` in a VPC depends on the selected subnets' ``internetConnectivityEstablished``
    (aws-cdk-lib ``aws-lambda/lib/function.ts``), and so do the kubectl provider's handler and its provider
    framework's ``onEvent`` function, which the EKS cluster places in the private subnets; but an imported subnet's
    group is empty (``aws-ec2/lib/vpc.ts``, ``ImportedSubnet``). Left empty, nothing depends on the routes, so
    CloudFormation deletes them in the first wave of a destroy, and every Kubernetes object deleted after that cannot
    reach EKS, Lambda or S3 (each delete fails after the handler's timeout), nor can Karpenter terminate its nodes.
    With the group filled, every function in these subnets, and every custom resource of the kubectl provider, is
    deleted before the path it needs."""
    group = subnet.internet_connectivity_established
    if not isinstance(group, DependencyGroup):
        raise TypeError(f"{subnet.node.path}: internet_connectivity_established is not a DependencyGroup")
    group.add(parts.association, parts.route, endpoint, *public_path)


def default_availability_zone_ids(node_az_id: str) -> List[str]:
    """The accelerated AZ plus the first other AZ ID of its region that EKS accepts for a control plane."""
    region = region_of_az_id(node_az_id)
    others = [
        az
        for az in AZ_IDS_BY_REGION.get(region or "", ())
        if az != node_az_id and az not in EKS_UNSUPPORTED_CONTROL_PLANE_AZ_IDS
    ]
    return [node_az_id] + others[:1]


def _validate(problems: Problems, node_az_id: str, az_ids: List[str], stack_region: str) -> None:
    regions = {region_of_az_id(az) for az in az_ids}
    if node_az_id not in az_ids:
        problems.add("node_az_id", node_az_id, f"must be one of availability_zone_ids {az_ids}")
    if len(set(az_ids)) < 2:
        problems.add(
            "availability_zone_ids",
            az_ids,
            "an EKS control plane needs subnets in at least two distinct AZs; give two AZ IDs of one region",
        )
    if None in regions or len(regions) != 1:
        problems.add("availability_zone_ids", az_ids, "AZ IDs of one known region, e.g. ['usw2-az4', 'usw2-az1']")
    elif is_concrete(stack_region) and regions != {stack_region}:
        known = ", ".join(AZ_IDS_BY_REGION.get(stack_region, ())) or "none the library knows"
        problems.add("availability_zone_ids", az_ids, f"AZ IDs of the stack's region {stack_region}: {known}")
    refused = [az for az in az_ids if az in EKS_UNSUPPORTED_CONTROL_PLANE_AZ_IDS]
    if refused:
        problems.add(
            "availability_zone_ids",
            az_ids,
            f"EKS does not place control planes in {refused}; pick other AZ IDs",
        )


def _validate_cidr(problems: Problems, cidr: Any, availability_zone_ids: Any) -> None:
    try:
        if not isinstance(cidr, str):
            raise TypeError(cidr)
        network = ipaddress.ip_network(cidr)
    except (TypeError, ValueError):
        problems.add("cidr", cidr, "an IPv4 network such as 10.0.0.0/16")
        return
    if network.version != 4 or not 16 <= network.prefixlen <= 20:
        problems.add("cidr", cidr, "a /16 to /20 IPv4 range (the accelerated subnet takes a quarter of it)")
    elif isinstance(availability_zone_ids, (list, tuple)) and len(availability_zone_ids) > 2 ** (
        22 - network.prefixlen
    ):
        problems.add(
            "availability_zone_ids",
            availability_zone_ids,
            f"at most {2 ** (22 - network.prefixlen)} AZs fit in {cidr}",
        )


FLOW_LOG_PRINCIPAL = "vpc-flow-logs.amazonaws.com"


def flow_log_trust_conditions(stack: Stack) -> dict:
    """The confused-deputy conditions of the role VPC Flow Logs assumes to write to CloudWatch Logs: the stack's
    account as ``aws:SourceAccount`` and its flow logs (``vpc-flow-log/*`` of its account and region) as
    ``aws:SourceArn``. Source: Amazon VPC user guide, "IAM role for publishing flow logs to CloudWatch Logs"
    (flow-logs-iam-role.html), whose trust policy example carries both keys."""
    return {
        "StringEquals": {"aws:SourceAccount": stack.account},
        "ArnLike": {"aws:SourceArn": stack.format_arn(service="ec2", resource="vpc-flow-log", resource_name="*")},
    }


def _confine_flow_log_role(flow_log: ec2.FlowLog) -> None:
    """Add :func:`flow_log_trust_conditions` to the role aws-cdk-lib creates for ``flow_log`` (``IAMRole``, the trust
    policy's one statement), in place, so that the role keeps its logical ID."""
    role = flow_log.node.find_child("IAMRole").node.default_child
    role.add_property_override(
        "AssumeRolePolicyDocument.Statement.0.Condition", flow_log_trust_conditions(Stack.of(flow_log))
    )
