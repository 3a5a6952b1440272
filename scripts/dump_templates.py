#!/usr/bin/env python3
"""Write the template of every stack variant the deploy rehearsal knows (the default app and each documented change) to
a folder, one file per variant, and the Kubernetes objects each applies; for proving that a refactoring leaves them
byte-identical:

    python scripts/dump_templates.py ../templates-before   # on the old commit
    python scripts/dump_templates.py ../templates-after    # on the new one
    diff -r ../templates-before ../templates-after && echo identical
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk  # noqa: E402

import app as default_app  # noqa: E402

try:  # the rehearsal's home before and after it left the package
    from rehearsal.scenarios import all_scenarios, default_app_source  # noqa: E402
except ImportError:
    from rehearsal.scenarios import all_scenarios, default_app_source  # noqa: E402

ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def new_app(**context):
    """An app with cdk.json's context, overridden by ``context``; asset staging off (as the tests do)."""
    cdk_json = json.loads((REPO / "cdk.json").read_text())["context"]
    return cdk.App(context={**cdk_json, "aws:cdk:disable-asset-staging": True, **context})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    folder = parser.parse_args().folder
    folder.mkdir(parents=True, exist_ok=True)
    seen = set()
    for scenario in all_scenarios():
        source = default_app_source(new_app, default_app.build_app, scenario.stack)
        for variant in (scenario.old, scenario.new):
            if variant is None or (scenario.stack, variant.label) in seen:
                continue
            seen.add((scenario.stack, variant.label))
            template, _ = source(variant)
            name = re.sub(r"[^A-Za-z0-9]+", "-", f"{scenario.stack}-{variant.label}").strip("-")
            text = ASSET_HASH.sub("<asset-hash>", json.dumps(template, indent=1, sort_keys=True))
            (folder / f"{name}.json").write_text(text + "\n")
    print(f"{len(seen)} templates in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
