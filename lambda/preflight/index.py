"""The preflight's custom resource: a Lambda function that CloudFormation calls directly (the resource's
``ServiceToken`` is this function; no Provider framework), runs the checks of ``preflight_checks`` on the plan the
resource carries, and answers CloudFormation itself.

- Create and Update: ``ResourceProperties.Plan`` is the plan as one JSON string (CloudFormation passes every
  property value as a string). No check starts when fewer than ``preflight_checks.RESERVE_SECONDS`` remain
  (``context.get_remaining_time_in_millis()``), and the handler stops waiting for a check that hangs when
  ``ANSWER_SECONDS`` remain; what was not checked is ``unknown``. The table of results goes to the function's log.
  The answer is SUCCESS when no check failed (``Data``: the counts), FAILED with ``preflight_checks.failure_message``
  (each failed check and what to do) when one did. On an update the previous plan (``OldResourceProperties.Plan``)
  tells the checks what the stack's running resources may already hold, and so does the plan itself on a create in a
  stack that exists (``UPDATE_IN_PROGRESS``: the preflight is new in a stack deployed without one); while the stack
  rolls back
  (``cloudformation:DescribeStacks``: ``UPDATE_ROLLBACK_IN_PROGRESS``) the answer is SUCCESS at once, so a check
  cannot leave the stack in UPDATE_ROLLBACK_FAILED.
- Delete: SUCCESS at once, without any AWS call.
- Whatever happens (a bad plan, an error of this code), the function answers, FAILED with the error: an unanswered
  custom resource holds the stack until the resource's timeout (one hour by default).

The answer is the custom resource response object (CloudFormation user guide, "Custom resource response objects",
https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html): ``Status``, ``Reason``
(required when FAILED), ``PhysicalResourceId`` (up to 1 KB, the same in every answer for the resource: a different
one on an update would be a replacement), ``StackId``, ``RequestId`` and ``LogicalResourceId`` copied from the
request, ``Data``; the whole body may not exceed 4096 bytes. It is PUT to the request's presigned ``ResponseURL``
with an empty Content-Type (the presigned URL is signed without one).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional


def _import_checks() -> Any:
    """``preflight_checks``: the Lambda's own package, or the sibling folder when this module was loaded by path."""
    try:
        import preflight_checks as module
    except ModuleNotFoundError:
        folder = Path(__file__).with_name("preflight_checks")
        spec = importlib.util.spec_from_file_location(
            "preflight_checks", folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules["preflight_checks"] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            for name in [name for name in sys.modules if name.split(".")[0] == "preflight_checks"]:
                del sys.modules[name]
            raise
    return module


try:
    preflight_checks = _import_checks()
    _IMPORT_ERROR: Optional[BaseException] = None
except Exception as _error:  # noqa: BLE001 - the handler answers FAILED with it instead of never answering
    preflight_checks = None
    _IMPORT_ERROR = _error

MAX_BODY_BYTES = 4096
"""CloudFormation's limit on the size of a custom resource's response body."""

REASON_CHARACTERS = 3500
"""The most characters ``Reason`` gets before the body's own limit applies."""

ANSWER_SECONDS = 15.0
"""The handler stops waiting for the checks when this many seconds remain, and answers with what it has."""

STATUS_SECONDS = 10.0
"""The longest the handler waits for the stack's status (``DescribeStacks``), and never past ``ANSWER_SECONDS``
before the function's timeout: without it the checks run as for a new stack."""

RESPONSE_TIMEOUT_SECONDS = 5
RESPONSE_ATTEMPTS = 3


def handler(event: Mapping[str, Any], context: Any, *, session: Any = None) -> Dict[str, Any]:
    """Answer CloudFormation's request ``event``; returns the response sent (``session``: for tests)."""
    if not isinstance(event, Mapping):
        event = {}
    try:
        response = _respond_to(event, context, session)
    except Exception as error:  # noqa: BLE001 - always answer
        traceback.print_exc()
        response = _response(event, "FAILED", reason=f"The preflight could not run: {type(error).__name__}: {error}")
    try:
        _send(event, response, _remaining(context))
    except Exception:  # noqa: BLE001 - nothing more can be done; the log has it
        traceback.print_exc()
    return response


def _respond_to(event: Mapping[str, Any], context: Any, session: Any) -> Dict[str, Any]:
    request_type = event.get("RequestType")
    if request_type == "Delete":
        return _response(event, "SUCCESS")
    if preflight_checks is None:
        raise RuntimeError(f"the checks could not be loaded: {type(_IMPORT_ERROR).__name__}: {_IMPORT_ERROR}")
    if request_type not in ("Create", "Update"):
        return _response(event, "FAILED", reason=f"Unknown RequestType {request_type!r}")
    plan, problems = _plan_of(event.get("ResourceProperties"))
    if problems:
        return _response(event, "FAILED", reason="Invalid preflight plan: " + "; ".join(problems))
    import boto3

    session = session if session is not None else boto3.session.Session()
    previous: Optional[Mapping[str, Any]] = None
    status = _stack_status(session, event, _remaining(context))
    if request_type == "Update":
        if status == "UPDATE_ROLLBACK_IN_PROGRESS":
            print("the stack is rolling back: the checks are skipped")
            return _response(event, "SUCCESS", data={"Skipped": "rollback"})
        previous, _ = _plan_of(event.get("OldResourceProperties"))
    elif status == "UPDATE_IN_PROGRESS":
        # The preflight is new in a stack that exists (deployed before the stack had one): its instances, file
        # systems and addresses may already be in the use AWS reports, as on an update.
        print("the preflight is new in an existing stack: what the plan has may already be in use")
        previous = plan
    forward = request_type == "Update" and status == "UPDATE_IN_PROGRESS"
    results = _run_in_time(plan, session, previous, forward, _remaining(context))
    print(preflight_checks.format_table(results))
    counts = {
        "Passed": sum(1 for r in results if r.status == preflight_checks.PASS),
        "Failed": sum(1 for r in results if r.status == preflight_checks.FAIL),
        "Unknown": sum(1 for r in results if r.status == preflight_checks.UNKNOWN),
    }
    if counts["Failed"]:
        return _response(event, "FAILED", results=results, data=counts)
    return _response(event, "SUCCESS", data=counts)


def _remaining(context: Any) -> Optional[Callable[[], float]]:
    """The seconds the function has left (``context.get_remaining_time_in_millis()``), or None without a context."""
    if context is None or not hasattr(context, "get_remaining_time_in_millis"):
        return None
    return lambda: context.get_remaining_time_in_millis() / 1000.0


def _run_in_time(
    plan: Mapping[str, Any], session: Any, previous: Any, forward: bool, remaining: Optional[Callable[[], float]]
) -> List[Any]:
    """The checks' results, in a worker thread that the handler waits for until ``ANSWER_SECONDS`` remain: a call
    that hangs (retries, timeouts) cannot keep the function from answering. Then the results so far are given, with
    one ``unknown`` for the rest."""
    collected: List[Any] = []
    outcome: Dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["results"] = preflight_checks.run_checks(
                plan,
                session,
                previous=previous,
                forward=forward,
                remaining_seconds=remaining,
                progress=collected.append,
            )
        except BaseException as error:  # noqa: BLE001 - given to the handler, which answers FAILED
            outcome["error"] = error

    worker = threading.Thread(target=work, name="preflight-checks", daemon=True)
    worker.start()
    worker.join(None if remaining is None else max(remaining() - ANSWER_SECONDS, 0.0))
    if "error" in outcome:
        raise outcome["error"]
    if "results" in outcome:
        return outcome["results"]
    return list(collected) + [
        preflight_checks.CheckResult(
            "preflight",
            preflight_checks.UNKNOWN,
            f"the checks had not finished {ANSWER_SECONDS:.0f} s before the function's timeout: the rest were not made",
            "run `python -m trainium_eks preflight`, or give the preflight function a longer timeout",
        )
    ]


def _plan_of(properties: Any) -> tuple:
    """The plan of a request's properties and its problems (``preflight_checks.check_plan``)."""
    if not isinstance(properties, Mapping) or "Plan" not in properties:
        return None, ["the resource has no Plan property"]
    text = properties["Plan"]
    if not isinstance(text, str):
        return None, [f"Plan must be one JSON string, not {type(text).__name__}"]
    try:
        plan = json.loads(text)
    except ValueError as error:
        return None, [f"Plan is not JSON: {error}"]
    return plan, preflight_checks.check_plan(plan)


def _stack_status(
    session: Any, event: Mapping[str, Any], remaining: Optional[Callable[[], float]] = None
) -> Optional[str]:
    """The request's stack's status (``cloudformation:DescribeStacks``): ``UPDATE_ROLLBACK_IN_PROGRESS`` while an
    update rolls back, ``UPDATE_IN_PROGRESS`` for a stack that existed before this resource, ``CREATE_IN_PROGRESS``
    for a new one; None when it cannot be read, or not within :data:`STATUS_SECONDS` and the function's budget (a
    call that hangs on its retries), so that the function always answers: then the checks run as for a new stack."""
    outcome: Dict[str, Any] = {}

    def read() -> None:
        try:
            client = session.client("cloudformation", config=preflight_checks.CLIENT_CONFIG)
            stacks = client.describe_stacks(StackName=event["StackId"]).get("Stacks", [])
            outcome["status"] = stacks[0].get("StackStatus") if stacks else None
        except Exception as error:  # noqa: BLE001 - without the status the checks run
            outcome["error"] = error

    reader = threading.Thread(target=read, name="preflight-stack-status", daemon=True)
    reader.start()
    budget = STATUS_SECONDS if remaining is None else min(STATUS_SECONDS, max(remaining() - ANSWER_SECONDS, 0.0))
    reader.join(budget)
    if "error" in outcome:
        error = outcome["error"]
        print(f"the stack's status could not be read ({type(error).__name__}: {error}): the checks run")
        return None
    if "status" not in outcome:
        print(f"the stack's status was not read within {budget:.0f} s: the checks run")
        return None
    return outcome["status"]


def _physical_id(event: Mapping[str, Any]) -> str:
    """The resource's physical ID: the one CloudFormation gave (update, delete), else ``preflight-<stack>`` from the
    plan (``preflight-<logical id>`` when the plan cannot be read)."""
    if event.get("PhysicalResourceId"):
        return str(event["PhysicalResourceId"])
    stack = None
    try:
        stack = json.loads(event["ResourceProperties"]["Plan"]).get("stack")
    except Exception:  # noqa: BLE001 - any unreadable plan
        pass
    if not isinstance(stack, str) or not stack:
        stack = str(event.get("LogicalResourceId") or "resource")
    return f"preflight-{stack}"[:1024]


def _response(
    event: Mapping[str, Any],
    status: str,
    *,
    reason: str = "",
    results: Any = None,
    data: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """The response object; ``Reason`` is cut so that the body fits in ``MAX_BODY_BYTES``."""
    body: Dict[str, Any] = {
        "Status": status,
        "PhysicalResourceId": _physical_id(event),
        "StackId": event.get("StackId", ""),
        "RequestId": event.get("RequestId", ""),
        "LogicalResourceId": event.get("LogicalResourceId", ""),
        "Data": data or {},
    }
    limit = REASON_CHARACTERS
    while True:
        if results is not None:
            text = preflight_checks.failure_message(results, limit=limit)
        else:
            text = reason[:limit] if len(reason) <= limit else reason[: max(limit - 1, 0)] + "…"
        if text or status == "FAILED":
            body["Reason"] = text or "FAILED"
        if len(json.dumps(body).encode("utf-8")) <= MAX_BODY_BYTES or limit <= 100:
            return body
        limit -= 200


def _send(
    event: Mapping[str, Any], response: Mapping[str, Any], remaining: Optional[Callable[[], float]] = None
) -> None:
    """PUT ``response`` to the request's ``ResponseURL``, retried on a network error or a 5xx answer while the
    function has time left."""
    url = event.get("ResponseURL")
    if not url:
        print("no ResponseURL in the request: nothing to answer")
        return
    body = json.dumps(response).encode("utf-8")
    print(f"answering {response['Status']}: {response.get('Reason', '')}")
    for attempt in range(1, RESPONSE_ATTEMPTS + 1):
        request = urllib.request.Request(
            url, data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
        )
        try:
            with urllib.request.urlopen(request, timeout=RESPONSE_TIMEOUT_SECONDS) as answer:
                print(f"CloudFormation took the answer: HTTP {answer.status}")
                return
        except urllib.error.HTTPError as error:
            print(f"the answer was refused: HTTP {error.code} {error.reason}")
            if error.code < 500:
                return
        except (urllib.error.URLError, OSError) as error:
            print(f"the answer could not be sent (attempt {attempt}): {error}")
        if attempt < RESPONSE_ATTEMPTS:
            if remaining is not None and remaining() < attempt + RESPONSE_TIMEOUT_SECONDS + 1:
                return
            time.sleep(attempt)
