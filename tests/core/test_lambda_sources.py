"""lambda_sources: the project's Lambda folders, loaded by path, and their constants read without running them."""

import pytest

from trainium_eks.core.lambda_sources import lambda_constants, lambda_source, load_lambda_module


def test_constants_are_read_from_the_source_as_the_package_s_modules_define_them():
    checks = load_lambda_module("preflight", "preflight_checks")
    assert lambda_constants("preflight", "preflight_checks/plan", "PLAN_VERSION") == {
        "PLAN_VERSION": checks.PLAN_VERSION
    }
    read = lambda_constants("preflight", "preflight_checks/aws_context", "IAM_ACTIONS", "HANDLER_IAM_ACTIONS")
    assert read == {"IAM_ACTIONS": checks.IAM_ACTIONS, "HANDLER_IAM_ACTIONS": checks.HANDLER_IAM_ACTIONS}
    with pytest.raises(KeyError, match="NO_SUCH_CONSTANT"):
        lambda_constants("preflight", "preflight_checks/plan", "NO_SUCH_CONSTANT")


def test_a_package_loads_with_its_relative_imports_under_one_name():
    checks = load_lambda_module("preflight", "preflight_checks")
    assert checks.__name__ == "trainium_eks_lambda_preflight_preflight_checks"
    assert checks.run_checks.__module__ == "trainium_eks_lambda_preflight_preflight_checks.running"
    assert checks.check_plan is checks.plan.check_plan


def test_a_missing_handler_folder_is_named():
    with pytest.raises(FileNotFoundError, match="no-such-handler"):
        lambda_source("no-such-handler")
