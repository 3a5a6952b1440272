"""The project's stacks, built in the command's process as ``cdk synth`` would build them (nothing synthesized).

The commands that read what a stack launches or costs (``cost``, ``preflight``) build the project's ``app.py`` with
the context ``cdk synth`` gives it: ``cdk.json``'s, then ``cdk.context.json``'s, then ``-c key=value``.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, Sequence


class ProjectError(RuntimeError):
    """A project directory, setting or stack the command cannot use; the message says what to do."""


def load_app_module(project: Path) -> Any:
    """The project's ``app.py`` as a module (its ``build_app``)."""
    path = project / "app.py"
    if not path.is_file() or not (project / "cdk.json").is_file():
        raise ProjectError(f"{project}: not the project directory (no app.py and cdk.json): run the command there")
    sys.path.insert(0, str(project))
    spec = importlib.util.spec_from_file_location("trainium_eks_project_app", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def project_context(project: Path, overrides: Sequence[str]) -> Dict[str, Any]:
    """The context ``cdk synth`` gives the app: ``cdk.json``'s, then ``cdk.context.json``'s, then ``-c key=value``."""
    context = dict(json.loads((project / "cdk.json").read_text()).get("context", {}))
    saved = project / "cdk.context.json"
    if saved.is_file():
        context.update(json.loads(saved.read_text()))
    for item in overrides:
        key, separator, value = item.partition("=")
        if not separator or not key:
            raise ProjectError(f"-c {item!r}: key=value")
        context[key] = value
    return context


def project_stacks(project: Path, overrides: Sequence[str], stacks: Sequence[str] = ()) -> Dict[str, Any]:
    """Build the app's stacks (``stacks``, default the app's own selection) with the project's context and
    ``overrides``; return them by name. A setting the app refuses raises :class:`ProjectError` with its message."""
    import aws_cdk as cdk

    from trainium_eks.core.validation import ConfigurationError
    from trainium_eks.stacks.app_context import STACKS

    for name in stacks:
        if name not in STACKS:
            nearest = difflib.get_close_matches(name, STACKS, n=1)
            hint = f"did you mean {nearest[0]}?" if nearest else f"the app's stacks are {', '.join(STACKS)}"
            raise ProjectError(f"--stack {name}: the app has no such stack; {hint}")
    module = load_app_module(project)
    context = project_context(project, overrides)
    if stacks:
        context["stacks"] = ",".join(stacks)
    context["aws:cdk:disable-asset-staging"] = True
    with tempfile.TemporaryDirectory() as outdir:
        app = cdk.App(context=context, outdir=outdir)
        try:
            return dict(module.build_app(app))
        except ConfigurationError as error:
            raise ProjectError(str(error)) from error
