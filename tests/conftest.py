"""Fixtures every test module may take; the helpers themselves are in :mod:`tests.support`."""

from __future__ import annotations

import pytest
from aws_cdk import assertions

from tests.support.apps import REPO, default_template

IMAGES_TESTS = REPO / "tests" / "images"


def pytest_collection_modifyitems(items):
    """Mark the tests of the training images' own code (``images``): ``make test-fast`` leaves them out."""
    for item in items:
        if IMAGES_TESTS in item.path.parents:
            item.add_marker(pytest.mark.images)


@pytest.fixture(scope="session")
def template() -> assertions.Template:
    """The default app's template."""
    return default_template()
