"""scripts/cdk_app.sh, cdk.json's app: the project's ``.venv`` when it has one, else the active python3."""

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.support.apps import REPO

LAUNCHER = REPO / "scripts" / "cdk_app.sh"


def fake_python(path: Path, name: str) -> None:
    """An executable at ``path`` that says it is ``name`` and prints its arguments."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "{name} $*"\n')
    path.chmod(0o755)


def launch(project: Path, active_bin: Path) -> str:
    """What the launcher runs in ``project``, with ``active_bin`` first on PATH (an activated environment)."""
    (project / "scripts").mkdir(parents=True, exist_ok=True)
    shutil.copy2(LAUNCHER, project / "scripts" / "cdk_app.sh")
    path = os.pathsep.join([str(active_bin), "/usr/bin", "/bin"])
    app = json.loads((REPO / "cdk.json").read_text())["app"]
    result = subprocess.run(
        ["sh", "-c", app], cwd=project, env={"PATH": path}, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_a_project_with_its_venv_runs_the_app_on_it_optimized(tmp_path):
    project = tmp_path / "project"
    fake_python(project / ".venv" / "bin" / "python", "venv")
    fake_python(tmp_path / "active" / "python3", "active")
    assert launch(project, tmp_path / "active") == "venv -O app.py"


def test_a_project_without_a_venv_runs_the_app_on_the_active_environments_python3(tmp_path):
    """CDK Pipelines' synth step (``pip install -r requirements.txt && npx cdk synth``), conda, poetry, a copy."""
    project = tmp_path / "project"
    fake_python(tmp_path / "active" / "python3", "active")
    assert launch(project, tmp_path / "active") == "active -O app.py"
