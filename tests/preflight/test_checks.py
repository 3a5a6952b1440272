"""The preflight checks (``lambda/preflight/preflight_checks.py``) against moto where moto implements the call (AZs,
instance types and offerings by AZ ID, subnets, CloudWatch metrics, FSx and EFS file systems) and botocore's Stubber
where it does not (Service Quotas' EC2 quotas, capacity reservations, EKS cluster versions); Stubber checks every
stubbed request and response against the botocore service model."""

from __future__ import annotations

import copy
import datetime as dt
import types
from typing import Any, Dict, List

import botocore.endpoint
import pytest
from botocore.awsrequest import AWSResponse

from tests.support.preflight_aws import END, START, TRN_DIMENSIONS, MixedSession
from tests.support.preflight_aws import node as _node
from tests.support.preflight_aws import plan as _plan
from tests.support.preflight_aws import quota as _quota


def _put_usage(region: str, dimensions: Dict[str, str], value: float) -> None:
    import boto3

    cloudwatch = boto3.client("cloudwatch", region_name=region, aws_access_key_id="t", aws_secret_access_key="t")
    cloudwatch.put_metric_data(
        Namespace="AWS/Usage",
        MetricData=[
            {
                "MetricName": "ResourceCount",
                "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
                "Value": value,
                "Timestamp": dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5),
            }
        ],
    )


def _context(checks, session, plan=None, region="us-west-2", previous=None):
    return checks.AwsContext(session, region, plan or _plan(), previous=previous)


def _by_check(results) -> Dict[str, Any]:
    return {result.check: result for result in results}


# ------------------------------------------------------------------------------------------------------------ plan


def test_the_sample_plan_is_valid(checks):
    assert checks.check_plan(_plan()) == []
    assert checks.check_plan(_plan(_node(availabilityZoneId=None), kubernetesVersion=None, region=None)) == []


def test_a_bad_plan_gets_one_clear_message_per_problem(checks):
    assert checks.check_plan(_plan(version=2)) == ["plan version 2: this preflight reads version 1 only"]
    plan = _plan(_node(count=True, capacityType="spot"), fileSystems=[{"kind": "lustre", "storageGib": 1200}])
    del plan["stack"]
    problems = checks.check_plan(plan)
    assert "the plan: stack is missing" in problems
    assert "nodes[0] (AcceleratedNodes): count=True must be an integer" in problems
    assert any("capacityType 'spot'" in p for p in problems)
    assert any("fileSystems[0]: deploymentType None" in p for p in problems)
    # A reservation the stack itself makes has no ID before the deploy: the plan is valid, the reservation unchecked.
    assert checks.check_plan(_plan(_node(capacityType="capacity-block"))) == []
    with pytest.raises(ValueError, match="invalid preflight plan: plan version 2"):
        checks.run_checks(_plan(version=2), object())


# ------------------------------------------------------------------------------------------------ zones, offerings


def test_the_az_id_and_the_offering_pass_in_the_plans_region(checks, aws, mixed):
    context = _context(checks, mixed)
    zone = checks.check_availability_zone(context, "usw2-az4")
    assert (zone.status, zone.message) == ("pass", "usw2-az4 is us-west-2d, available, in us-west-2")
    assert checks.check_offering(context, _node()).status == "pass"


def test_a_wrong_region_is_one_clear_failure(checks, aws, mixed):
    results = checks.run_checks(_plan(kubernetesVersion=None), mixed, region="eu-west-1")
    by_check = _by_check(results)
    zone = by_check["availability-zone/usw2-az4"]
    assert zone.status == "fail"
    assert zone.message == "usw2-az4 is not an AZ of eu-west-1"
    assert zone.advice.startswith("deploy to us-west-2 or set availabilityZoneId")
    assert "offering/AcceleratedNodes" not in by_check  # the zone's failure says it all


def test_a_region_agnostic_plan_names_the_region_of_the_az_id(checks, aws, mixed):
    context = _context(checks, mixed, _plan(region=None), region="eu-west-1")
    zone = checks.check_availability_zone(context, "usw2-az4")
    assert zone.advice.startswith("deploy to us-west-2")
    assert checks.region_of_zone_id("apne1-az4") == "ap-northeast-1"
    assert checks.region_of_zone_id("use1-az6") == "us-east-1"
    assert checks.region_of_zone_id("local") is None


def test_an_az_id_without_the_type_fails_naming_those_with_it(checks, aws, mixed):
    result = checks.check_offering(_context(checks, mixed), _node(availabilityZoneId="usw2-az2"))
    assert result.status == "fail"
    assert result.message == "trn1.32xlarge is not offered in usw2-az2 (us-west-2)"
    assert result.advice == "set availabilityZoneId to one of usw2-az1, usw2-az4"


