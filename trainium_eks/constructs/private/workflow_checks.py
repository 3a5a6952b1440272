"""Synth-time checks of the hybrid workflow's settings that are more than a type check: the cluster's endpoint
(Step Functions reaches public endpoints only), durations in whole seconds, the polling loop's history budget."""

from __future__ import annotations

import math
from typing import Any, List, Optional

from aws_cdk import Annotations, Duration
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from trainium_eks.core.validation import Problems

HISTORY_EVENT_QUOTA = 25_000
"""Events in one Standard execution's history. Source: Step Functions developer guide, "Step Functions service
quotas" (limits-overview.html), quotas related to state machine executions."""

EVENTS_PER_POLL = 9
"""History events of one round of the Kubernetes polling loop once the TrainJob exists: Wait entered and exited,
Task entered, scheduled, started, succeeded and exited, Choice entered and exited."""

EVENTS_PER_WAIT = 16
"""History events of one round while the run's release has not created the TrainJob yet: a round of
:data:`EVENTS_PER_POLL`, then the release's read (Task, 5 events) and its Choice (2)."""

EVENTS_OUTSIDE_POLLING = 1_000
"""History events kept free for the rest of an execution (request checks, the create call, retries, the end)."""


def check_endpoint(
    scope: Construct, problems: Problems, cluster: eks.ICluster, endpoint_access: Optional[eks.EndpointAccess]
) -> None:
    """Refuse a cluster whose API endpoint is private only (Step Functions' EKS integration reaches public endpoints
    only: Step Functions developer guide, connect-eks.html), and one without the endpoint and certificate data."""
    for attribute, hint in (
        ("cluster_endpoint", "cluster_endpoint="),
        ("cluster_certificate_authority_data", "cluster_certificate_authority_data="),
    ):
        try:
            present = getattr(cluster, attribute) is not None
        except RuntimeError:
            present = False
        if not present:
            problems.add(
                "cluster",
                f"<cluster without {attribute}>",
                f"a cluster with {attribute} (eks:call needs it): import it with "
                f"eks.Cluster.from_cluster_attributes(..., {hint})",
            )
    cidrs: Optional[List[str]] = None
    if endpoint_access is not None:
        if not isinstance(endpoint_access, eks.EndpointAccess):
            problems.add("endpoint_access", endpoint_access, "an eks.EndpointAccess")
            return
        public = endpoint_access.__jsii_ref__.ref != eks.EndpointAccess.PRIVATE.__jsii_ref__.ref
    else:
        config = _vpc_config(cluster)
        if config is None:
            problems.add(
                "endpoint_access",
                None,
                "the imported cluster's eks.EndpointAccess (PUBLIC or PUBLIC_AND_PRIVATE): Step Functions reaches "
                "only a public API endpoint",
            )
            return
        public = bool(config.endpoint_public_access) if config.endpoint_public_access is not None else True
        cidrs = list(config.public_access_cidrs or [])
    if not public:
        problems.add(
            "cluster",
            "endpoint access PRIVATE",
            "a cluster with a public API endpoint (eks.EndpointAccess.PUBLIC_AND_PRIVATE or PUBLIC): Step Functions' "
            "EKS integration (eks:call) supports only Kubernetes APIs with public endpoint access (Step Functions "
            "developer guide, connect-eks.html); a private-only cluster cannot run the Kubernetes branch",
        )
    elif cidrs and "0.0.0.0/0" not in cidrs:
        Annotations.of(scope).add_warning_v2(
            "trainium-eks:workflowEndpointCidrs",
            f"The cluster's public endpoint admits only {', '.join(cidrs)}: Step Functions calls it from AWS's own "
            "addresses, so the Kubernetes branch fails with a connection error unless those ranges are admitted.",
        )


def _vpc_config(cluster: eks.ICluster) -> Optional[Any]:
    """The ``ResourcesVpcConfig`` of a cluster defined in this app, or None for an imported one."""
    child = cluster.node.default_child
    return child.resources_vpc_config if isinstance(child, eks.CfnCluster) else None


def whole_seconds(
    problems: Problems, setting: str, value: Any, minimum: int, maximum: int, maximum_name: str
) -> Optional[int]:
    """``value`` (a Duration) in whole seconds, within bounds; None (with a problem) otherwise."""
    allowed = f"a Duration of whole seconds, from {minimum} s to {maximum} s ({maximum_name})"
    if not isinstance(value, Duration):
        problems.add(setting, value, allowed)
        return None
    seconds = value.to_seconds(integral=False)
    if seconds != int(seconds) or not minimum <= seconds <= maximum:
        problems.add(setting, value.to_human_string(), allowed)
        return None
    return int(seconds)


def check_history_budget(problems: Problems, runtime_seconds: int, poll_seconds: int, waiting_seconds: int = 0) -> None:
    """The Kubernetes polling loop must fit in one execution's history (:data:`HISTORY_EVENT_QUOTA`): the rounds of
    ``runtime_seconds`` (:data:`EVENTS_PER_POLL` each) and those of ``waiting_seconds``, the longest the run's
    release may take to create the TrainJob (:data:`EVENTS_PER_WAIT` each)."""
    polls = math.ceil(runtime_seconds / poll_seconds)
    waits = math.ceil(waiting_seconds / poll_seconds)
    available = HISTORY_EVENT_QUOTA - EVENTS_OUTSIDE_POLLING
    if polls * EVENTS_PER_POLL + waits * EVENTS_PER_WAIT > available:
        shortest = math.ceil((runtime_seconds * EVENTS_PER_POLL + waiting_seconds * EVENTS_PER_WAIT) / available)
        while (
            math.ceil(runtime_seconds / shortest) * EVENTS_PER_POLL
            + math.ceil(waiting_seconds / shortest) * EVENTS_PER_WAIT
            > available
        ):
            shortest += 1
        waiting = f" and {waits} rounds of {EVENTS_PER_WAIT} while its release holds nodes" if waits else ""
        problems.add(
            "poll_interval",
            f"{poll_seconds} s",
            f"at least {shortest} s with max_runtime {runtime_seconds} s: {polls} polls of {EVENTS_PER_POLL} events"
            f"{waiting} would pass the {HISTORY_EVENT_QUOTA} events of one execution's history (Step Functions quotas)",
        )
