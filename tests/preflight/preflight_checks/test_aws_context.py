"""The AWS context: retries, the clients' configuration, APIs botocore lacks, and the IAM actions."""

from __future__ import annotations

import types
from typing import Any, List

import botocore.endpoint
import pytest
from botocore.awsrequest import AWSResponse

from tests.support.preflight_aws import aws_context as _context


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


def test_the_iam_actions_are_read_only_and_cover_every_call(checks):
    from pathlib import Path

    source = "".join(path.read_text() for path in sorted(Path(checks.__file__).parent.glob("*.py")))
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