def test_nodes_in_several_azs_are_checked_in_the_region(checks, aws, mixed):
    result = checks.check_offering(_context(checks, mixed), _node(instanceType="m7i.xlarge", availabilityZoneId=None))
    assert (result.status, result.message) == ("pass", "m7i.xlarge is offered in us-west-2")


def test_offerings_are_read_over_every_page(checks, mixed):
    ec2 = mixed.stub("ec2")
    expected = {
        "LocationType": "availability-zone-id",
        "Filters": [
            {"Name": "instance-type", "Values": ["trn1.32xlarge"]},
            {"Name": "location", "Values": ["usw2-az4"]},
        ],
    }
    ec2.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": [], "NextToken": "p2"}, expected)
    offering = {"InstanceType": "trn1.32xlarge", "LocationType": "availability-zone-id", "Location": "usw2-az4"}
    ec2.add_response(
        "describe_instance_type_offerings", {"InstanceTypeOfferings": [offering]}, {**expected, "NextToken": "p2"}
    )
    result = checks.check_offering(_context(checks, mixed), _node())
    assert result.status == "pass"
    mixed.assert_no_pending_responses()


# -------------------------------------------------------------------------------------------------- instance types


def test_the_instance_type_has_the_plans_efa_interfaces(checks, aws, mixed):
    context = _context(checks, mixed)
    assert checks.check_instance_type(context, _node()).message == "trn1.32xlarge: 128 vCPUs, 8 of 8 EFA interfaces"
    too_many = checks.check_instance_type(context, _node(efaInterfaces=16))
    assert (too_many.status, too_many.message) == (
        "fail",
        "trn1.32xlarge has at most 8 EFA interfaces; the plan gives each node 16",
    )
    no_efa = checks.check_instance_type(context, _node(instanceType="m5.large", efaInterfaces=1))
    assert no_efa.status == "fail" and "m5.large has no EFA" in no_efa.message
    unknown = checks.check_instance_type(context, _node(instanceType="trn9.99xlarge"))
    assert (unknown.status, unknown.message) == ("fail", "EC2 does not know trn9.99xlarge in us-west-2")


# ------------------------------------------------------------------------------------------------------- addresses


@pytest.fixture
def subnets(aws):
    """Two /24 subnets of a new VPC in us-west-2: one in usw2-az4 (us-west-2d), one in usw2-az2 (us-west-2a)."""
    import boto3

    ec2 = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="t", aws_secret_access_key="t")
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    az4 = ec2.create_subnet(VpcId=vpc, CidrBlock="10.20.1.0/24", AvailabilityZone="us-west-2d")["Subnet"]
    az2 = ec2.create_subnet(VpcId=vpc, CidrBlock="10.20.2.0/24", AvailabilityZone="us-west-2a")["Subnet"]
    assert (az4["AvailabilityZoneId"], az4["AvailableIpAddressCount"]) == ("usw2-az4", 251)
    yield {"az4": az4["SubnetId"], "az2": az2["SubnetId"]}
    ec2.delete_subnet(SubnetId=az4["SubnetId"])
    ec2.delete_subnet(SubnetId=az2["SubnetId"])
    ec2.delete_vpc(VpcId=vpc)


def test_free_addresses_cover_each_node_and_a_warm_interface(checks, mixed, subnets):
    # trn1.32xlarge: 50 addresses per interface; each node takes 1 + 50.
    fits = _plan(_node(subnetId=subnets["az4"], count=4))
    result = checks.check_subnet_addresses(_context(checks, mixed, fits), subnets["az4"])
    assert result.status == "pass"
    assert result.message == f"{subnets['az4']} (usw2-az4) has 251 free IPv4 addresses; AcceleratedNodes take 204"
    short = _plan(_node(subnetId=subnets["az4"], count=4), _node(name="More", subnetId=subnets["az4"], count=1))
    result = checks.check_subnet_addresses(_context(checks, mixed, short), subnets["az4"])
    assert result.status == "fail"
    assert result.message.endswith("AcceleratedNodes, More take 255: 4 short")
    # On an update the previous deploy's nodes may hold addresses: not a failure.
    previous = _plan(_node(subnetId=subnets["az4"], count=4))
    result = checks.check_subnet_addresses(_context(checks, mixed, short, previous=previous), subnets["az4"])
    assert result.status == "unknown"


