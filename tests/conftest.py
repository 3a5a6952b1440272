"""Fixtures every test module may take; the helpers themselves are in :mod:`tests.support`."""

from __future__ import annotations

import pytest
from aws_cdk import assertions

from tests.support.apps import default_template


@pytest.fixture(scope="session")
def template() -> assertions.Template:
    """The default app's template."""
    return default_template()
