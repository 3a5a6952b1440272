#!/usr/bin/env python3
"""``make rehearse``: rehearse the default app's deploy scenarios offline and print their tables.

For each scenario: CloudFormation's actions between the two templates, the commands the real aws-eks-v2 kubectl
handler (from the installed aws-cdk-lib) runs against fake ``aws``/``kubectl``/``helm``, the cluster's objects
before and after, and the promises (:mod:`rehearsal`). Exit status 1 when a promise is broken.

    python scripts/rehearse.py                      # every scenario
    python scripts/rehearse.py --scenario destroy   # scenarios whose name contains "destroy"
    python scripts/rehearse.py --list
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk  # noqa: E402

import app as default_app  # noqa: E402
from rehearsal.report import render  # noqa: E402
from rehearsal.scenario import Rehearsal  # noqa: E402
from rehearsal.scenarios import all_scenarios, default_app_sources  # noqa: E402


def new_app(**context: Any) -> cdk.App:
    """An app with the context of cdk.json, overridden by ``context``; asset staging off (as the tests do)."""
    cdk_json = json.loads((REPO / "cdk.json").read_text())["context"]
    return cdk.App(context={**cdk_json, "aws:cdk:disable-asset-staging": True, **context})


def main() -> int:
    """Run the scenarios (all, or those ``--scenario`` names), print their tables; 1 when a promise is broken."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", help="run only the scenarios whose name contains this text")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    options = parser.parse_args()
    every = all_scenarios()
    scenarios = [s for s in every if not options.scenario or options.scenario in f"{s.stack}: {s.name}"]
    if options.list or not scenarios:
        print("\n".join(f"{s.stack}: {s.name}" for s in every))
        return 0 if options.list else 2
    broken = []
    with Rehearsal(default_app_sources(new_app, default_app.build_app)) as rehearsal:
        for scenario in scenarios:
            result = rehearsal.run(scenario)
            print(render(result))
            broken.extend(f"{scenario.stack}: {scenario.name}: {name}" for name in result.failed_promises())
    print(f"{len(scenarios)} scenarios, {len(broken)} broken promises")
    for line in broken:
        print(f"  {line}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
