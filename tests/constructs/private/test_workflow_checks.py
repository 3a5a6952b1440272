"""workflow_checks: the hybrid workflow's synth-time checks of its cluster endpoint, durations and history budget."""

import math

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from tests.support.apps import new_app
from tests.support.clusters import ENV, imported_cluster
from trainium_eks.constructs.private.workflow_checks import (
    EVENTS_OUTSIDE_POLLING,
    EVENTS_PER_POLL,
    HISTORY_EVENT_QUOTA,
    check_endpoint,
    check_history_budget,
    whole_seconds,
)
from trainium_eks.core.validation import Problems

ENDPOINT = "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com"
BUDGET = (HISTORY_EVENT_QUOTA - EVENTS_OUTSIDE_POLLING) // EVENTS_PER_POLL
"""Polls that fit in one execution's history."""


@pytest.fixture(scope="module")
def cluster():
    """A stack and a cluster imported into it with its endpoint and certificate."""
    stack = cdk.Stack(new_app(), "Checks", env=ENV)
    _, imported = imported_cluster(
        stack, cluster_endpoint=ENDPOINT, cluster_certificate_authority_data="Q0VSVElGSUNBVEU="
    )
    return stack, imported


def endpoint_problems(cluster, endpoint_access):
    stack, imported = cluster
    problems = Problems("workflow")
    check_endpoint(stack, problems, imported, endpoint_access)
    return list(problems)


@pytest.mark.parametrize(
    "access",
    [
        eks.EndpointAccess.PUBLIC,
        eks.EndpointAccess.PUBLIC_AND_PRIVATE,
        eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from("203.0.113.0/24"),
    ],
    ids=["public", "public-and-private", "restricted"],
)
def test_an_imported_cluster_with_a_public_endpoint_is_accepted(cluster, access):
    assert endpoint_problems(cluster, access) == []


def test_an_endpoint_access_of_another_type_is_refused_as_such(cluster):
    assert endpoint_problems(cluster, "PUBLIC") == ["endpoint_access='PUBLIC': an eks.EndpointAccess"]
    (problem,) = endpoint_problems(cluster, eks.EndpointAccess.PRIVATE)
    assert problem.startswith("cluster='endpoint access PRIVATE': a cluster with a public API endpoint")


@pytest.mark.parametrize(
    "value,seconds",
    [(cdk.Duration.seconds(10), 10), (cdk.Duration.minutes(5), 300), (cdk.Duration.hours(1), 3600)],
)
def test_a_duration_of_whole_seconds_within_the_bounds_is_its_seconds(value, seconds):
    problems = Problems("workflow")
    assert whole_seconds(problems, "poll_interval", value, 10, 3600, "one hour") == seconds
    assert list(problems) == []


@pytest.mark.parametrize(
    "value,shown",
    [
        (cdk.Duration.seconds(9), "'9 seconds'"),
        (cdk.Duration.seconds(3601), "'1 hour 1 second'"),
        (cdk.Duration.millis(10_500), "'10 seconds 500 millis'"),
        (60, "60"),
    ],
    ids=["below", "above", "fraction", "not-a-duration"],
)
def test_any_other_value_is_none_and_one_problem_naming_the_bounds(value, shown):
    problems = Problems("workflow")
    assert whole_seconds(problems, "poll_interval", value, 10, 3600, "one hour") is None
    assert list(problems) == [f"poll_interval={shown}: a Duration of whole seconds, from 10 s to 3600 s (one hour)"]


@pytest.mark.parametrize("poll_seconds", [10, 60, 300])
def test_the_history_budget_admits_exactly_the_polls_that_fit_and_the_shortest_interval_it_names(poll_seconds):
    fits = Problems("workflow")
    check_history_budget(fits, BUDGET * poll_seconds, poll_seconds)
    assert list(fits) == [], "as many polls as the history holds"

    runtime = BUDGET * poll_seconds + 1
    over = Problems("workflow")
    check_history_budget(over, runtime, poll_seconds)
    (problem,) = over
    shortest = math.ceil(runtime / BUDGET)
    assert problem == (
        f"poll_interval='{poll_seconds} s': at least {shortest} s with max_runtime {runtime} s: {BUDGET + 1} polls "
        f"of {EVENTS_PER_POLL} events would pass the {HISTORY_EVENT_QUOTA} events of one execution's history "
        "(Step Functions quotas)"
    )
    suggested = Problems("workflow")
    check_history_budget(suggested, runtime, shortest)
    assert list(suggested) == [], "the interval the problem names is itself accepted"


def test_a_cluster_of_the_app_is_read_and_warned_about_only_when_its_cidrs_shut_out_step_functions():
    stack = cdk.Stack(new_app(), "Defined", env=ENV)
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=1)
    version = eks.KubernetesVersion.of("1.34")
    restricted = eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from
    problems = Problems("workflow")
    warnings = {}
    for id_, access in (("Open", restricted("10.0.0.0/8", "0.0.0.0/0")), ("Shut", restricted("203.0.113.0/24"))):
        cluster = eks.Cluster(stack, id_, vpc=vpc, version=version, endpoint_access=access)
        scope = Construct(stack, f"{id_}Workflow")
        check_endpoint(scope, problems, cluster, None)
        warnings[id_] = [entry.data for entry in scope.node.metadata if entry.type == "aws:cdk:warning"]
    assert list(problems) == []
    assert warnings == {
        "Open": [],
        "Shut": [
            "The cluster's public endpoint admits only 203.0.113.0/24: Step Functions calls it from AWS's own "
            "addresses, so the Kubernetes branch fails with a connection error unless those ranges are admitted. "
            "[ack: trainium-eks:workflowEndpointCidrs]"
        ],
    }