def test_a_subnet_in_another_az_or_missing_fails(checks, mixed, subnets):
    plan = _plan(_node(subnetId=subnets["az2"]))
    result = checks.check_subnet_addresses(_context(checks, mixed, plan), subnets["az2"])
    assert (result.status, result.message) == (
        "fail",
        f"{subnets['az2']} is in usw2-az2, but AcceleratedNodes launch in usw2-az4",
    )
    missing = checks.check_subnet_addresses(_context(checks, mixed), "subnet-0123456789abcdef0")
    assert (missing.status, missing.message) == ("fail", "subnet-0123456789abcdef0 is not a subnet of us-west-2")


# ---------------------------------------------------------------------------------------------------------- quotas


@pytest.mark.parametrize(
    "instance_type, family",
    [
        ("trn1.32xlarge", "trn"),
        ("trn2u.48xlarge", "trn"),
        ("inf2.xlarge", "inf"),
        ("p5.48xlarge", "p"),
        ("p6e-gb200.36xlarge", "p"),
        ("g6e.xlarge", "g"),
        ("vt1.3xlarge", "g"),
        ("m7i.xlarge", "standard"),
        ("c7gn.16xlarge", "standard"),
        ("im4gn.large", "standard"),
        ("hpc7a.96xlarge", "hpc"),
        ("dl1.24xlarge", "dl"),
        ("d3.xlarge", "standard"),
        ("x2idn.16xlarge", "x"),
        ("u-6tb1.metal", "high-memory"),
        ("u7i-12tb.224xlarge", "high-memory"),
        ("f2.12xlarge", "f"),
        ("mac2.metal", None),
    ],
)
def test_each_instance_type_maps_to_its_on_demand_quota(checks, instance_type, family):
    assert checks.quota_family(instance_type) == family


def test_a_quota_too_small_fails_with_the_figures_and_the_request(checks, aws, mixed):
    dimensions = {**TRN_DIMENSIONS, "Test": "exceeded"}
    _put_usage("us-west-2", dimensions, 128)
    mixed.stub("service-quotas").add_response(
        "get_service_quota",
        _quota("L-2C3B7624", 256, dimensions),
        {"ServiceCode": "ec2", "QuotaCode": "L-2C3B7624"},
    )
    result = checks.check_on_demand_vcpus(_context(checks, mixed), "trn")
    assert result.status == "fail"
    assert result.message == ("Running On-Demand Trn instances: 128 vCPUs in use + 256 for trn1.32xlarge = 384 of 256")
    assert "--service-code ec2 --quota-code L-2C3B7624 --desired-value 384" in result.advice
    assert "Service Quotas console" in result.advice


def test_the_usage_metric_is_the_one_the_quota_names(checks, aws, mixed):
    odd = {"Class": "Trn/OnDemand", "Resource": "vCPU", "Service": "EC2", "Type": "Resource", "Shard": "odd-7"}
    _put_usage("us-west-2", odd, 100)
    _put_usage("us-west-2", {**odd, "Shard": "other"}, 5000)  # another metric: not this quota's
    asked: List[Dict[str, Any]] = []
    mixed.session.events.register(
        "provide-client-params.cloudwatch.GetMetricData", lambda params, **_: asked.append(copy.deepcopy(params))
    )
    mixed.stub("service-quotas").add_response(
        "get_service_quota", _quota("L-2C3B7624", 512, odd), {"ServiceCode": "ec2", "QuotaCode": "L-2C3B7624"}
    )
    result = checks.check_on_demand_vcpus(_context(checks, mixed), "trn")
    assert (result.status, result.message) == (
        "pass",
        "Running On-Demand Trn instances: 100 vCPUs in use + 256 for trn1.32xlarge = 356 of 512",
    )
    (params,) = asked
    (query,) = params["MetricDataQueries"]
    metric = query["MetricStat"]["Metric"]
    assert (metric["Namespace"], metric["MetricName"]) == ("AWS/Usage", "ResourceCount")
    assert {d["Name"]: d["Value"] for d in metric["Dimensions"]} == odd
    assert query["MetricStat"]["Stat"] == "Maximum"
    assert params["EndTime"] - params["StartTime"] == dt.timedelta(hours=1)


def test_an_unset_quota_falls_back_to_the_aws_default(checks, aws, mixed):
    quotas = mixed.stub("service-quotas")
    asked = {"ServiceCode": "ec2", "QuotaCode": "L-2C3B7624"}
    quotas.add_client_error(
        "get_service_quota", "NoSuchResourceException", "no applied value", 400, expected_params=asked
    )
    quotas.add_response("get_aws_default_service_quota", _quota("L-2C3B7624", 0, {**TRN_DIMENSIONS, "T": "d"}), asked)
    result = checks.check_on_demand_vcpus(_context(checks, mixed), "trn")
    assert result.status == "fail"
    assert result.message.endswith("= 256 of 0 (the AWS default; the account has no applied value)")


