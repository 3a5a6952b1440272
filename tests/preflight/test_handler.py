"""The preflight's custom resource handler (``lambda/preflight/index.py``): what it PUTs to the response URL (a server
on 127.0.0.1 stands in for CloudFormation's presigned URL) for each request type, and that it always answers."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from typing import Any, Dict, List

import pytest

from tests.support.preflight_aws import MixedSession
from tests.support.preflight_aws import node as _node
from tests.support.preflight_aws import plan as _plan
from tests.support.preflight_aws import quota as _quota

CREATED = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
STACK_ID = "arn:aws:cloudformation:us-west-2:123456789012:stack/TrainiumEks/0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"


def _event(url: str, request_type: str = "Create", plan: Any = None, **overrides: Any) -> Dict[str, Any]:
    event = {
        "RequestType": request_type,
        "ResponseURL": url,
        "StackId": STACK_ID,
        "RequestId": "5d4b0c8e-1111-2222-3333-444455556666",
        "ResourceType": "Custom::TrainiumEksPreflight",
        "LogicalResourceId": "PreflightChecks1A2B3C4D",
        "ServiceToken": "arn:aws:lambda:us-west-2:123456789012:function:preflight",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:us-west-2:123456789012:function:preflight",
            "Plan": json.dumps(_plan() if plan is None else plan),
        },
    }
    if request_type != "Create":
        event["PhysicalResourceId"] = "preflight-TrainiumEks"
    event.update(overrides)
    return event


class Context:
    """The Lambda context's stand-in: ``get_remaining_time_in_millis`` (fixed, or counting down with ``clock``)."""

    def __init__(self, millis: int = 120_000, clock: bool = False) -> None:
        self.millis = millis
        self.started = time.monotonic() if clock else None

    def get_remaining_time_in_millis(self) -> int:
        if self.started is None:
            return self.millis
        return int(self.millis - (time.monotonic() - self.started) * 1000)


class NoAws:
    """A session that refuses every client: a request that must make no AWS call."""

    region_name = "us-west-2"

    def __init__(self) -> None:
        self.asked: List[str] = []

    def client(self, service: str, **_: Any) -> Any:
        self.asked.append(service)
        raise AssertionError(f"no AWS call expected, asked for {service}")


@pytest.fixture
def fake_checks(index, checks, monkeypatch):
    """Replaces the checks by a recorder that answers ``results`` (a test sets them)."""

    class Fake:
        results: List[Any] = []
        calls: List[Dict[str, Any]] = []

        def run_checks(self, plan, session=None, **kwargs):
            self.calls.append({"plan": plan, "session": session, **kwargs})
            if isinstance(self.results, Exception):
                raise self.results
            return self.results

    fake = Fake()
    fake.calls = []
    monkeypatch.setattr(index.preflight_checks, "run_checks", fake.run_checks)
    return fake


def _only(received: List[Dict[str, Any]]) -> Dict[str, Any]:
    assert len(received) == 1, received
    return received[0]


def test_create_answers_success_with_the_counts(index, checks, fake_checks, response_url):
    url, received = response_url
    fake_checks.results = [checks.CheckResult("a", "pass", "ok"), checks.CheckResult("b", "unknown", "refused")]
    index.handler(_event(url), Context(), session=NoAws())
    put = _only(received)
    assert put["path"] == "/response?X-Amz-Signature=abc"
    assert put["headers"]["Content-Type"] == ""
    assert put["body"] == {
        "Status": "SUCCESS",
        "PhysicalResourceId": "preflight-TrainiumEks",
        "StackId": STACK_ID,
        "RequestId": "5d4b0c8e-1111-2222-3333-444455556666",
        "LogicalResourceId": "PreflightChecks1A2B3C4D",
        "Data": {"Passed": 1, "Failed": 0, "Unknown": 1},
    }
    (call,) = fake_checks.calls
    assert call["plan"] == _plan() and call["previous"] is None
    assert call["remaining_seconds"]() == 120.0


def test_a_failed_check_answers_failed_with_what_to_do(index, checks, fake_checks, response_url):
    url, received = response_url
    fake_checks.results = [
        checks.CheckResult("on-demand-vcpus/Trn", "fail", "384 of 256 vCPUs", "request an increase to 384"),
        checks.CheckResult("offering/AcceleratedNodes", "pass", "offered"),
    ]
    index.handler(_event(url), Context(), session=NoAws())
    body = _only(received)["body"]
    assert body["Status"] == "FAILED"
    assert "on-demand-vcpus/Trn: 384 of 256 vCPUs. What to do: request an increase to 384" in body["Reason"]
    assert body["Data"] == {"Passed": 1, "Failed": 1, "Unknown": 0}
    assert body["PhysicalResourceId"] == "preflight-TrainiumEks"


