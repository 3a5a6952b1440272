"""The preflight checks: what a stack launches, compared with what the account and the region offer, before the deploy.

The stack builds a *plan* at synth (``trainium_eks.constructs.preflight.plan_of``) and passes it, as one JSON string,
to the custom resource of ``index.py``; ``python -m trainium_eks preflight`` loads this file by path and runs the same
checks from the user's credentials. So this module imports only the standard library, boto3 and botocore.

The plan (``PLAN_VERSION`` 1)::

    {"version": 1, "stack": "TrainiumEks", "region": "us-west-2" | null,
     "kubernetesVersion": "1.36" | null,
     "nodes": [{"name": "AcceleratedNodes", "instanceType": "trn1.32xlarge",
                "count": 2,                           # nodes at most (Karpenter: the pool's limit)
                "availabilityZoneId": "usw2-az4" | null,   # null: several AZs (the system nodes)
                "subnetId": "subnet-..." | null,      # null: the stack creates the subnet
                "ipInterfaces": 1,                    # interfaces per node that take an IPv4 address
                "efaInterfaces": 8,                   # EFA devices per node
                "capacityReservationId": "cr-..." | null,   # null: none, or one the stack makes (unchecked)
                "capacityType": "on-demand" | "capacity-block" | "reservation",
                "provisioning": "karpenter" | "node-group"}],   # optional: how the nodes are launched
     "fileSystems": [{"kind": "lustre", "storageGib": 1200, "deploymentType": "PERSISTENT_2",
                      "throughputPerUnitStorage": 125}, {"kind": "efs"}]}

Each check gives a :class:`CheckResult` whose status is ``pass``, ``fail`` or ``unknown``. Only what AWS answered
makes a check fail; a check that cannot be made (a refused permission, an API, value or endpoint the partition or
region lacks, a timeout) is ``unknown``, with the call, the IAM action and the reason, and never fails the deploy.

Every client retries throttling and transient errors (botocore's ``standard`` retry mode with ``max_attempts`` 8,
which botocore reads as 8 retries after the first attempt: ``botocore.config.Config``, ``retries``)."""

from __future__ import annotations

import datetime as _dt
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import boto3
import botocore
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

PLAN_VERSION = 1
"""The version of the plan this module reads; :func:`check_plan` refuses any other."""

PASS = "pass"
FAIL = "fail"
UNKNOWN = "unknown"

CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 8},
    connect_timeout=5,
    read_timeout=15,
    user_agent_extra="trainium-eks-preflight",
)
"""The configuration of every client: throttling and transient errors are retried (standard mode, 8 retries)."""

RESERVE_SECONDS = 20.0
"""With a deadline, no check starts when fewer seconds than this remain (the rest are reported ``unknown``)."""

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

ON_DEMAND_QUOTAS: Dict[str, Tuple[str, str]] = {
    "standard": ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
    "dl": ("L-6E869C2A", "Running On-Demand DL instances"),
    "f": ("L-74FC7D96", "Running On-Demand F instances"),
    "g": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    "hpc": ("L-F7808C92", "Running On-Demand HPC instances"),
    "high-memory": ("L-43DA4232", "Running On-Demand High Memory instances"),
    "inf": ("L-1945791B", "Running On-Demand Inf instances"),
    "p": ("L-417A185B", "Running On-Demand P instances"),
    "trn": ("L-2C3B7624", "Running On-Demand Trn instances"),
    "x": ("L-7295265B", "Running On-Demand X instances"),
}
"""The EC2 On-Demand vCPU quotas (Service Quotas code ``ec2``), by quota family. The ten quota names and codes are
those of the EC2 user guide, "On-Demand Instance quotas"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-on-demand-instances.html#ec2-on-demand-instances-limits,
whose table links each quota to ``console.aws.amazon.com/servicequotas/home/services/ec2/quotas/<code>``); the
Service Quotas examples of the AWS CLI user guide show L-1216C47A's answer, with its ``UsageMetric``."""

_FAMILY_LETTERS = {
    "trn": "trn",
    "inf": "inf",
    "dl": "dl",
    "hpc": "hpc",
    "vt": "g",
    "g": "g",
    "p": "p",
    "f": "f",
    "x": "x",
}
_STANDARD_LETTERS = frozenset("acdhimrtz")

LUSTRE_QUOTAS: Dict[str, Tuple[Tuple[str, str], Tuple[str, str]]] = {
    "SCRATCH_1": (("L-C48231E5", "Lustre Scratch file systems"), ("L-AD2FC696", "Lustre Scratch storage capacity")),
    "SCRATCH_2": (("L-C48231E5", "Lustre Scratch file systems"), ("L-AD2FC696", "Lustre Scratch storage capacity")),
    "PERSISTENT_1": (
        ("L-9AFA1F09", "Lustre Persistent_1 file systems"),
        ("L-C8640C82", "Lustre Persistent_1 storage capacity"),
    ),
    "PERSISTENT_2": (
        ("L-FD6F2F22", "Lustre Persistent_2 file systems"),
        ("L-8F1B9C74", "Lustre Persistent_2 storage capacity"),
    ),
}
"""FSx for Lustre quotas (Service Quotas code ``fsx``) by deployment type: (file systems, storage capacity in GiB).
Codes and names as Service Quotas' ``ListAWSDefaultServiceQuotas`` answers them for ``fsx`` (read in two public,
agreeing dumps of that answer, not in an AWS document). The use is counted from ``fsx:DescribeFileSystems``."""

EFS_FILE_SYSTEMS_QUOTA = ("L-848C634D", "File systems per account")
"""The EFS quota (Service Quotas code ``elasticfilesystem``), as ``ListAWSDefaultServiceQuotas`` answers it (the same
public dumps); the use is the count of ``elasticfilesystem:DescribeFileSystems``."""

