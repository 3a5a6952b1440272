"""The Service Quotas and CloudWatch reads every quota check shares, and the verdict of a need against a quota."""

from __future__ import annotations

import datetime as _dt
from typing import Any, Dict, Mapping

from botocore.exceptions import ClientError

from .aws_context import AwsContext, error_code
from .results import FAIL, PASS, UNKNOWN, CannotCheck


def capacity_verdict(*, used: float, needed: float, limit: float, previous: float) -> str:
    """``pass`` when ``used + needed`` fits in ``limit``; ``fail`` when it does not fit even if the use already holds
    the previous deploy's ``previous`` (at most ``min(used, previous)`` of it can be this stack's own); ``unknown``
    between the two."""
    if used + needed <= limit:
        return PASS
    if used - min(used, previous) + needed > limit:
        return FAIL
    return UNKNOWN


def service_quota(context: AwsContext, service_code: str, quota_code: str) -> Dict[str, Any]:
    """The applied quota (``servicequotas:GetServiceQuota``), or the AWS default
    (``servicequotas:GetAWSDefaultServiceQuota``) when the account has no applied value (``NoSuchResourceException``).
    Service Quotas API reference, GetServiceQuota."""
    try:
        quota = context.call("service-quotas", "get_service_quota", ServiceCode=service_code, QuotaCode=quota_code)
        quota = dict(quota["Quota"])
    except ClientError as error:
        if error_code(error) != "NoSuchResourceException":
            raise
        quota = dict(
            context.call(
                "service-quotas", "get_aws_default_service_quota", ServiceCode=service_code, QuotaCode=quota_code
            )["Quota"]
        )
        quota["_default"] = True
    if quota.get("ErrorReason"):
        reason = quota["ErrorReason"]
        raise CannotCheck(
            f"Service Quotas could not read {service_code} {quota_code}: {reason.get('ErrorCode')}: "
            f"{reason.get('ErrorMessage')}",
            "check the quota in the Service Quotas console",
        )
    if quota.get("Value") is None:
        raise CannotCheck(f"Service Quotas gave no value for {service_code} {quota_code}")
    return quota


def quota_usage(context: AwsContext, usage_metric: Mapping[str, Any]) -> float:
    """The quota's current use: the greatest datapoint of the last hour of exactly the CloudWatch metric the quota's
    ``UsageMetric`` names (namespace, name, dimensions, recommended statistic), 0 without datapoints
    (``cloudwatch:GetMetricData``; Service Quotas user guide, "Service Quotas and Amazon CloudWatch alarms")."""
    named = (usage_metric.get("MetricDimensions") or {}).items()
    dimensions = [{"Name": key, "Value": value} for key, value in named]  # in the quota's order
    end = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    results = context.pages(
        "cloudwatch",
        "get_metric_data",
        "MetricDataResults",
        MetricDataQueries=[
            {
                "Id": "usage",
                "MetricStat": {
                    "Metric": {
                        "Namespace": usage_metric["MetricNamespace"],
                        "MetricName": usage_metric["MetricName"],
                        "Dimensions": dimensions,
                    },
                    "Period": 60,
                    "Stat": usage_metric.get("MetricStatisticRecommendation") or "Maximum",
                },
                "ReturnData": True,
            }
        ],
        StartTime=end - _dt.timedelta(hours=1),
        EndTime=end,
    )
    values = [float(value) for result in results for value in result.get("Values", [])]
    return max(values, default=0.0)
