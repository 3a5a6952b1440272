"""The entry point: every check of a plan, run in order, each one's failure contained."""

from __future__ import annotations

from typing import Any, Callable, List, Mapping, Optional, Tuple

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from .aws_context import ACCESS_DENIED, NOT_OFFERED, AwsContext, error_code
from .capacity_reservations import check_capacity_reservation, check_gang_capacity
from .file_systems import check_efs_file_systems, check_lustre_quotas
from .offerings import check_availability_zone, check_instance_type, check_offering
from .plan import check_plan, on_demand, unique
from .quotas import check_on_demand_vcpus, family_label, quota_family
from .results import UNKNOWN, CannotCheck, CheckResult
from .subnet_addresses import check_subnet_addresses
from .updates import check_lustre_growth, check_zone_move, lustre_pairs, moves_zone
from .versions import check_kubernetes_version

RESERVE_SECONDS = 20.0
"""With a deadline, no check starts when fewer seconds than this remain (the rest are reported ``unknown``)."""


def run_checks(
    plan: Mapping[str, Any],
    session: Optional[boto3.session.Session] = None,
    *,
    region: Optional[str] = None,
    previous: Optional[Mapping[str, Any]] = None,
    forward: bool = False,
    remaining_seconds: Optional[Callable[[], float]] = None,
    reserve_seconds: float = RESERVE_SECONDS,
    progress: Optional[Callable[[CheckResult], None]] = None,
) -> List[CheckResult]:
    """Run every check of ``plan`` with clients of ``session`` (default: a new ``boto3.session.Session()``).

    :param region: The region to check. Default: the plan's region, else the session's.
    :param previous: On an update, the plan of the previous deploy: the use AWS reports may hold its instances, file
        systems and addresses, so a need the previous plan already had is not counted twice (the verdict is
        ``unknown`` when only that makes it fit).
    :param forward: The run is an update known to go forward (its stack's status read ``UPDATE_IN_PROGRESS``): only
        then is the plan compared with ``previous`` for what an update cannot change (``zone-move``,
        ``lustre-storage``). Default: false.
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
    context = AwsContext(session, region, plan, previous=previous, forward=forward)
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

    for zone in unique(node["availabilityZoneId"] for node in nodes if node["availabilityZoneId"]):
        add(f"availability-zone/{zone}", check_availability_zone, zone)
    for node in nodes:
        add(f"instance-type/{node['name']}", check_instance_type, node)
        add(f"offering/{node['name']}", check_offering, node)
        if node.get("capacityReservationId"):
            add(f"capacity-reservation/{node['name']}", check_capacity_reservation, node)
        elif on_demand(node) and node["count"] > 1 and node["efaInterfaces"] > 0:
            add(f"gang-capacity/{node['name']}", check_gang_capacity, node)
        if context.forward and moves_zone(context, node):
            add(f"zone-move/{node['name']}", check_zone_move, node)
    for subnet in unique(node["subnetId"] for node in nodes if node["subnetId"]):
        add(f"subnet-addresses/{subnet}", check_subnet_addresses, subnet)
    for family in unique(quota_family(node["instanceType"]) or "" for node in nodes if on_demand(node)):
        label = family_label(family)
        add(f"on-demand-vcpus/{label}", check_on_demand_vcpus, family)
    if plan.get("kubernetesVersion"):
        add(f"kubernetes-version/{plan['kubernetesVersion']}", check_kubernetes_version, plan["kubernetesVersion"])
    lustre_types = unique(fs["deploymentType"] for fs in plan["fileSystems"] if fs["kind"] == "lustre")
    for deployment_type in lustre_types:
        add(f"fsx-lustre/{deployment_type}", check_lustre_quotas, deployment_type)
    if any(fs["kind"] == "efs" for fs in plan["fileSystems"]):
        add("efs-file-systems", check_efs_file_systems)
    if context.forward:
        for name, _, _ in lustre_pairs(context):
            add(f"lustre-storage/{name}", check_lustre_growth, name)
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
    code = error_code(error)
    detail = str(error.response.get("Error", {}).get("Message", ""))[:300]
    action = getattr(error, "iam_action", None) or error.operation_name
    if code in ACCESS_DENIED or code.startswith("AccessDenied"):
        return CheckResult(
            name,
            UNKNOWN,
            f"{action} was refused ({code}): {detail}",
            f"allow {action} to the preflight function's role (the construct grants it) or to your credentials",
        )
    if code in NOT_OFFERED:
        return CheckResult(
            name,
            UNKNOWN,
            f"{action} did not accept the request ({code}): {detail}",
            "the API or one of its values may not be offered in this partition or region: check it by hand",
        )
    return CheckResult(name, UNKNOWN, f"{action} failed ({code}): {detail}", "check it by hand, or retry the deploy")
