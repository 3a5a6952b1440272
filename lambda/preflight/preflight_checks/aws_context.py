"""The AWS side of one run: its clients, the IAM actions they call, and the instance type facts read once."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import botocore
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from .results import CannotCheck

CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 8},
    connect_timeout=5,
    read_timeout=15,
    user_agent_extra="trainium-eks-preflight",
)
"""The configuration of every client: throttling and transient errors are retried (standard mode, 8 retries)."""

IAM_ACTIONS: Tuple[str, ...] = (
    "cloudwatch:GetMetricData",
    "ec2:DescribeAvailabilityZones",
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeSubnets",
    "eks:DescribeClusterVersions",
    "elasticfilesystem:DescribeFileSystems",
    "fsx:DescribeFileSystems",
    "servicequotas:GetAWSDefaultServiceQuota",
    "servicequotas:GetServiceQuota",
)
"""Every IAM action the checks call: read-only actions without resource-level permissions (Service Authorization
Reference: Amazon EC2, Service Quotas, CloudWatch, Amazon EKS, Amazon FSx, Amazon EFS)."""

HANDLER_IAM_ACTIONS: Tuple[str, ...] = ("cloudformation:DescribeStacks",)
"""What ``index.py`` calls besides the checks, on its own stack only (``arn:...:stack/<name>/*``): on an update it
reads the stack's status, and answers SUCCESS without checking while the stack rolls back. Without it the checks run
in the rollback too."""

ACCESS_DENIED = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "UnauthorizedException",
        "AuthFailure",
        "AuthorizationError",
        "NotAuthorized",
    }
)
NOT_OFFERED = frozenset(
    {
        "InvalidAction",
        "UnknownOperationException",
        "UnsupportedOperation",
        "OptInRequired",
        "InvalidParameterValue",
        "InvalidParameterCombination",
        "InvalidParameter",
        "ValidationException",
        "ValidationError",
        "IllegalArgumentException",
        "InvalidParameterValueException",
    }
)
_IAM_PREFIX = {"service-quotas": "servicequotas", "efs": "elasticfilesystem"}


class AwsContext:
    """The clients of one run (one per service, with :data:`CLIENT_CONFIG`), the instance type facts it has read, and
    the plan of the previous deploy (an update), whose resources may already be in the use AWS reports.

    ``forward`` says that the run is an update known to go forward (not a rollback), the only run in which the plan
    may be compared with the previous one for what an update cannot change (:mod:`.updates`): in a rollback the two
    plans are swapped, and a rollback that fails leaves the stack in ``UPDATE_ROLLBACK_FAILED``."""

    def __init__(
        self,
        session: Any,
        region: str,
        plan: Mapping[str, Any],
        *,
        previous: Optional[Mapping[str, Any]] = None,
        forward: bool = False,
    ) -> None:
        self.session = session
        self.region = region
        self.plan = plan
        self.previous = previous
        self.forward = forward and previous is not None
        self._clients: Dict[str, Any] = {}
        self._instance_types: Dict[str, Optional[Dict[str, Any]]] = {}
        self.zones_not_in_region: set = set()

    def client(self, service: str) -> Any:
        """The client of ``service`` in the run's region (created once)."""
        if service not in self._clients:
            self._clients[service] = self.session.client(service, region_name=self.region, config=CLIENT_CONFIG)
        return self._clients[service]

    def action(self, service: str, method: str) -> str:
        """The IAM action of ``client(service).<method>`` (``ec2:DescribeSubnets``)."""
        client = self.client(service)
        operation = client.meta.method_to_api_mapping.get(method, method)
        return f"{_IAM_PREFIX.get(service, service)}:{operation}"

    def call(self, service: str, method: str, **params: Any) -> Dict[str, Any]:
        """``client(service).<method>(**params)``; a ClientError carries the IAM action (``error.iam_action``)."""
        client = self.client(service)
        action = self.action(service, method)
        if not hasattr(client, method):
            raise CannotCheck(
                f"{action}: botocore {botocore.__version__} here does not know this API",
                "use a newer boto3 (the Lambda runtime's or the command line's environment)",
            )
        try:
            return getattr(client, method)(**params)
        except (ClientError, BotoCoreError) as error:
            error.iam_action = action  # type: ignore[attr-defined]
            raise

    def pages(self, service: str, method: str, key: str, **params: Any) -> List[Any]:
        """Every item of ``key`` over all pages of ``<method>(**params)`` (botocore's paginator)."""
        client = self.client(service)
        action = self.action(service, method)
        if not hasattr(client, method) or not client.can_paginate(method):
            raise CannotCheck(
                f"{action}: botocore {botocore.__version__} here cannot page this API", "use a newer boto3"
            )
        items: List[Any] = []
        try:
            for page in client.get_paginator(method).paginate(**params):
                items.extend(page.get(key, []))
        except (ClientError, BotoCoreError) as error:
            error.iam_action = action  # type: ignore[attr-defined]
            raise
        return items

    def instance_type(self, name: str) -> Optional[Dict[str, Any]]:
        """``ec2:DescribeInstanceTypes`` of ``name`` in the region (read once), or None when EC2 does not know it."""
        if name not in self._instance_types:
            try:
                found = self.call("ec2", "describe_instance_types", InstanceTypes=[name]).get("InstanceTypes", [])
            except ClientError as error:
                if error_code(error) not in ("InvalidInstanceType", "InvalidParameterValue"):
                    raise
                found = []
            self._instance_types[name] = found[0] if found else None
        return self._instance_types[name]

    def vcpus(self, name: str) -> int:
        """The default vCPUs of ``name`` (``VCpuInfo.DefaultVCpus``); CannotCheck when EC2 does not know the type."""
        facts = self.instance_type(name)
        if facts is None:
            raise CannotCheck(f"{name} is not an instance type of {self.region}, so its vCPUs are unknown")
        return int(facts["VCpuInfo"]["DefaultVCpus"])


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))