_ACCESS_DENIED = frozenset(
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
_NOT_OFFERED = frozenset(
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


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict.

    :param check: The check's name, ``kind/subject`` (for example ``on-demand-vcpus/Trn``).
    :param status: ``pass``, ``fail`` or ``unknown`` (the check could not be made).
    :param message: What was found, with the figures.
    :param advice: What to do (for ``fail`` and ``unknown``).
    """

    check: str
    status: str
    message: str
    advice: str = ""


class CannotCheck(Exception):
    """A check could not be made (the verdict is ``unknown``): ``message`` says why, ``advice`` what to do."""

    def __init__(self, message: str, advice: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.advice = advice


# --------------------------------------------------------------------------------------------------------- the plan


def check_plan(plan: Any) -> List[str]:
    """The problems of ``plan`` (empty when it can be checked): its version, and each missing or mistyped key."""
    if not isinstance(plan, Mapping):
        return [f"the plan must be a JSON object, not {type(plan).__name__}"]
    if plan.get("version") != PLAN_VERSION:
        return [f"plan version {plan.get('version')!r}: this preflight reads version {PLAN_VERSION} only"]
    problems: List[str] = []
    _expect(problems, plan, "stack", "the plan", str)
    _expect(problems, plan, "region", "the plan", str, optional=True)
    _expect(problems, plan, "kubernetesVersion", "the plan", str, optional=True)
    if _expect(problems, plan, "nodes", "the plan", list):
        for index, node in enumerate(plan["nodes"]):
            where = f"nodes[{index}]"
            if not isinstance(node, Mapping):
                problems.append(f"{where} must be an object")
                continue
            where = f"nodes[{index}] ({node.get('name', '?')})"
            _expect(problems, node, "name", where, str)
            _expect(problems, node, "instanceType", where, str)
            for key in ("count", "ipInterfaces", "efaInterfaces"):
                _expect(problems, node, key, where, int, minimum=0)
            _expect(problems, node, "availabilityZoneId", where, str, optional=True)
            _expect(problems, node, "subnetId", where, str, optional=True)
            _expect(problems, node, "capacityReservationId", where, str, optional=True)
            kind = node.get("capacityType")
            if kind not in ("on-demand", "capacity-block", "reservation"):
                problems.append(f"{where}: capacityType {kind!r}: on-demand, capacity-block or reservation")
            if node.get("provisioning", "karpenter") not in ("karpenter", "node-group"):
                problems.append(f"{where}: provisioning {node.get('provisioning')!r}: karpenter or node-group")
    if _expect(problems, plan, "fileSystems", "the plan", list):
        for index, file_system in enumerate(plan["fileSystems"]):
            where = f"fileSystems[{index}]"
            if not isinstance(file_system, Mapping) or file_system.get("kind") not in ("lustre", "efs"):
                problems.append(f"{where}: an object whose kind is lustre or efs")
            elif file_system["kind"] == "lustre":
                _expect(problems, file_system, "storageGib", where, int, minimum=1)
                if file_system.get("deploymentType") not in LUSTRE_QUOTAS:
                    problems.append(
                        f"{where}: deploymentType {file_system.get('deploymentType')!r}: one of "
                        + ", ".join(LUSTRE_QUOTAS)
                    )
    return problems


def _expect(
    problems: List[str],
    mapping: Mapping[str, Any],
    key: str,
    where: str,
    kind: type,
    *,
    optional: bool = False,
    minimum: Optional[int] = None,
) -> bool:
    """Add a problem unless ``mapping[key]`` is a ``kind`` (or None when ``optional``); True when it is a ``kind``."""
    names = {str: "a string", int: "an integer", list: "a list"}
    if key not in mapping:
        problems.append(f"{where}: {key} is missing")
        return False
    value = mapping[key]
    if value is None and optional:
        return False
    if not isinstance(value, kind) or isinstance(value, bool):
        problems.append(f"{where}: {key}={value!r} must be {names[kind]}" + (" or null" if optional else ""))
        return False
    if minimum is not None and value < minimum:
        problems.append(f"{where}: {key}={value!r} must be at least {minimum}")
        return False
    return True


# ------------------------------------------------------------------------------------------------- the AWS context


class AwsContext:
    """The clients of one run (one per service, with :data:`CLIENT_CONFIG`), the instance type facts it has read, and
    the plan of the previous deploy (an update), whose resources may already be in the use AWS reports."""

    def __init__(
        self,
        session: Any,
        region: str,
        plan: Mapping[str, Any],
        *,
        previous: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.session = session
        self.region = region
        self.plan = plan
        self.previous = previous
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
                if _code(error) not in ("InvalidInstanceType", "InvalidParameterValue"):
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


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


# --------------------------------------------------------------------------------------------------------- running


def run_checks(
    plan: Mapping[str, Any],
    session: Optional[boto3.session.Session] = None,
    *,
    region: Optional[str] = None,
    previous: Optional[Mapping[str, Any]] = None,
    remaining_seconds: Optional[Callable[[], float]] = None,
    reserve_seconds: float = RESERVE_SECONDS,
    progress: Optional[Callable[[CheckResult], None]] = None,
) -> List[CheckResult]:
    """Run every check of ``plan`` with clients of ``session`` (default: a new ``boto3.session.Session()``).

    :param region: The region to check. Default: the plan's region, else the session's.
    :param previous: On an update, the plan of the previous deploy: the use AWS reports may hold its instances, file
        systems and addresses, so a need the previous plan already had is not counted twice (the verdict is
        ``unknown`` when only that makes it fit).
    :param remaining_seconds: With a deadline, a function giving the seconds left: no check starts with fewer than
        ``reserve_seconds`` left; those not started are ``unknown``.
    :param progress: Called with each result as soon as it is known (the handler answers with those when a check
        outlasts the function's time).
    :raises ValueError: naming every problem of a plan :func:`check_plan` refuses.
    """
    problems = check_plan(plan)
    if problems:
        raise ValueError("invalid preflight plan: " + "; ".join(problems))
    if previous is not None and check_plan(previous):
        previous = None
    session = session if session is not None else boto3.session.Session()
    region = region or plan.get("region") or session.region_name
    if not region:
        return [CheckResult("region", UNKNOWN, "no region to check: the plan and the session have none", "give one")]
    context = AwsContext(session, region, plan, previous=previous)
    results: List[CheckResult] = []
    for name, check in planned_checks(context):
        if remaining_seconds is not None and remaining_seconds() < reserve_seconds:
            result: Optional[CheckResult] = CheckResult(
                name,
                UNKNOWN,
                f"not started: fewer than {reserve_seconds:.0f} s were left before the function's timeout",
                "run `python -m trainium_eks preflight`, or give the preflight function a longer timeout",
            )
        else:
            result = guarded(name, check)
        if result is not None:
            results.append(result)
            if progress is not None:
                progress(result)
    return results


def planned_checks(context: AwsContext) -> List[Tuple[str, Callable[[], Optional[CheckResult]]]]:
    """The checks of the context's plan, in order, as (name, function) pairs."""
    plan = context.plan
    nodes: List[Mapping[str, Any]] = list(plan["nodes"])
    checks: List[Tuple[str, Callable[[], Optional[CheckResult]]]] = []

    def add(name: str, function: Callable[..., Optional[CheckResult]], *args: Any) -> None:
        checks.append((name, lambda: function(context, *args)))

    for zone in _unique(node["availabilityZoneId"] for node in nodes if node["availabilityZoneId"]):
        add(f"availability-zone/{zone}", check_availability_zone, zone)
    for node in nodes:
        add(f"instance-type/{node['name']}", check_instance_type, node)
        add(f"offering/{node['name']}", check_offering, node)
        if node.get("capacityReservationId"):
            add(f"capacity-reservation/{node['name']}", check_capacity_reservation, node)
        elif _on_demand(node) and node["count"] > 1 and node["efaInterfaces"] > 0:
            add(f"gang-capacity/{node['name']}", check_gang_capacity, node)
    for subnet in _unique(node["subnetId"] for node in nodes if node["subnetId"]):
        add(f"subnet-addresses/{subnet}", check_subnet_addresses, subnet)
    for family in _unique(quota_family(node["instanceType"]) or "" for node in nodes if _on_demand(node)):
        label = _family_label(family)
        add(f"on-demand-vcpus/{label}", check_on_demand_vcpus, family)
    if plan.get("kubernetesVersion"):
        add(f"kubernetes-version/{plan['kubernetesVersion']}", check_kubernetes_version, plan["kubernetesVersion"])
    lustre_types = _unique(fs["deploymentType"] for fs in plan["fileSystems"] if fs["kind"] == "lustre")
    for deployment_type in lustre_types:
        add(f"fsx-lustre/{deployment_type}", check_lustre_quotas, deployment_type)
    if any(fs["kind"] == "efs" for fs in plan["fileSystems"]):
        add("efs-file-systems", check_efs_file_systems)
    return checks


def guarded(name: str, check: Callable[[], Optional[CheckResult]]) -> Optional[CheckResult]:
    """``check()``, or ``unknown`` naming the call and the reason when it could not be made: it never raises. None is
    a check with nothing to add (the offering in an AZ that another check found outside the region)."""
    try:
        return check()
    except CannotCheck as error:
        return CheckResult(name, UNKNOWN, error.message, error.advice)
    except ClientError as error:
        return _unknown_of_client_error(name, error)
    except NoCredentialsError as error:
        return CheckResult(name, UNKNOWN, f"no AWS credentials: {error}", "configure credentials (AWS_PROFILE)")
    except BotoCoreError as error:
        # EndpointConnectionError (no endpoint in this partition or region, or no network), timeouts.
        action = getattr(error, "iam_action", "the call")
        return CheckResult(
            name,
            UNKNOWN,
            f"{action} could not be made: {type(error).__name__}: {error}",
            "check the network path to the AWS endpoints (VPC endpoints, proxy) and that the service is offered in "
            "the region",
        )
    except Exception as error:  # noqa: BLE001 - a broken check must not fail the deploy
        return CheckResult(name, UNKNOWN, f"the check broke: {type(error).__name__}: {error}", "report it")


def _unknown_of_client_error(name: str, error: ClientError) -> CheckResult:
    code = _code(error)
    detail = str(error.response.get("Error", {}).get("Message", ""))[:300]
    action = getattr(error, "iam_action", None) or error.operation_name
    if code in _ACCESS_DENIED or code.startswith("AccessDenied"):
        return CheckResult(
            name,
            UNKNOWN,
            f"{action} was refused ({code}): {detail}",
            f"allow {action} to the preflight function's role (the construct grants it) or to your credentials",
        )
    if code in _NOT_OFFERED:
        return CheckResult(
            name,
            UNKNOWN,
            f"{action} did not accept the request ({code}): {detail}",
            "the API or one of its values may not be offered in this partition or region: check it by hand",
        )
    return CheckResult(name, UNKNOWN, f"{action} failed ({code}): {detail}", "check it by hand, or retry the deploy")


def _unique(values: Iterable[Any]) -> List[Any]:
    seen: List[Any] = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def _on_demand(node: Mapping[str, Any]) -> bool:
    return node["capacityType"] == "on-demand" and node["count"] > 0


# -------------------------------------------------------------------------------------------------- zone, offering


def check_availability_zone(context: AwsContext, zone_id: str) -> CheckResult:
    """The AZ ID is one of the region's, available and opted in (``ec2:DescribeAvailabilityZones`` with the
    ``zone-id`` filter and ``AllAvailabilityZones``; EC2 API reference, DescribeAvailabilityZones). AZ IDs name the
    same zone in every account (AWS RAM user guide, "Availability Zone IDs for your AWS resources")."""
    name = f"availability-zone/{zone_id}"
    zones = context.call(
        "ec2",
        "describe_availability_zones",
        Filters=[{"Name": "zone-id", "Values": [zone_id]}],
        AllAvailabilityZones=True,
    ).get("AvailabilityZones", [])
    if not zones:
        context.zones_not_in_region.add(zone_id)
        home = context.plan.get("region") if context.plan.get("region") != context.region else None
        home = home or region_of_zone_id(zone_id)
        where = f"deploy to {home} or set availabilityZoneId" if home else "set availabilityZoneId"
        return CheckResult(
            name,
            FAIL,
            f"{zone_id} is not an AZ of {context.region}",
            f"{where} to an AZ ID of {context.region}",
        )
    zone = zones[0]
    opt_in = zone.get("OptInStatus", "opt-in-not-required")
    if opt_in == "not-opted-in":
        return CheckResult(
            name, FAIL, f"{zone_id} ({zone.get('ZoneName')}) is not opted in", f"opt in to {zone.get('GroupName')}"
        )
    if zone.get("State", "available") != "available":
        return CheckResult(
            name,
            FAIL,
            f"{zone_id} ({zone.get('ZoneName')}) is {zone.get('State')}",
            "wait until it is available, or set availabilityZoneId to another AZ ID",
        )
    return CheckResult(name, PASS, f"{zone_id} is {zone.get('ZoneName')}, available, in {context.region}")


def region_of_zone_id(zone_id: str) -> Optional[str]:
    """The region an AZ ID's prefix names (``usw2-az4`` -> ``us-west-2``), or None when it is not of that form. AZ
    IDs begin with the region's short code (AWS RAM user guide, "Availability Zone IDs"); the decoding is a
    convention, used only in advice."""
    match = re.fullmatch(r"([a-z]{2})(ne|nw|se|sw|e|w|n|s|c)(\d+)-az\d+", zone_id)
    if not match:
        return None
    directions = {
        "e": "east",
        "w": "west",
        "n": "north",
        "s": "south",
        "c": "central",
        "ne": "northeast",
        "nw": "northwest",
        "se": "southeast",
        "sw": "southwest",
    }
    area, direction, number = match.groups()
    return f"{area}-{directions[direction]}-{number}"


def check_instance_type(context: AwsContext, node: Mapping[str, Any]) -> CheckResult:
    """The instance type exists in the region and has the EFA devices the plan gives each node
    (``ec2:DescribeInstanceTypes``: ``NetworkInfo.EfaSupported``, ``NetworkInfo.EfaInfo.MaximumEfaInterfaces``;
    EC2 user guide, "Elastic Fabric Adapter", supported instance types)."""
    name = f"instance-type/{node['name']}"
    instance_type = node["instanceType"]
    facts = context.instance_type(instance_type)
    if facts is None:
        return CheckResult(
            name,
            FAIL,
            f"EC2 does not know {instance_type} in {context.region}",
            "choose an instance type the region has (aws ec2 describe-instance-types)",
        )
    network = facts.get("NetworkInfo", {})
    wanted = node["efaInterfaces"]
    most = int(network.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)) if network.get("EfaSupported") else 0
    vcpus = facts.get("VCpuInfo", {}).get("DefaultVCpus")
    if wanted > most:
        has = f"at most {most} EFA interfaces" if most else "no EFA"
        return CheckResult(
            name,
            FAIL,
            f"{instance_type} has {has}; the plan gives each node {wanted}",
            f"use an instance type with {wanted} EFA interfaces, or fewer EFA interfaces",
        )
    efa = f", {wanted} of {most} EFA interfaces" if wanted else ""
    return CheckResult(name, PASS, f"{instance_type}: {vcpus} vCPUs{efa}")


def check_offering(context: AwsContext, node: Mapping[str, Any]) -> Optional[CheckResult]:
    """The instance type is offered in the node's AZ ID (``ec2:DescribeInstanceTypeOfferings``, ``LocationType``
    ``availability-zone-id``, filters ``instance-type`` and ``location``, all pages), or in the region when the
    nodes span several AZs (``LocationType`` ``region``). EC2 API reference, DescribeInstanceTypeOfferings."""
    name = f"offering/{node['name']}"
    instance_type = node["instanceType"]
    zone_id = node["availabilityZoneId"]
    if zone_id is None:
        offerings = context.pages(
            "ec2",
            "describe_instance_type_offerings",
            "InstanceTypeOfferings",
            LocationType="region",
            Filters=[{"Name": "instance-type", "Values": [instance_type]}],
        )
        if offerings:
            return CheckResult(name, PASS, f"{instance_type} is offered in {context.region}")
        return CheckResult(
            name, FAIL, f"{instance_type} is not offered in {context.region}", "choose another type or region"
        )
    if zone_id in context.zones_not_in_region:
        return None  # availability-zone/<zone> fails already
    offerings = context.pages(
        "ec2",
        "describe_instance_type_offerings",
        "InstanceTypeOfferings",
        LocationType="availability-zone-id",
        Filters=[
            {"Name": "instance-type", "Values": [instance_type]},
            {"Name": "location", "Values": [zone_id]},
        ],
    )
    if any(offering.get("Location") == zone_id for offering in offerings):
        return CheckResult(name, PASS, f"{instance_type} is offered in {zone_id}")
    elsewhere = _zones_offering(context, instance_type)
    advice = (
        f"set availabilityZoneId to one of {', '.join(elsewhere)}"
        if elsewhere
        else f"{context.region} offers {instance_type} in no AZ: choose another region or instance type"
    )
    return CheckResult(name, FAIL, f"{instance_type} is not offered in {zone_id} ({context.region})", advice)


def _zones_offering(context: AwsContext, instance_type: str) -> List[str]:
    """The AZ IDs of the region that offer ``instance_type`` (empty when that cannot be read)."""
    try:
        offerings = context.pages(
            "ec2",
            "describe_instance_type_offerings",
            "InstanceTypeOfferings",
            LocationType="availability-zone-id",
            Filters=[{"Name": "instance-type", "Values": [instance_type]}],
        )
    except (ClientError, BotoCoreError, CannotCheck):
        return []
    return sorted({offering["Location"] for offering in offerings if offering.get("Location")})


# ------------------------------------------------------------------------------------------ capacity reservations

_RESERVATION_WAITING = frozenset({"scheduled", "payment-pending", "pending", "assessing", "delayed"})
_RESERVATION_GONE = frozenset(
    {"expired", "cancelled", "cancelling", "failed", "payment-failed", "unsupported", "unavailable"}
)


def check_capacity_reservation(context: AwsContext, node: Mapping[str, Any]) -> CheckResult:
    """The Capacity Block or On-Demand Capacity Reservation can hold the nodes (``ec2:DescribeCapacityReservations``:
    ``InstanceType``, ``AvailabilityZoneId``, ``InstancePlatform``, ``TotalInstanceCount``,
    ``AvailableInstanceCount``, ``State``, ``ReservationType``, ``StartDate``; EC2 API reference, CapacityReservation).

    Instances launch only into an ``active`` reservation: a Capacity Block's instances run only inside its time window
    (EC2 user guide, "Capacity Blocks for ML"; launches before the start date get an insufficient-capacity error,
    EC2 user guide, "Tutorial: Configure your EC2 Fleet to launch instances into Capacity Blocks"). A reservation not
    yet started (``scheduled``, ``payment-pending``, ``pending``, ``assessing``, ``delayed``) passes for nodes that
    Karpenter launches when pods ask for them (they launch from the start date), and fails for a managed node group
    (``"provisioning": "node-group"``), whose nodes are launched during the deploy. An ended one fails.
    """
    name = f"capacity-reservation/{node['name']}"
    reservation_id = node["capacityReservationId"]
    try:
        found = context.call("ec2", "describe_capacity_reservations", CapacityReservationIds=[reservation_id]).get(
            "CapacityReservations", []
        )
    except ClientError as error:
        if not _code(error).startswith("InvalidCapacityReservationId"):
            raise
        found = []
    if not found:
        return CheckResult(
            name,
            FAIL,
            f"{reservation_id} is not a capacity reservation of this account in {context.region}",
            "give the ID of a Capacity Block or Capacity Reservation of this account and region (or one shared "
            "with it)",
        )
    reservation = found[0]
    problems: List[str] = []
    if reservation.get("InstanceType") != node["instanceType"]:
        problems.append(f"it holds {reservation.get('InstanceType')}, the nodes are {node['instanceType']}")
    zone_id = node["availabilityZoneId"]
    if zone_id and reservation.get("AvailabilityZoneId") != zone_id:
        problems.append(f"it is in {reservation.get('AvailabilityZoneId')}, the nodes in {zone_id}")
    platform = reservation.get("InstancePlatform")
    if platform and platform != "Linux/UNIX":
        problems.append(f"its platform is {platform}; EKS nodes' AMIs are Linux/UNIX")
    reservation_type = reservation.get("ReservationType") or "default"
    if node["capacityType"] == "capacity-block" and reservation_type != "capacity-block":
        problems.append("it is an On-Demand Capacity Reservation, not a Capacity Block (capacityType reservation)")
    if node["capacityType"] == "reservation" and reservation_type == "capacity-block":
        problems.append("it is a Capacity Block, not an On-Demand Capacity Reservation (capacityType capacity-block)")
    total = int(reservation.get("TotalInstanceCount") or 0)
    available = int(reservation.get("AvailableInstanceCount") or 0)
    if total < node["count"]:
        problems.append(f"it holds {total} instances, the plan launches up to {node['count']}")
    state = reservation.get("State", "")
    kind = "Capacity Block" if reservation_type == "capacity-block" else "Capacity Reservation"
    if state in _RESERVATION_GONE:
        problems.append(f"its state is {state}")
    if problems:
        return CheckResult(
            name,
            FAIL,
            f"{kind} {reservation_id}: " + "; ".join(problems),
            "fix the reservation ID, instance type, AZ or node count so that they match the reservation",
        )
    start, end = _when(reservation.get("StartDate")), _when(reservation.get("EndDate"))
    window = f" until {end}" if end else ""
    if state in _RESERVATION_WAITING:
        if node.get("provisioning") == "node-group":
            return CheckResult(
                name,
                FAIL,
                f"{kind} {reservation_id} is {state}: it starts {start or 'later'}{window}, and the managed node "
                f"group launches its {node['count']} nodes during the deploy",
                f"deploy after {start or 'it starts'}, or launch the nodes with Karpenter (provisioning karpenter)",
            )
        return CheckResult(
            name,
            PASS,
            f"{kind} {reservation_id} is {state}: nodes can launch from {start or 'its start'}{window}; Karpenter "
            "launches them when pods ask for them, so the deploy does not wait for it",
        )
    if state != "active":
        raise CannotCheck(f"{kind} {reservation_id} is in state {state!r}, which this preflight does not know")
    held = reservation.get("InstanceType")
    message = f"{kind} {reservation_id} is active{window}: {available} of {total} {held} free"
    if available < node["count"]:
        if context.previous is not None:
            return CheckResult(
                name,
                UNKNOWN,
                message + f"; the plan launches up to {node['count']} (some in use may be this stack's own nodes)",
                "check that the instances using it are this stack's nodes",
            )
        return CheckResult(
            name,
            FAIL,
            message + f"; the plan launches up to {node['count']}",
            "stop the other instances running in it, or lower the node count",
        )
    return CheckResult(name, PASS, message)


def check_gang_capacity(context: AwsContext, node: Mapping[str, Any]) -> CheckResult:
    """Whether all the nodes of an on-demand gang fit in its cluster placement group cannot be checked ahead: EC2 has
    no call that answers it, only the launch does (and may place some of the nodes), and its own advice is to
    reserve capacity in the group (EC2 user guide, "Placement group rules and limitations": "If you plan to launch
    instances into a cluster placement group, we recommend that you reserve capacity explicitly in the cluster
    placement group"). Always ``unknown``, in one line, with what happens when EC2 refuses part of the gang."""
    count, instance_type = node["count"], node["instanceType"]
    if node.get("provisioning", "karpenter") == "node-group":
        then = "the node group's creation fails the deploy if EC2 refuses any of them"
    else:
        then = (
            "a gang EC2 refuses in part gives back the nodes it holds and tries again (its release's "
            "capacity-timeout, 30 minutes by default, 3 attempts)"
        )
    return CheckResult(
        f"gang-capacity/{node['name']}",
        UNKNOWN,
        f"no EC2 call says ahead whether {count} x {instance_type} fit in one cluster placement group on demand; "
        f"{then}",
        "to be sure of them, reserve them: a Capacity Block or an ODCR in the placement group "
        "(NodeCapacity.capacity_block / capacity_reservation)",
    )


def _when(value: Any) -> str:
    if isinstance(value, _dt.datetime):
        return value.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return str(value) if value else ""


# ------------------------------------------------------------------------------------------------------- addresses


def node_addresses(context: AwsContext, node: Mapping[str, Any]) -> int:
    """The IPv4 addresses of the subnet that ``node['count']`` nodes take: per node, one primary address for each
    interface that takes one (``ipInterfaces``), plus one interface's worth of warm addresses
    (``NetworkInfo.Ipv4AddressesPerInterface``), since the VPC CNI's default ``WARM_ENI_TARGET=1`` keeps "a full ENI"
    of available IPs on each node (aws/amazon-vpc-cni-k8s, ``docs/eni-and-ip-target.md``). A lower bound: pods beyond
    the first interface's addresses make the CNI attach more."""
    facts = context.instance_type(node["instanceType"])
    if facts is None:
        raise CannotCheck(f"{node['instanceType']} is not an instance type of {context.region}")
    per_interface = int(facts.get("NetworkInfo", {}).get("Ipv4AddressesPerInterface", 0))
    return node["count"] * (node["ipInterfaces"] + per_interface)


def check_subnet_addresses(context: AwsContext, subnet_id: str) -> CheckResult:
    """The existing subnet is in the nodes' AZ ID and has the free IPv4 addresses every node group placed in it takes
    (``ec2:DescribeSubnets``: ``AvailabilityZoneId``, ``AvailableIpAddressCount``; :func:`node_addresses`)."""
    name = f"subnet-addresses/{subnet_id}"
    nodes = [node for node in context.plan["nodes"] if node["subnetId"] == subnet_id]
    try:
        subnets = context.call("ec2", "describe_subnets", SubnetIds=[subnet_id]).get("Subnets", [])
    except ClientError as error:
        if _code(error) != "InvalidSubnetID.NotFound":
            raise
        subnets = []
    if not subnets:
        return CheckResult(
            name, FAIL, f"{subnet_id} is not a subnet of {context.region}", "give an existing subnet of the region"
        )
    subnet = subnets[0]
    wrong = [
        f"{node['name']} launch in {node['availabilityZoneId']}"
        for node in nodes
        if node["availabilityZoneId"] and node["availabilityZoneId"] != subnet.get("AvailabilityZoneId")
    ]
    if wrong:
        return CheckResult(
            name,
            FAIL,
            f"{subnet_id} is in {subnet.get('AvailabilityZoneId')}, but " + ", ".join(wrong),
            "give a subnet of the nodes' AZ ID, or set availabilityZoneId to the subnet's",
        )
    needed = sum(node_addresses(context, node) for node in nodes)
    free = int(subnet.get("AvailableIpAddressCount", 0))
    previous = sum(
        node_addresses(context, node)
        for node in (context.previous or {}).get("nodes", [])
        if node.get("subnetId") == subnet_id and context.instance_type(node["instanceType"]) is not None
    )
    names = ", ".join(node["name"] for node in nodes)
    message = f"{subnet_id} ({subnet.get('AvailabilityZoneId')}) has {free} free IPv4 addresses; {names} take {needed}"
    if needed <= free:
        return CheckResult(name, PASS, message)
    # The free count already leaves out what the stack's running nodes hold: on an update they may hold some.
    if needed - min(previous, needed) <= free:
        return CheckResult(
            name,
            UNKNOWN,
            message + f"; it fits only if the previous deploy's nodes hold {needed - free} of them",
            "free addresses in the subnet, or make sure the stack's nodes are running and hold them",
        )
    return CheckResult(
        name,
        FAIL,
        message + f": {needed - free} short",
        "use a larger subnet, fewer nodes, efa-only interfaces (fewer ipInterfaces), or set the VPC CNI's "
        "WARM_IP_TARGET/MINIMUM_IP_TARGET",
    )


# ---------------------------------------------------------------------------------------------------------- quotas


def quota_family(instance_type: str) -> Optional[str]:
    """The On-Demand quota family of ``instance_type`` (a key of :data:`ON_DEMAND_QUOTAS`), or None when unknown (mac
    instances run only on Dedicated Hosts, which have their own quotas). The families are the letters before the
    generation: ``trn1`` and ``trn2u`` are Trn, ``vt1`` is G and VT, ``u-6tb1`` and ``u7i`` High Memory, and the
    Standard quota covers the A, C, D, H, I, M, R, T and Z families (EC2 user guide, "On-Demand Instance quotas")."""
    prefix = instance_type.split(".", 1)[0].lower()
    if prefix.startswith("u-") or re.match(r"^u\d", prefix):
        return "high-memory"
    match = re.match(r"^([a-z]+)\d", prefix)
    if not match:
        return None
    letters = match.group(1)
    if letters in _FAMILY_LETTERS:
        return _FAMILY_LETTERS[letters]
    if letters == "mac":
        return None
    if letters[0] in _STANDARD_LETTERS:
        return "standard"
    return None


_FAMILY_LABELS = {
    "standard": "Standard",
    "dl": "DL",
    "f": "F",
    "g": "G-VT",
    "hpc": "HPC",
    "high-memory": "HighMemory",
    "inf": "Inf",
    "p": "P",
    "trn": "Trn",
    "x": "X",
}


def _family_label(family: str) -> str:
    """The family's name in a check's name (``on-demand-vcpus/Trn``); ``unknown`` for a type of no known quota."""
    return _FAMILY_LABELS.get(family, "unknown")


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
        if _code(error) != "NoSuchResourceException":
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


def check_on_demand_vcpus(context: AwsContext, family: str) -> CheckResult:
    """The On-Demand vCPU quota of an instance family holds its current use plus the vCPUs of the plan's on-demand
    nodes of that family (``count`` × ``VCpuInfo.DefaultVCpus``). EC2 user guide, "On-Demand Instance quotas": the
    quotas count the vCPUs of running On-Demand Instances, and "Capacity Reservations count toward your On-Demand
    Instance quotas, even if they are unused", so nodes launched into a reservation (``capacity-block`` or
    ``reservation``) need no quota beyond what the reservation already holds; they are left out here."""
    label = _family_label(family)
    name = f"on-demand-vcpus/{label}"
    nodes = [n for n in context.plan["nodes"] if _on_demand(n) and (quota_family(n["instanceType"]) or "") == family]
    types = ", ".join(_unique(n["instanceType"] for n in nodes))
    if family not in ON_DEMAND_QUOTAS:
        raise CannotCheck(f"no On-Demand vCPU quota is known for {types}", "check the quota of this family by hand")
    quota_code, quota_name = ON_DEMAND_QUOTAS[family]
    needed = sum(n["count"] * context.vcpus(n["instanceType"]) for n in nodes)
    previous = sum(
        n["count"] * context.vcpus(n["instanceType"])
        for n in (context.previous or {}).get("nodes", [])
        if _on_demand(n)
        and (quota_family(n["instanceType"]) or "") == family
        and context.instance_type(n["instanceType"]) is not None
    )
    quota = service_quota(context, "ec2", quota_code)
    limit = float(quota["Value"])
    source = " (the AWS default; the account has no applied value)" if quota.get("_default") else ""

    def increase(desired: float) -> str:
        return (
            f"request an increase of {quota_name} ({quota_code}) in the Service Quotas console, or: aws "
            f"service-quotas request-service-quota-increase --region {context.region} --service-code ec2 "
            f"--quota-code {quota_code} --desired-value {desired:g}"
        )

    metric = quota.get("UsageMetric") or {}
    if not metric.get("MetricNamespace") or not metric.get("MetricName"):
        if needed > limit:
            return CheckResult(
                name,
                FAIL,
                f"{quota_name}: the plan's {types} nodes need {needed:g} vCPUs, the quota is {limit:g}{source}",
                increase(needed),
            )
        raise CannotCheck(
            f"{quota_name}: {needed:g} of {limit:g} vCPUs needed{source}, but the quota names no usage metric",
            "compare with the vCPUs of your running instances by hand",
        )
    used = quota_usage(context, metric)
    verdict = capacity_verdict(used=used, needed=needed, limit=limit, previous=previous)
    figures = f"{used:g} vCPUs in use + {needed:g} for {types} = {used + needed:g} of {limit:g}{source}"
    if verdict == FAIL:
        desired = used - min(used, previous) + needed
        return CheckResult(name, FAIL, f"{quota_name}: {figures}", increase(desired))
    if verdict == UNKNOWN:
        return CheckResult(
            name,
            UNKNOWN,
            f"{quota_name}: {figures}; it fits only if {min(used, previous):g} of the vCPUs in use are this stack's "
            "own nodes",
            increase(used + needed) + ", if the instances in use are not this stack's",
        )
    return CheckResult(name, PASS, f"{quota_name}: {figures}")


# --------------------------------------------------------------------------------------------------------- version


def check_kubernetes_version(context: AwsContext, version: str) -> CheckResult:
    """EKS offers the Kubernetes version in the region (``eks:DescribeClusterVersions`` with ``clusterVersions``:
    ``versionStatus`` ``STANDARD_SUPPORT``, ``EXTENDED_SUPPORT`` or ``UNSUPPORTED``; EKS API reference,
    DescribeClusterVersions). A version in extended support costs more per cluster hour (EKS user guide, "Understand
    the Kubernetes version lifecycle on EKS")."""
    name = f"kubernetes-version/{version}"
    versions = context.pages("eks", "describe_cluster_versions", "clusterVersions", clusterVersions=[version])
    found = [v for v in versions if v.get("clusterVersion") == version and v.get("clusterType") in (None, "eks", "EKS")]
    if not found:
        offered = _offered_versions(context)
        advice = f"use one of {', '.join(offered)}" if offered else "use a version EKS offers in the region"
        return CheckResult(name, FAIL, f"EKS does not offer Kubernetes {version} in {context.region}", advice)
    info = found[0]
    status = (info.get("versionStatus") or str(info.get("status", "")).upper().replace("-", "_")).upper()
    if status == "STANDARD_SUPPORT":
        until = _when(info.get("endOfStandardSupportDate"))
        return CheckResult(name, PASS, f"Kubernetes {version}: standard support" + (f" until {until}" if until else ""))
    if status == "EXTENDED_SUPPORT":
        until = _when(info.get("endOfExtendedSupportDate"))
        return CheckResult(
            name,
            PASS,
            f"Kubernetes {version} is in extended support"
            + (f" until {until}" if until else "")
            + ": the cluster costs more per hour than in standard support",
        )
    if status == "UNSUPPORTED":
        return CheckResult(
            name,
            FAIL,
            f"Kubernetes {version} is no longer supported by EKS",
            "use a version in standard support (kubernetesVersion)",
        )
    raise CannotCheck(f"Kubernetes {version}: EKS reports the status {status!r}, which this preflight does not know")


def _offered_versions(context: AwsContext) -> List[str]:
    try:
        versions = context.pages("eks", "describe_cluster_versions", "clusterVersions")
    except (ClientError, BotoCoreError, CannotCheck):
        return []
    found = {v["clusterVersion"] for v in versions if v.get("clusterVersion")}
    return sorted(found, key=lambda v: [int(p) if p.isdigit() else p for p in v.split(".")])


# --------------------------------------------------------------------------------------------------------- storage


def check_lustre_quotas(context: AwsContext, deployment_type: str) -> CheckResult:
    """FSx for Lustre file systems and storage of one deployment type fit their quotas (:data:`LUSTRE_QUOTAS`): the
    account's Lustre file systems of that type (``fsx:DescribeFileSystems``, all pages: ``FileSystemType`` LUSTRE,
    ``LustreConfiguration.DeploymentType``, ``StorageCapacity`` in GiB, those being deleted left out) plus the plan's.
    FSx API reference, DescribeFileSystems."""
    name = f"fsx-lustre/{deployment_type}"
    (count_code, count_name), (storage_code, storage_name) = LUSTRE_QUOTAS[deployment_type]

    def planned(plan: Optional[Mapping[str, Any]]) -> Tuple[int, int]:
        systems = [
            fs
            for fs in (plan or {}).get("fileSystems", [])
            if fs.get("kind") == "lustre" and fs.get("deploymentType") == deployment_type
        ]
        return len(systems), sum(int(fs.get("storageGib", 0)) for fs in systems)

    needed_count, needed_storage = planned(context.plan)
    previous_count, previous_storage = planned(context.previous)
    existing = [
        fs
        for fs in context.pages("fsx", "describe_file_systems", "FileSystems")
        if fs.get("FileSystemType") == "LUSTRE"
        and fs.get("Lifecycle") != "DELETING"
        and (fs.get("LustreConfiguration") or {}).get("DeploymentType") == deployment_type
    ]
    used_count, used_storage = len(existing), sum(int(fs.get("StorageCapacity", 0)) for fs in existing)
    count_limit = float(service_quota(context, "fsx", count_code)["Value"])
    storage_limit = float(service_quota(context, "fsx", storage_code)["Value"])
    verdicts = [
        (
            capacity_verdict(used=used_count, needed=needed_count, limit=count_limit, previous=previous_count),
            f"{count_name} ({count_code}): {used_count} + {needed_count} of {count_limit:g}",
            count_code,
            used_count + needed_count,
        ),
        (
            capacity_verdict(used=used_storage, needed=needed_storage, limit=storage_limit, previous=previous_storage),
            f"{storage_name} ({storage_code}): {used_storage} GiB + {needed_storage} GiB of {storage_limit:g} GiB",
            storage_code,
            used_storage + needed_storage,
        ),
    ]
    message = "; ".join(text for _, text, _, _ in verdicts)
    failed = [(code, desired) for verdict, _, code, desired in verdicts if verdict == FAIL]
    if failed:
        advice = "; ".join(
            f"aws service-quotas request-service-quota-increase --region {context.region} --service-code fsx "
            f"--quota-code {code} --desired-value {desired}"
            for code, desired in failed
        )
        return CheckResult(name, FAIL, message, "delete unused file systems, or " + advice)
    if any(verdict == UNKNOWN for verdict, *_ in verdicts):
        return CheckResult(
            name, UNKNOWN, message + " (fits only if the previous deploy's file system is among them)", ""
        )
    return CheckResult(name, PASS, message)


def check_efs_file_systems(context: AwsContext) -> CheckResult:
    """The account's EFS file systems in the region (``elasticfilesystem:DescribeFileSystems``, all pages) plus the
    plan's fit the quota ``File systems per account`` (:data:`EFS_FILE_SYSTEMS_QUOTA`). EFS API reference,
    DescribeFileSystems; EFS user guide, "Amazon EFS quotas"."""
    name = "efs-file-systems"
    code, quota_name = EFS_FILE_SYSTEMS_QUOTA

    def planned(plan: Optional[Mapping[str, Any]]) -> int:
        return sum(1 for fs in (plan or {}).get("fileSystems", []) if fs.get("kind") == "efs")

    existing = [
        fs
        for fs in context.pages("efs", "describe_file_systems", "FileSystems")
        if fs.get("LifeCycleState") not in ("deleting", "deleted")
    ]
    limit = float(service_quota(context, "elasticfilesystem", code)["Value"])
    needed = planned(context.plan)
    verdict = capacity_verdict(used=len(existing), needed=needed, limit=limit, previous=planned(context.previous))
    message = f"{quota_name} ({code}): {len(existing)} + {needed} of {limit:g}"
    if verdict == FAIL:
        return CheckResult(
            name,
            FAIL,
            message,
            "delete unused file systems, or aws service-quotas request-service-quota-increase --region "
            f"{context.region} --service-code elasticfilesystem --quota-code {code} "
            f"--desired-value {len(existing) + needed}",
        )
    if verdict == UNKNOWN:
        return CheckResult(name, UNKNOWN, message + " (fits only if the previous deploy's is among them)", "")
    return CheckResult(name, PASS, message)


# --------------------------------------------------------------------------------------------------------- reports


def failure_message(results: Sequence[CheckResult], *, limit: int = 3500) -> str:
    """One message for CloudFormation's ``Reason``: each failed check and what to do, then how many checks could not
    be made. At most ``limit`` characters: lines that do not fit are left out, and the last line says how many."""
    failed = [r for r in results if r.status == FAIL]
    unknown = [r for r in results if r.status == UNKNOWN]
    head = f"Preflight: {len(failed)} of {len(results)} checks failed."
    lines = [head]
    for result in failed:
        advice = f" What to do: {result.advice}" if result.advice else ""
        lines.append(f"- {result.check}: {result.message}.{advice}")
    if unknown:
        names = ", ".join(r.check for r in unknown)
        checks = "check" if len(unknown) == 1 else "checks"
        lines.append(f"{len(unknown)} {checks} could not be made ({names}): see the preflight function's log.")
    text = "\n".join(lines)
    if len(text) <= limit:
        return text
    kept: List[str] = []
    for index, line in enumerate(lines):
        omitted = len(lines) - index
        tail = f"… {omitted} more lines omitted: see the preflight function's log."
        if len("\n".join(kept + [line, tail])) > limit:
            candidate = "\n".join(kept + [tail])
            if len(candidate) > limit:  # even the first line is too long
                room = max(limit - len(tail) - 2, 0)
                return (lines[0][:room] + "…\n" + tail)[:limit]
            return candidate
        kept.append(line)
    return "\n".join(kept)[:limit]


def format_table(results: Sequence[CheckResult], *, width: int = 110) -> str:
    """The command line's table: check, status and message (with what to do under a failed or unknown check)."""
    if not results:
        return "(no checks)"
    check_width = max(len("CHECK"), *(len(r.check) for r in results))
    status_width = max(len("STATUS"), *(len(r.status) for r in results))
    message_width = max(width - check_width - status_width - 4, 30)
    indent = " " * (check_width + status_width + 4)
    rows = [f"{'CHECK':<{check_width}}  {'STATUS':<{status_width}}  MESSAGE"]
    for result in results:
        lines = textwrap.wrap(result.message, message_width) or [""]
        if result.advice and result.status != PASS:
            lines += textwrap.wrap(f"→ {result.advice}", message_width)
        rows.append(f"{result.check:<{check_width}}  {result.status:<{status_width}}  {lines[0]}")
        rows.extend(indent + line for line in lines[1:])
    return "\n".join(rows)
