"""Run ../shared/k8s-schemas/validate.py (strict, with the CRDs' CEL rules) on Kubernetes objects; skip, saying so,
when ../shared is absent."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Dict, Iterable

import pytest
import yaml

from tests.support.apps import SHARED
from trainium_eks.facts import versions

VALIDATOR = SHARED / "k8s-schemas" / "validate.py"


def validate_objects(
    objects: Iterable[Dict[str, Any]], tmp_path, *, k8s_version: str = versions.DEFAULT_KUBERNETES_VERSION
):
    """Validate ``objects`` strictly for ``k8s_version``, CEL rules included (``--cel-report``: the validator must have
    evaluated every rule it met, which needs cel-python, a test requirement); fail with the report on any error."""
    if not VALIDATOR.exists():
        pytest.skip(f"skipped: {VALIDATOR} is absent (the Kubernetes schemas live in ../shared)")
    objects = list(objects)
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    result = subprocess.run(
        [sys.executable, str(VALIDATOR), "--cel-report", "--k8s-version", k8s_version, str(path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert f"{len(objects)} passed, 0 failed" in result.stdout, result.stdout[-2000:]
    assert "were not evaluated" not in result.stderr, result.stderr
    assert " 0 not evaluated" in result.stderr, result.stderr
