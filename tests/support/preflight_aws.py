"""What the preflight tests share: plans and Service Quotas answers in the checks' shapes, and a boto3 session whose
clients are moto's except those stubbed with botocore's Stubber (the services moto does not implement)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Dict, List

import boto3
import botocore.loaders
import botocore.session
from botocore.stub import Stubber

_LOADER = botocore.loaders.create_loader()
"""One loader of botocore's service models for every session of the tests (it caches what it reads)."""


TRN_DIMENSIONS = {"Class": "Trn/OnDemand", "Resource": "vCPU", "Service": "EC2", "Type": "Resource"}
START = dt.datetime(2030, 1, 6, 11, 30, tzinfo=dt.timezone.utc)
END = dt.datetime(2030, 1, 20, 11, 30, tzinfo=dt.timezone.utc)


def node(**overrides: Any) -> Dict[str, Any]:
    node = {
        "name": "AcceleratedNodes",
        "instanceType": "trn1.32xlarge",
        "count": 2,
        "availabilityZoneId": "usw2-az4",
        "subnetId": None,
        "ipInterfaces": 1,
        "efaInterfaces": 8,
        "capacityReservationId": None,
        "capacityType": "on-demand",
    }
    node.update(overrides)
    return node


def plan(*nodes: Dict[str, Any], **overrides: Any) -> Dict[str, Any]:
    plan = {
        "version": 1,
        "stack": "TrainiumEks",
        "region": "us-west-2",
        "kubernetesVersion": "1.36",
        "nodes": list(nodes) or [node()],
        "fileSystems": [],
    }
    plan.update(overrides)
    return plan


def quota(code: str, value: float, dimensions: Dict[str, str] | None = None, name: str = "quota") -> Dict[str, Any]:
    quota: Dict[str, Any] = {"ServiceCode": "ec2", "QuotaCode": code, "QuotaName": name, "Value": value}
    if dimensions is not None:
        quota["UsageMetric"] = {
            "MetricNamespace": "AWS/Usage",
            "MetricName": "ResourceCount",
            "MetricDimensions": dimensions,
            "MetricStatisticRecommendation": "Maximum",
        }
    return {"Quota": quota}


class MixedSession:
    """A boto3 session whose clients are moto's, except those of :meth:`stub`, which are Stubber-backed. It records
    every client asked for (service, region, config)."""

    def __init__(self, region: str = "us-west-2") -> None:
        self.region_name = region
        core = botocore.session.Session()
        core.register_component("data_loader", _LOADER)
        self.session = boto3.session.Session(
            region_name=region, aws_access_key_id="testing", aws_secret_access_key="testing", botocore_session=core
        )
        self.stubbed: Dict[str, Any] = {}
        self.stubbers: Dict[str, Stubber] = {}
        self.asked: List[tuple] = []

    def stub(self, service: str) -> Stubber:
        from preflight_checks import CLIENT_CONFIG

        client = self.session.client(service, region_name=self.region_name, config=CLIENT_CONFIG)
        stubber = Stubber(client)
        stubber.activate()
        self.stubbed[service] = client
        self.stubbers[service] = stubber
        return stubber

    def client(self, service: str, region_name: Any = None, config: Any = None, **_: Any) -> Any:
        self.asked.append((service, region_name, config))
        if service in self.stubbed:
            return self.stubbed[service]
        return self.session.client(service, region_name=region_name or self.region_name, config=config)

    def assert_no_pending_responses(self) -> None:
        for stubber in self.stubbers.values():
            stubber.assert_no_pending_responses()


def put_usage(region: str, dimensions: Dict[str, str], value: float) -> None:
    """Put one ``AWS/Usage`` ``ResourceCount`` figure of ``dimensions`` into moto's CloudWatch, five minutes old."""
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


def aws_context(checks, session, plan_=None, region="us-west-2", previous=None):
    """The checks' ``AwsContext`` of ``session`` for ``plan_`` (default: :func:`plan`)."""
    return checks.AwsContext(session, region, plan_ or plan(), previous=previous)


def by_check(results) -> Dict[str, Any]:
    """Check name -> result."""
    return {result.check: result for result in results}


def cluster_versions(status: str, version: str = "1.36") -> Dict[str, Any]:
    """An ``eks:DescribeClusterVersions`` answer of one version in ``status`` (``STANDARD_SUPPORT``...)."""
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