def test_the_answer_fits_cloudformations_4096_bytes_whatever_fails(index, checks, fake_checks, response_url):
    url, received = response_url
    fake_checks.results = [
        checks.CheckResult(f"subnet-addresses/subnet-{i:017x}", "fail", "é" * 120, "ü" * 60) for i in range(200)
    ]
    index.handler(_event(url), Context(), session=NoAws())
    put = _only(received)
    assert len(put["raw"]) <= 4096
    assert put["body"]["Status"] == "FAILED"
    assert "more lines omitted" in put["body"]["Reason"]


def test_update_keeps_the_physical_id_and_passes_the_previous_plan(index, checks, fake_checks, response_url):
    url, received = response_url
    fake_checks.results = [checks.CheckResult("a", "pass", "ok")]
    old = _plan(_node(count=1))
    event = _event(url, "Update", OldResourceProperties={"Plan": json.dumps(old)})
    session = MixedSession()
    session.stub("cloudformation").add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "TrainiumEks",
                    "CreationTime": "2030-01-01T00:00:00Z",
                    "StackStatus": "UPDATE_IN_PROGRESS",
                }
            ]
        },
        {"StackName": STACK_ID},
    )
    index.handler(event, Context(), session=session)
    body = _only(received)["body"]
    assert (body["Status"], body["PhysicalResourceId"]) == ("SUCCESS", "preflight-TrainiumEks")
    assert fake_checks.calls[0]["previous"] == old
    assert fake_checks.calls[0]["forward"] is True, "an update known to go forward compares the plans"


@pytest.mark.parametrize(("status", "counted"), [("UPDATE_IN_PROGRESS", True), ("CREATE_IN_PROGRESS", False)])
def test_a_preflight_new_in_an_existing_stack_counts_its_plan_as_possibly_in_use(
    index, checks, fake_checks, response_url, status, counted
):
    url, received = response_url
    fake_checks.results = [checks.CheckResult("a", "pass", "ok")]
    session = MixedSession()
    session.stub("cloudformation").add_response(
        "describe_stacks",
        {"Stacks": [{"StackName": "TrainiumEks", "CreationTime": "2030-01-01T00:00:00Z", "StackStatus": status}]},
        {"StackName": STACK_ID},
    )
    event = _event(url)
    index.handler(event, Context(), session=session)
    assert _only(received)["body"]["Status"] == "SUCCESS"
    previous = fake_checks.calls[0]["previous"]
    assert (previous == json.loads(event["ResourceProperties"]["Plan"])) if counted else previous is None


def test_an_update_while_the_stack_rolls_back_answers_success_without_checking(
    index, checks, fake_checks, response_url
):
    url, received = response_url
    session = MixedSession()
    session.stub("cloudformation").add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "TrainiumEks",
                    "CreationTime": "2030-01-01T00:00:00Z",
                    "StackStatus": "UPDATE_ROLLBACK_IN_PROGRESS",
                }
            ]
        },
    )
    index.handler(_event(url, "Update"), Context(), session=session)
    body = _only(received)["body"]
    assert (body["Status"], body["Data"]) == ("SUCCESS", {"Skipped": "rollback"})
    assert fake_checks.calls == []


def test_an_unreadable_stack_status_runs_the_checks(index, checks, fake_checks, response_url):
    url, received = response_url
    fake_checks.results = [checks.CheckResult("a", "fail", "no", "do")]
    session = MixedSession()
    session.stub("cloudformation").add_client_error("describe_stacks", "AccessDenied", "not allowed", 403)
    index.handler(_event(url, "Update"), Context(), session=session)
    assert _only(received)["body"]["Status"] == "FAILED"
    assert len(fake_checks.calls) == 1
    assert fake_checks.calls[0]["forward"] is False, "it may be a rollback, whose plans are swapped"


class HangingStatus:
    """A session whose ``DescribeStacks`` hangs until ``release`` is set (its retries and timeouts, at their worst)."""

    region_name = "us-west-2"

    def __init__(self) -> None:
        self.release = threading.Event()

    def client(self, service: str, **_: Any) -> Any:
        assert service == "cloudformation", service
        outer = self

        class Client:
            def describe_stacks(self, **_: Any) -> Dict[str, Any]:
                outer.release.wait(30)
                return {"Stacks": []}

        return Client()


