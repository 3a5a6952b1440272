"""A normalised snapshot of each stack of the default app.

The fine-grained assertions live in the other test modules; the snapshots show every other change in review. After
a change you meant, regenerate them with ``UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/app/test_snapshots.py``
and read the diff of ``tests/app/snapshots/``.
"""

import json
import os
import re
from pathlib import Path

import pytest

from tests.support.apps import COMPOSER_TRAINING, KUBEFLOW_TRAINING, TRAINIUM_EKS, stack_template

SNAPSHOTS = Path(__file__).parent / "snapshots"
ASSET_HASH = re.compile(r"[0-9a-f]{64}")
UPDATE = "UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/app/test_snapshots.py"


def normalised(template) -> str:
    """The template as stable text: asset hashes (they change with aws-cdk-lib and layer versions) replaced."""
    return ASSET_HASH.sub("<asset-hash>", json.dumps(template.to_json(), indent=1, sort_keys=True)) + "\n"


def changed_resources(old: str, new: str) -> str:
    """The logical ids added, removed or changed between two snapshots, for the failure message."""
    before, after = json.loads(old).get("Resources", {}), json.loads(new).get("Resources", {})
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(key for key in set(before) & set(after) if before[key] != after[key])
    return f"added {added[:10]}, removed {removed[:10]}, changed {changed[:10]}"


@pytest.mark.parametrize("stack", [TRAINIUM_EKS, KUBEFLOW_TRAINING, COMPOSER_TRAINING])
def test_each_stack_matches_its_snapshot(stack):
    snapshot = SNAPSHOTS / f"{stack}.template.json"
    current = normalised(stack_template(stack))
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        snapshot.write_text(current)
    assert snapshot.exists(), f"no snapshot of {stack} yet: run {UPDATE}"
    recorded = snapshot.read_text()
    assert current == recorded, f"{stack} changed ({changed_resources(recorded, current)}): review, then run {UPDATE}"
