"""One normalised snapshot of the default app's template.

The fine-grained assertions live in the other test files; the snapshot shows every other change in review.
Regenerate on purpose with ``UPDATE_SNAPSHOTS=1 make test`` and read the diff.
"""

import json
import os
import re
from pathlib import Path

from tests.conftest import default_template

SNAPSHOT = Path(__file__).parent / "snapshots" / "default_app.template.json"
ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def normalised(template) -> str:
    """The template as stable text: asset hashes (they change with aws-cdk-lib and layer versions) replaced."""
    return ASSET_HASH.sub("<asset-hash>", json.dumps(template.to_json(), indent=1, sort_keys=True)) + "\n"


def test_default_app_matches_the_snapshot():
    current = normalised(default_template())
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(current)
    assert SNAPSHOT.exists(), "no snapshot yet: run UPDATE_SNAPSHOTS=1 make test"
    assert current == SNAPSHOT.read_text(), "template changed: review, then UPDATE_SNAPSHOTS=1 make test"
