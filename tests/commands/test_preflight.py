"""``python -m trainium_eks preflight``: the deploy's own checks, on the plan the stack's custom resource carries."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest

from tests.support.apps import REPO, default_template, only
from trainium_eks.commands import preflight
from trainium_eks.constructs.preflight import RESOURCE_TYPE, SOURCE
from trainium_eks.core.lambda_sources import load_lambda_module

CHECKS = load_lambda_module(SOURCE, "preflight_checks")


class Checks:
    """Stands in for the checks: records each call's plan and region, and answers ``status``."""

    def __init__(self) -> None:
        self.calls: List[Dict[str, Any]] = []
        self.status = "pass"

    def run_checks(self, plan, session, *, region=None):
        self.calls.append({"plan": plan, "region": region})
        return [CHECKS.CheckResult(check="quota", status=self.status, message="Trn: 256 of 256 vCPUs", advice="ask")]


@pytest.fixture
def checks(monkeypatch) -> Checks:
    stand_in = Checks()
    monkeypatch.setattr(CHECKS, "run_checks", stand_in.run_checks)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return stand_in


def test_the_command_checks_the_plan_the_custom_resource_carries(checks, capsys):
    assert preflight.main(["--stack", "TrainiumEks", "--project", str(REPO)]) == 0
    (call,) = checks.calls
    deployed = json.loads(only(default_template(), RESOURCE_TYPE)["Properties"]["Plan"])
    assert call["plan"] == deployed
    assert call["region"] == "us-west-2"
    out = capsys.readouterr().out
    assert "TrainiumEks (us-west-2):" in out and "Trn: 256 of 256 vCPUs" in out


def test_a_failed_check_exits_1_with_the_users_region_and_settings(checks):
    checks.status = "fail"
    argv = ["--stack", "TrainiumEks", "--project", str(REPO), "--region", "us-east-1", "-c", "nodeCount=4"]
    assert preflight.main(argv) == 1
    (call,) = checks.calls
    assert call["region"] == "us-east-1"
    assert {n["name"]: n["count"] for n in call["plan"]["nodes"]}["AcceleratedNodes"] == 4


def test_a_setting_the_app_refuses_is_one_line_and_exit_2(checks, capsys):
    assert preflight.main(["--stack", "TrainiumEks", "--project", str(REPO), "-c", "nodeCount=lots"]) == 2
    assert "nodeCount" in capsys.readouterr().err
    assert checks.calls == []


def test_an_unknown_stack_is_one_line_and_exit_2_before_any_check(checks, capsys):
    assert preflight.main(["--stack", "Trainium", "--project", str(REPO)]) == 2
    assert "--stack Trainium: the app has no such stack; did you mean TrainiumEks?" in capsys.readouterr().err
    assert checks.calls == []
