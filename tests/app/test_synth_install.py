"""`make synth` installs requirements.txt only: everything a synth of the default app imports must come from it."""

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from typing import Dict, Set

from packaging.requirements import Requirement

from tests.support.apps import REPO
from tests.support.requirements import requirement_lines

OWN_MODULES = {"app", "trainium_eks", "__main__"}
"""Top-level modules of this checkout, which no distribution installs."""

REPORT = textwrap.dedent(
    """
    import atexit, json, runpy, sys
    atexit.register(lambda: print("MODULES " + json.dumps(sorted({name.split(".")[0] for name in sys.modules}))))
    sys.argv = ["app.py"]
    runpy.run_path("app.py", run_name="__main__")
    """
)
"""Runs app.py as cdk.json does and prints, once the cloud assembly is written, the top-level modules it imported
(app.py runs its exit handlers before it leaves)."""


def installed_closure(path) -> Set[str]:
    """The normalized names of the distributions ``path`` pins and of everything they require, transitively (as pip
    installs them: markers evaluated for this interpreter, no extras)."""
    wanted = [Requirement(line).name for _, line in requirement_lines(path) if not line.startswith("-r ")]
    found: Set[str] = set()
    while wanted:
        name = wanted.pop().lower().replace("_", "-").replace(".", "-")
        if name in found:
            continue
        found.add(name)
        for text in importlib.metadata.requires(name) or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
    return found


def imported_modules(code: str, tmp_path) -> Set[str]:
    """The top-level modules that ``code`` imported (it prints them after ``MODULES``), run as cdk.json runs app.py."""
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps(context), "CDK_OUTDIR": str(tmp_path / "cdk.out")}
    result = subprocess.run(
        [sys.executable, "-O", "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("MODULES ")]
    return set(json.loads(line[len("MODULES ") :]))


def test_a_synth_imports_nothing_that_requirements_txt_does_not_install(tmp_path):
    closure = installed_closure(REPO / "requirements.txt")
    owners: Dict[str, list] = importlib.metadata.packages_distributions()
    outside = {}
    # What the interpreter imports before any code (site's .pth hooks: setuptools', the venv's Node.js) is not synth's.
    at_start = imported_modules('import json, sys; print("MODULES " + json.dumps(sorted(sys.modules)))', tmp_path)
    for module in imported_modules(REPORT, tmp_path) - at_start - OWN_MODULES - set(sys.stdlib_module_names):
        distributions = {name.lower().replace("_", "-").replace(".", "-") for name in owners.get(module, ())}
        if distributions and not distributions & closure:
            outside[module] = sorted(distributions)
    assert outside == {}, f"imported at synth but installed only by make test: {outside} (add them to requirements.txt)"