def test_a_missing_permission_is_unknown_never_fail(checks, aws, mixed):
    mixed.stub("service-quotas").add_client_error(
        "get_service_quota", "AccessDeniedException", "not authorized to perform servicequotas:GetServiceQuota", 400
    )
    results = checks.run_checks(_plan(kubernetesVersion=None), mixed)
    quota = _by_check(results)["on-demand-vcpus/Trn"]
    assert quota.status == "unknown"
    assert quota.message.startswith("servicequotas:GetServiceQuota was refused (AccessDeniedException)")
    assert "allow servicequotas:GetServiceQuota" in quota.advice
    assert [r.check for r in results if r.status == "fail"] == []


def test_a_quota_without_usage_metric_fails_only_when_the_plan_alone_exceeds_it(checks, aws, mixed):
    quotas = mixed.stub("service-quotas")
    quotas.add_response("get_service_quota", _quota("L-2C3B7624", 128))
    quotas.add_response("get_service_quota", _quota("L-2C3B7624", 1024))
    context = _context(checks, mixed)
    assert checks.check_on_demand_vcpus(context, "trn").status == "fail"
    later = checks.guarded("q", lambda: checks.check_on_demand_vcpus(context, "trn"))
    assert later.status == "unknown" and "names no usage metric" in later.message


def test_nodes_in_a_reservation_need_no_on_demand_quota(checks, aws, mixed):
    plan = _plan(
        _node(name="SystemNodes", instanceType="m7i.xlarge", availabilityZoneId=None, efaInterfaces=0),
        _node(capacityType="capacity-block", capacityReservationId="cr-0123456789abcdef0"),
        _node(name="Odcr", capacityType="reservation", capacityReservationId="cr-0123456789abcdef1"),
    )
    names = [name for name, _ in checks.planned_checks(_context(checks, mixed, plan))]
    assert [n for n in names if n.startswith("on-demand-vcpus/")] == ["on-demand-vcpus/Standard"]


def test_an_update_does_not_count_the_previous_nodes_twice(checks, aws, mixed):
    dimensions = {**TRN_DIMENSIONS, "Test": "update"}
    _put_usage("us-west-2", dimensions, 256)  # the stack's own two nodes, running
    quotas = mixed.stub("service-quotas")
    for _ in range(2):
        quotas.add_response("get_service_quota", _quota("L-2C3B7624", 512, dimensions))
    grown = _plan(_node(count=4))
    without_previous = checks.check_on_demand_vcpus(_context(checks, mixed, grown), "trn")
    assert without_previous.status == "fail"  # 256 + 512 > 512
    with_previous = checks.check_on_demand_vcpus(_context(checks, mixed, grown, previous=_plan()), "trn")
    assert with_previous.status == "unknown"  # fits only if the 256 in use are the stack's own
    assert "it fits only if 256 of the vCPUs in use are this stack's own nodes" in with_previous.message
    assert checks.capacity_verdict(used=256, needed=768, limit=512, previous=256) == "fail"


# ---------------------------------------------------------------------------------------------------- retries


class _Throttle:
    """A before-send hook that answers EC2's throttling error ``times`` times, then lets moto answer."""

    body = (
        b'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>RequestLimitExceeded</Code>'
        b"<Message>Request limit exceeded.</Message></Error></Errors><RequestID>r-1</RequestID></Response>"
    )

    def __init__(self, times: int) -> None:
        self.times = times
        self.calls = 0

    def __call__(self, request, **_: Any):
        self.calls += 1
        if self.calls > self.times:
            return None
        raw = types.SimpleNamespace(stream=lambda **__: iter([self.body]))
        return AWSResponse(request.url, 503, {}, raw)


@pytest.fixture
def no_sleep(monkeypatch):
    slept: List[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=slept.append))
    return slept


def test_throttling_is_retried(checks, aws, mixed, no_sleep):
    throttle = _Throttle(times=2)
    context = _context(checks, mixed)
    context.client("ec2").meta.events.register_first("before-send.ec2.DescribeAvailabilityZones", throttle)
    assert checks.check_availability_zone(context, "usw2-az4").status == "pass"
    assert throttle.calls == 3 and len(no_sleep) == 2
    # botocore reads max_attempts as retries: 8 retries after the first attempt.
    assert context.client("ec2").meta.config.retries == {"mode": "standard", "total_max_attempts": 9}


