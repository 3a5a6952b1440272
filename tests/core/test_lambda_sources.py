"""lambda_sources: the project's Lambda folders, loaded by path, and their constants read without running them."""

import pytest

from trainium_eks.core.lambda_sources import lambda_constants, lambda_source, load_lambda_module


def test_constants_are_read_from_the_source_as_the_module_defines_them():
    checks = load_lambda_module("preflight", "preflight_checks")
    read = lambda_constants("preflight", "preflight_checks", "PLAN_VERSION", "IAM_ACTIONS", "HANDLER_IAM_ACTIONS")
    assert read == {
        "PLAN_VERSION": checks.PLAN_VERSION,
        "IAM_ACTIONS": checks.IAM_ACTIONS,
        "HANDLER_IAM_ACTIONS": checks.HANDLER_IAM_ACTIONS,
    }
    with pytest.raises(KeyError, match="NO_SUCH_CONSTANT"):
        lambda_constants("preflight", "preflight_checks", "NO_SUCH_CONSTANT")


def test_a_missing_handler_folder_is_named():
    with pytest.raises(FileNotFoundError, match="no-such-handler"):
        lambda_source("no-such-handler")