def test_a_stack_status_that_hangs_leaves_the_checks_their_time(index, checks, monkeypatch, response_url):
    url, received = response_url
    left: List[float] = []

    def recording(plan, session=None, *, remaining_seconds=None, **_):
        left.append(remaining_seconds())
        return [checks.CheckResult("availability-zone/usw2-az4", "pass", "ok")]

    monkeypatch.setattr(index.preflight_checks, "run_checks", recording)
    session = HangingStatus()
    try:
        index.handler(
            _event(url, "Update"), Context(int((index.ANSWER_SECONDS + 1) * 1000), clock=True), session=session
        )
    finally:
        session.release.set()
    assert _only(received)["body"]["Status"] == "SUCCESS"
    assert len(left) == 1 and left[0] > 0, "the checks start within the function's time, not after a hung call"


def test_a_check_that_hangs_does_not_keep_the_function_from_answering(index, checks, monkeypatch, response_url):
    url, received = response_url
    release = threading.Event()

    def hanging(plan, session=None, *, progress=None, **_):
        progress(checks.CheckResult("availability-zone/usw2-az4", "pass", "ok"))
        release.wait(30)
        return []

    monkeypatch.setattr(index.preflight_checks, "run_checks", hanging)
    try:
        index.handler(_event(url), Context(int((index.ANSWER_SECONDS + 0.3) * 1000), clock=True), session=NoAws())
    finally:
        release.set()
    body = _only(received)["body"]
    assert (body["Status"], body["Data"]) == ("SUCCESS", {"Passed": 1, "Failed": 0, "Unknown": 1})


def test_delete_answers_success_at_once_without_any_aws_call(index, fake_checks, response_url):
    url, received = response_url
    fake_checks.results = RuntimeError("the checks must not run on delete")
    session = NoAws()
    index.handler(_event(url, "Delete"), Context(), session=session)
    body = _only(received)["body"]
    assert (body["Status"], body["PhysicalResourceId"]) == ("SUCCESS", "preflight-TrainiumEks")
    assert "Reason" not in body
    assert session.asked == [] and fake_checks.calls == []


def test_an_error_inside_still_answers_failed(index, fake_checks, response_url):
    url, received = response_url
    fake_checks.results = RuntimeError("boom")
    index.handler(_event(url), Context(), session=NoAws())
    body = _only(received)["body"]
    assert body["Status"] == "FAILED"
    assert body["Reason"] == "The preflight could not run: RuntimeError: boom"
    assert body["PhysicalResourceId"] == "preflight-TrainiumEks"


def test_checks_that_cannot_be_loaded_still_answer(index, monkeypatch, response_url):
    url, received = response_url
    monkeypatch.setattr(index, "preflight_checks", None)
    monkeypatch.setattr(index, "_IMPORT_ERROR", SyntaxError("invalid syntax"))
    index.handler(_event(url), Context(), session=NoAws())
    index.handler(_event(url, "Delete"), Context(), session=NoAws())
    created, deleted = (put["body"] for put in received)
    assert created["Status"] == "FAILED"
    assert created["Reason"].endswith("the checks could not be loaded: SyntaxError: invalid syntax")
    assert deleted["Status"] == "SUCCESS"


@pytest.mark.parametrize(
    "properties, reason",
    [
        ({"Plan": "{not json"}, "Invalid preflight plan: Plan is not JSON"),
        ({"Plan": json.dumps(_plan(version=2))}, "Invalid preflight plan: plan version 2"),
        ({"Plan": {"version": 1}}, "Invalid preflight plan: Plan must be one JSON string, not dict"),
        ({}, "Invalid preflight plan: the resource has no Plan property"),
    ],
)
def test_a_bad_plan_answers_failed_with_one_clear_message(index, fake_checks, response_url, properties, reason):
    url, received = response_url
    index.handler(_event(url, ResourceProperties=properties), Context(), session=NoAws())
    body = _only(received)["body"]
    assert body["Status"] == "FAILED" and body["Reason"].startswith(reason)
    assert fake_checks.calls == []


def test_a_request_without_a_response_url_does_not_raise(index, fake_checks):
    response = index.handler({"RequestType": "Delete"}, None, session=NoAws())
    assert response["Status"] == "SUCCESS"


def test_the_handler_runs_the_real_checks(index, checks, aws, response_url):
    """End to end: moto's EC2, stubbed Service Quotas; the system nodes alone pass."""
    url, received = response_url
    plan = _plan(
        _node(name="SystemNodes", instanceType="m7i.xlarge", availabilityZoneId=None, efaInterfaces=0),
        kubernetesVersion=None,
    )
    session = MixedSession()
    session.stub("service-quotas").add_response(
        "get_service_quota", _quota("L-1216C47A", 64, {"Class": "Standard/OnDemand", "Run": "handler"})
    )
    index.handler(_event(url, plan=plan), Context(), session=session)
    body = _only(received)["body"]
    assert (body["Status"], body["Data"]) == ("SUCCESS", {"Passed": 3, "Failed": 0, "Unknown": 0})
    session.assert_no_pending_responses()