def test_throttling_that_never_ends_is_unknown(checks, aws, mixed, no_sleep):
    throttle = _Throttle(times=100)
    context = _context(checks, mixed)
    context.client("ec2").meta.events.register_first("before-send.ec2.DescribeAvailabilityZones", throttle)
    result = checks.guarded("availability-zone/usw2-az4", lambda: checks.check_availability_zone(context, "usw2-az4"))
    assert result.status == "unknown"
    assert result.message.startswith("ec2:DescribeAvailabilityZones failed (RequestLimitExceeded)")
    assert throttle.calls == 9  # the first attempt and 8 retries


def test_every_client_has_the_retry_configuration(checks, aws, mixed):
    context = _context(checks, mixed)
    context.client("ec2")
    context.client("cloudwatch")
    for _service, region, config in mixed.asked:
        assert region == "us-west-2"
        assert config is checks.CLIENT_CONFIG
    config = checks.CLIENT_CONFIG
    assert (config.retries, config.connect_timeout, config.read_timeout) == (
        {"mode": "standard", "total_max_attempts": 9},
        5,
        15,
    )


def test_an_api_this_botocore_lacks_is_unknown(checks, aws, mixed):
    context = _context(checks, mixed)
    result = checks.guarded("x", lambda: context.call("eks", "describe_future_things"))
    assert result.status == "unknown" and "does not know this API" in result.message


# ------------------------------------------------------------------------------------------- capacity reservations


def _reservation(**overrides: Any) -> Dict[str, Any]:
    reservation = {
        "CapacityReservationId": "cr-0123456789abcdef0",
        "InstanceType": "trn1.32xlarge",
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": "us-west-2d",
        "AvailabilityZoneId": "usw2-az4",
        "TotalInstanceCount": 2,
        "AvailableInstanceCount": 2,
        "State": "active",
        "ReservationType": "capacity-block",
        "StartDate": START,
        "EndDate": END,
    }
    reservation.update(overrides)
    return {key: value for key, value in reservation.items() if value is not None}


def _reservation_result(checks, mixed, node=None, previous=None, error=None, **overrides):
    ec2 = mixed.stub("ec2")
    expected = {"CapacityReservationIds": ["cr-0123456789abcdef0"]}
    if error:
        ec2.add_client_error("describe_capacity_reservations", error, "no such reservation", 400, None, expected)
    else:
        ec2.add_response(
            "describe_capacity_reservations", {"CapacityReservations": [_reservation(**overrides)]}, expected
        )
    node = node or _node(capacityType="capacity-block", capacityReservationId="cr-0123456789abcdef0")
    result = checks.check_capacity_reservation(_context(checks, mixed, _plan(node), previous=previous), node)
    mixed.assert_no_pending_responses()
    return result


def test_an_active_capacity_block_passes(checks, mixed):
    result = _reservation_result(checks, mixed)
    assert (result.status, result.message) == (
        "pass",
        "Capacity Block cr-0123456789abcdef0 is active until 2030-01-20 11:30 UTC: 2 of 2 trn1.32xlarge free",
    )


@pytest.mark.parametrize("state", ["scheduled", "payment-pending"])
def test_a_capacity_block_not_yet_started_passes_for_karpenter(checks, mixed, state):
    result = _reservation_result(checks, mixed, State=state)
    assert result.status == "pass"
    assert f"is {state}: nodes can launch from 2030-01-06 11:30 UTC until 2030-01-20 11:30 UTC" in result.message
    assert "Karpenter launches them when pods ask for them" in result.message


def test_a_capacity_block_not_yet_started_fails_for_a_node_group(checks, mixed):
    node = _node(capacityType="capacity-block", capacityReservationId="cr-0123456789abcdef0", provisioning="node-group")
    result = _reservation_result(checks, mixed, node=node, State="scheduled")
    assert result.status == "fail"
    assert "the managed node group launches its 2 nodes during the deploy" in result.message
    assert result.advice.startswith("deploy after 2030-01-06 11:30 UTC")


@pytest.mark.parametrize("state", ["expired", "cancelled", "failed", "payment-failed"])
def test_an_ended_reservation_fails(checks, mixed, state):
    result = _reservation_result(checks, mixed, State=state)
    assert result.status == "fail" and f"its state is {state}" in result.message


