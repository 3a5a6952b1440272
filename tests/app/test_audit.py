"""checkov's Kubernetes checks pass on every object the default app applies, and every finding the library accepts is
acknowledged on its object with a reason (``trainium_eks/manifests/audit_exceptions.py``), and nothing else is."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import app as default_app
from tests.support.apps import REPO, new_app

CHECKOV = REPO / ".venv-audit" / "bin" / "checkov"
SKIP = "checkov.io/skip"


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    """The default app's objects as scripts/applied_objects.py writes them for the audit (Volcano Jobs as pods)."""
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: make test installs checkov (requirements-audit.txt) into .venv-audit")
    root = tmp_path_factory.mktemp("audit")
    app = new_app()
    default_app.build_app(app)
    assembly = app.synth()
    out = root / "cdk.out"
    out.mkdir()
    for artifact in assembly.stacks:
        (out / artifact.template_file).write_text(json.dumps(artifact.template))
    objects = root / "objects"
    script = REPO / "scripts" / "applied_objects.py"
    subprocess.run([sys.executable, str(script), "--pods", str(out), str(objects)], check=True, capture_output=True)
    return objects


def checkov(folder: Path) -> dict:
    result = subprocess.run(
        [str(CHECKOV), "-d", str(folder), "--framework", "kubernetes", "--compact", "-o", "json"],
        capture_output=True,
        text=True,
    )
    report = json.loads(result.stdout)
    return report["results"] if "results" in report else {"failed_checks": [], "skipped_checks": []}


def findings(results: dict, kind: str) -> set:
    return {(r["check_id"], r["resource"]) for r in results.get(kind, [])}


def test_checkov_finds_nothing_but_what_is_acknowledged(objects):
    results = checkov(objects)
    assert findings(results, "failed_checks") == set()
    skipped = results.get("skipped_checks", [])
    assert len(skipped) > 50, "the device plugins, staging, releases and training pods have acknowledged findings"
    for check in skipped:
        reason = check["check_result"].get("suppress_comment") or ""
        assert len(reason) >= 40, f"{check['check_id']} on {check['resource']}: {reason!r} is not a reason"


def test_every_acknowledgement_answers_a_real_finding(objects, tmp_path):
    """Without the acknowledgements, checkov fails exactly what they acknowledge: none is left over."""
    for path in objects.glob("*.yaml"):
        obj = yaml.safe_load(path.read_text())
        annotations = obj.get("metadata", {}).get("annotations") or {}
        for key in [k for k in annotations if k.startswith(SKIP)]:
            del annotations[key]
        (tmp_path / path.name).write_text(yaml.safe_dump(obj, sort_keys=False))
    acknowledged = findings(checkov(objects), "skipped_checks")
    assert findings(checkov(tmp_path), "failed_checks") == acknowledged
