#!/usr/bin/env python3
"""``make rehearse``: rehearse the default app's deploy scenarios offline and print their tables.

For each scenario: CloudFormation's actions between the two templates and the promises (:mod:`rehearsal`); and the
synth warnings of its templates that no earlier scenario printed (each warning once, not once per synth). What the
handler and the cluster do with those actions, ``make e2e`` runs on the real components. Exit status 1 when a
promise is broken.

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
from typing import Any, Iterable, List, Set

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk  # noqa: E402

import app as default_app  # noqa: E402
from rehearsal.report import render  # noqa: E402
from rehearsal.scenario import Rehearsal  # noqa: E402
from rehearsal.scenarios import all_scenarios, default_app_sources  # noqa: E402

QUIET = {"@aws-cdk/core:annotationsInValidationReport": False}
"""Context that keeps aws-cdk-lib from printing every synth's warnings (its validation report); :func:`new_warnings`
reads them from the cloud assembly instead."""


class Apps:
    """Makes the rehearsal's apps (:meth:`new`) and remembers their output folders, to read their warnings."""

    def __init__(self) -> None:
        self.outdirs: List[Path] = []

    def new(self, **context: Any) -> cdk.App:
        """An app with the context of cdk.json, overridden by ``context``; asset staging off (as the tests do), and
        :data:`QUIET`."""
        cdk_json = json.loads((REPO / "cdk.json").read_text())["context"]
        app = cdk.App(context={**cdk_json, "aws:cdk:disable-asset-staging": True, **context, **QUIET})
        self.outdirs.append(Path(app.outdir))
        return app


def new_warnings(outdirs: Iterable[Path], seen: Set[str]) -> List[str]:
    """The warnings recorded in the cloud assemblies in ``outdirs`` (``aws:cdk:warning`` metadata of their stacks)
    that are not in ``seen``, each once, in order; adds them to ``seen``."""
    found = []
    for outdir in outdirs:
        for path in sorted(outdir.glob("*.metadata.json")):
            for entries in json.loads(path.read_text()).values():
                for entry in entries:
                    text = str(entry.get("data", ""))
                    if entry.get("type") == "aws:cdk:warning" and text not in seen:
                        seen.add(text)
                        found.append(text)
    return found


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
    broken: List[str] = []
    apps, warned = Apps(), set()
    rehearsal = Rehearsal(default_app_sources(apps.new, default_app.build_app))
    for scenario in scenarios:
        result = rehearsal.run(scenario)
        print(render(result))
        for warning in new_warnings(apps.outdirs, warned):
            print(f"synth warning: {warning}\n")
        apps.outdirs.clear()
        broken.extend(f"{scenario.stack}: {scenario.name}: {name}" for name in result.failed_promises())
    print(f"{len(scenarios)} scenarios, {len(broken)} broken promises")
    for line in broken:
        print(f"  {line}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