def test_a_reservation_that_does_not_match_the_nodes_fails_with_each_difference(checks, mixed):
    result = _reservation_result(
        checks, mixed, InstanceType="p5.48xlarge", AvailabilityZoneId="usw2-az1", TotalInstanceCount=1,
        ReservationType="default",
    )  # fmt: skip
    assert result.status == "fail"
    for part in (
        "it holds p5.48xlarge, the nodes are trn1.32xlarge",
        "it is in usw2-az1, the nodes in usw2-az4",
        "it is an On-Demand Capacity Reservation, not a Capacity Block",
        "it holds 1 instances, the plan launches up to 2",
    ):
        assert part in result.message


def test_an_unknown_reservation_fails(checks, mixed):
    result = _reservation_result(checks, mixed, error="InvalidCapacityReservationId.NotFound")
    assert (result.status, result.message) == (
        "fail",
        "cr-0123456789abcdef0 is not a capacity reservation of this account in us-west-2",
    )


def test_a_busy_reservation_fails_on_create_and_is_unknown_on_update(checks, mixed):
    node = _node(capacityType="reservation", capacityReservationId="cr-0123456789abcdef0")
    busy = {"ReservationType": "default", "AvailableInstanceCount": 0, "EndDate": None}
    created = _reservation_result(checks, mixed, node=node, **busy)
    assert created.status == "fail" and created.message.startswith(
        "Capacity Reservation cr-0123456789abcdef0 is active: 0 of 2 trn1.32xlarge free"
    )
    updated = _reservation_result(checks, mixed, node=node, previous=_plan(node), **busy)
    assert updated.status == "unknown"


# -------------------------------------------------------------------------------------------------------- version


def _version(status: str, version: str = "1.36") -> Dict[str, Any]:
    return {
        "clusterVersions": [
            {
                "clusterVersion": version,
                "clusterType": "eks",
                "versionStatus": status,
                "endOfStandardSupportDate": START,
                "endOfExtendedSupportDate": END,
            }
        ]
    }


def test_the_kubernetes_version_in_standard_or_extended_support_passes(checks, mixed):
    eks = mixed.stub("eks")
    eks.add_response("describe_cluster_versions", _version("STANDARD_SUPPORT"), {"clusterVersions": ["1.36"]})
    eks.add_response("describe_cluster_versions", _version("EXTENDED_SUPPORT"), {"clusterVersions": ["1.36"]})
    context = _context(checks, mixed)
    standard = checks.check_kubernetes_version(context, "1.36")
    assert (standard.status, standard.message) == (
        "pass",
        "Kubernetes 1.36: standard support until 2030-01-06 11:30 UTC",
    )
    extended = checks.check_kubernetes_version(context, "1.36")
    assert extended.status == "pass" and "costs more per hour" in extended.message


def test_a_kubernetes_version_eks_does_not_offer_fails_naming_those_it_does(checks, mixed):
    eks = mixed.stub("eks")
    eks.add_response("describe_cluster_versions", {"clusterVersions": []}, {"clusterVersions": ["1.99"]})
    offered = {"clusterVersions": [{"clusterVersion": v, "versionStatus": "STANDARD_SUPPORT"} for v in ("1.9", "1.35")]}
    eks.add_response("describe_cluster_versions", offered, {})
    eks.add_response("describe_cluster_versions", _version("UNSUPPORTED", "1.20"), {"clusterVersions": ["1.20"]})
    context = _context(checks, mixed)
    missing = checks.check_kubernetes_version(context, "1.99")
    assert (missing.status, missing.message, missing.advice) == (
        "fail",
        "EKS does not offer Kubernetes 1.99 in us-west-2",
        "use one of 1.9, 1.35",
    )
    assert checks.check_kubernetes_version(context, "1.20").status == "fail"
    mixed.assert_no_pending_responses()


# -------------------------------------------------------------------------------------------------------- storage


def test_lustre_storage_counts_the_accounts_file_systems_of_the_type(checks, aws):
    import boto3

    session = MixedSession("us-east-2")
    fsx = boto3.client("fsx", region_name="us-east-2", aws_access_key_id="t", aws_secret_access_key="t")
    for deployment_type, size in (("PERSISTENT_2", 2400), ("SCRATCH_2", 9600)):
        fsx.create_file_system(
            FileSystemType="LUSTRE",
            StorageCapacity=size,
            SubnetIds=["subnet-0123456789abcdef0"],
            LustreConfiguration={"DeploymentType": deployment_type},
        )
    quotas = session.stub("service-quotas")
    for storage in (3600, 2400):
        quotas.add_response(
            "get_service_quota", _quota("L-FD6F2F22", 100), {"ServiceCode": "fsx", "QuotaCode": "L-FD6F2F22"}
        )
        quotas.add_response(
            "get_service_quota", _quota("L-8F1B9C74", storage), {"ServiceCode": "fsx", "QuotaCode": "L-8F1B9C74"}
        )
    lustre = {"kind": "lustre", "storageGib": 1200, "deploymentType": "PERSISTENT_2", "throughputPerUnitStorage": 125}
    context = _context(checks, session, _plan(fileSystems=[lustre]), region="us-east-2")
    fits = checks.check_lustre_quotas(context, "PERSISTENT_2")
    assert fits.status == "pass"
    assert "Lustre Persistent_2 storage capacity (L-8F1B9C74): 2400 GiB + 1200 GiB of 3600 GiB" in fits.message
    short = checks.check_lustre_quotas(context, "PERSISTENT_2")
    assert short.status == "fail"
    assert "--service-code fsx --quota-code L-8F1B9C74 --desired-value 3600" in short.advice


