"""The EC2 On-Demand vCPU quotas: families, usage metrics, defaults, refusals, updates."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any, Dict, List

import pytest

from tests.support.preflight_aws import TRN_DIMENSIONS, by_check, put_usage
from tests.support.preflight_aws import aws_context as _context
from tests.support.preflight_aws import node as _node
from tests.support.preflight_aws import plan as _plan
from tests.support.preflight_aws import quota as _quota


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
    put_usage("us-west-2", dimensions, 128)
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
    put_usage("us-west-2", odd, 100)
    put_usage("us-west-2", {**odd, "Shard": "other"}, 5000)  # another metric: not this quota's
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
    quota = by_check(results)["on-demand-vcpus/Trn"]
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
    put_usage("us-west-2", dimensions, 256)  # the stack's own two nodes, running
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
