"""Fixtures every test module may take; the helpers themselves are in :mod:`tests.support`."""

from __future__ import annotations

import pytest
from aws_cdk import assertions

from tests.support.apps import REPO, default_template

IMAGES_TESTS = REPO / "tests" / "images"
E2E_TESTS = REPO / "tests" / "e2e"


def pytest_collection_modifyitems(items):
    """Mark the tests of the training images' own code (``images``: ``make test-fast`` leaves them out) and the
    tests on the real control plane (``e2e``: only ``make e2e`` runs them)."""
    for item in items:
        if IMAGES_TESTS in item.path.parents:
            item.add_marker(pytest.mark.images)
        if E2E_TESTS in item.path.parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def template() -> assertions.Template:
    """The default app's template."""
    return default_template()