def test_efs_file_systems_fit_the_accounts_quota(checks, aws):
    import boto3

    session = MixedSession("eu-west-2")
    efs = boto3.client("efs", region_name="eu-west-2", aws_access_key_id="t", aws_secret_access_key="t")
    for token in ("a", "b"):
        efs.create_file_system(CreationToken=token)
    asked = {"ServiceCode": "elasticfilesystem", "QuotaCode": "L-848C634D"}
    session.stub("service-quotas").add_response("get_service_quota", _quota("L-848C634D", 2), asked)
    result = checks.check_efs_file_systems(_context(checks, session, _plan(fileSystems=[{"kind": "efs"}]), "eu-west-2"))
    assert (result.status, result.message) == ("fail", "File systems per account (L-848C634D): 2 + 1 of 2")


# --------------------------------------------------------------------------------------------- the whole run


def test_the_seed_plan_passes_every_check_and_says_in_one_line_what_it_cannot_check(checks, aws, mixed):
    plan = _plan(
        _node(),
        _node(name="SystemNodes", instanceType="m7i.xlarge", availabilityZoneId=None, efaInterfaces=0),
        fileSystems=[{"kind": "lustre", "storageGib": 1200, "deploymentType": "PERSISTENT_2"}],
    )
    quotas = mixed.stub("service-quotas")
    quotas.add_response("get_service_quota", _quota("L-2C3B7624", 512, {**TRN_DIMENSIONS, "Run": "seed"}))
    quotas.add_response("get_service_quota", _quota("L-1216C47A", 64, {"Class": "Standard/OnDemand", "Run": "seed"}))
    quotas.add_response("get_service_quota", _quota("L-FD6F2F22", 100))
    quotas.add_response("get_service_quota", _quota("L-8F1B9C74", 100800))
    mixed.stub("eks").add_response("describe_cluster_versions", _version("STANDARD_SUPPORT"))
    results = checks.run_checks(plan, mixed)
    assert [(r.check, r.status) for r in results] == [
        ("availability-zone/usw2-az4", "pass"),
        ("instance-type/AcceleratedNodes", "pass"),
        ("offering/AcceleratedNodes", "pass"),
        ("gang-capacity/AcceleratedNodes", "unknown"),
        ("instance-type/SystemNodes", "pass"),
        ("offering/SystemNodes", "pass"),
        ("on-demand-vcpus/Trn", "pass"),
        ("on-demand-vcpus/Standard", "pass"),
        ("kubernetes-version/1.36", "pass"),
        ("fsx-lustre/PERSISTENT_2", "pass"),
    ]
    mixed.assert_no_pending_responses()
    assert {service for service, _, _ in mixed.asked} == {"ec2", "service-quotas", "cloudwatch", "eks", "fsx"}


def test_no_check_starts_near_the_deadline(checks, aws, mixed):
    left = iter([60.0, 19.0])
    results = checks.run_checks(_plan(kubernetesVersion=None), mixed, remaining_seconds=lambda: next(left, 5.0))
    assert results[0].status == "pass"
    assert {r.status for r in results[1:]} == {"unknown"}
    assert results[1].message == "not started: fewer than 20 s were left before the function's timeout"


def test_a_check_that_breaks_is_unknown(checks):
    def broken():
        raise KeyError("VCpuInfo")

    result = checks.guarded("instance-type/X", broken)
    assert (result.status, result.message) == ("unknown", "the check broke: KeyError: 'VCpuInfo'")


# -------------------------------------------------------------------------------------------------------- reports


def test_the_failure_message_names_each_failure_and_what_to_do(checks):
    results = [
        checks.CheckResult("on-demand-vcpus/Trn", "fail", "384 of 256 vCPUs", "request 384"),
        checks.CheckResult("offering/AcceleratedNodes", "pass", "offered"),
        checks.CheckResult("kubernetes-version/1.36", "unknown", "refused", "allow eks:DescribeClusterVersions"),
    ]
    assert checks.failure_message(results) == (
        "Preflight: 1 of 3 checks failed.\n"
        "- on-demand-vcpus/Trn: 384 of 256 vCPUs. What to do: request 384\n"
        "1 check could not be made (kubernetes-version/1.36): see the preflight function's log."
    )


def test_a_long_failure_message_is_cut_with_the_count_of_lines_left_out(checks):
    results = [checks.CheckResult(f"subnet-addresses/s-{i}", "fail", "x" * 100, "y" * 50) for i in range(100)]
    text = checks.failure_message(results)
    assert len(text) <= 3500
    omitted = int(text.rsplit("… ", 1)[1].split(" ")[0])
    assert text.count("\n- ") + omitted == 100
    assert text.endswith("more lines omitted: see the preflight function's log.")


def test_the_table_has_a_row_per_check_and_the_advice_of_failures(checks):
    results = [
        checks.CheckResult("availability-zone/usw2-az4", "pass", "usw2-az4 is us-west-2d"),
        checks.CheckResult("on-demand-vcpus/Trn", "fail", "384 of 256", "request an increase"),
    ]
    lines = checks.format_table(results).splitlines()
    assert lines[0].split() == ["CHECK", "STATUS", "MESSAGE"]
    assert lines[1].split()[:2] == ["availability-zone/usw2-az4", "pass"]
    assert lines[2].split()[:2] == ["on-demand-vcpus/Trn", "fail"]
    assert lines[3].strip() == "→ request an increase"


def test_the_iam_actions_are_read_only_and_cover_every_call(checks):
    import inspect

    source = inspect.getsource(checks)
    methods = {
        "describe_availability_zones": "ec2:DescribeAvailabilityZones",
        "describe_instance_types": "ec2:DescribeInstanceTypes",
        "describe_instance_type_offerings": "ec2:DescribeInstanceTypeOfferings",
        "describe_subnets": "ec2:DescribeSubnets",
        "describe_capacity_reservations": "ec2:DescribeCapacityReservations",
        "get_service_quota": "servicequotas:GetServiceQuota",
        "get_aws_default_service_quota": "servicequotas:GetAWSDefaultServiceQuota",
        "get_metric_data": "cloudwatch:GetMetricData",
        "describe_cluster_versions": "eks:DescribeClusterVersions",
    }
    for method, action in methods.items():
        assert f'"{method}"' in source and action in checks.IAM_ACTIONS
    assert {"fsx:DescribeFileSystems", "elasticfilesystem:DescribeFileSystems"} <= set(checks.IAM_ACTIONS)
    assert all(a.split(":")[1].startswith(("Describe", "Get", "List")) for a in checks.IAM_ACTIONS)


@pytest.mark.parametrize(
    "node, then",
    [
        ({}, "gives back the nodes it holds and tries again"),
        ({"provisioning": "node-group"}, "the node group's creation fails the deploy"),
    ],
)
def test_an_on_demand_gang_in_a_placement_group_is_one_unknown_line_saying_what_happens_when_ec2_refuses_part(
    checks, mixed, node, then
):
    plan = _plan(_node(**node))
    (result,) = [check() for name, check in checks.planned_checks(_context(checks, mixed, plan)) if "gang" in name]
    assert result.status == "unknown" and then in result.message and "\n" not in result.message
    if not node:  # the Lambda cannot import the library: its text must follow the release program's defaults
        from trainium_eks.manifests.jobs.job_release_program import CAPACITY_SETTINGS

        timeout, attempts = CAPACITY_SETTINGS["timeout"][1], CAPACITY_SETTINGS["attempts"][1]
        assert f"{timeout // 60} minutes by default, {attempts} attempts" in result.message
    assert result.message.startswith("no EC2 call says ahead whether 2 x trn1.32xlarge fit in one cluster placement")


@pytest.mark.parametrize(
    "node",
    [
        {"count": 1},
        {"efaInterfaces": 0},
        {"capacityType": "capacity-block", "capacityReservationId": "cr-0123456789abcdef0"},
    ],
    ids=["one node", "no EFA, no placement group", "reserved"],
)
def test_no_gang_line_for_one_node_nodes_without_a_placement_group_or_reserved_nodes(checks, mixed, node):
    names = [name for name, _ in checks.planned_checks(_context(checks, mixed, _plan(_node(**node))))]
    assert not [name for name in names if name.startswith("gang-capacity/")]
