"""Where the project's own Lambda handlers live (``lambda/`` beside the package), and how the command line loads one.

A handler folder is packaged as it is (``lambda/<name>``, the function's asset); the command line imports the same
files by path (``python -m trainium_eks preflight`` runs the preflight's checks from the user's credentials), so the
checks exist once. A Lambda source imports only the standard library and boto3, which the Lambda Python runtime
provides, never ``trainium_eks``.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, Optional

LAMBDA_ROOT = Path(__file__).resolve().parents[2] / "lambda"
"""The project's ``lambda/`` folder (the repository root's, beside ``trainium_eks/``)."""

ASSET_EXCLUDE = ("__pycache__", "*.pyc")
"""What a handler's asset leaves out: Python's byte-code caches, which would change the asset's hash."""


def lambda_source(name: str) -> Path:
    """The folder of the handler ``name`` (``lambda/<name>``); raises ``FileNotFoundError`` naming it when missing."""
    folder = LAMBDA_ROOT / name
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: the Lambda source folder of {name!r} (lambda/ of the trainium-eks project)")
    return folder


def load_lambda_module(name: str, module: str) -> ModuleType:
    """The module or package ``module`` of the handler ``name``, imported from ``lambda/<name>/<module>.py`` or
    ``lambda/<name>/<module>/__init__.py`` (once per process, as ``trainium_eks_lambda_<name>_<module>``; a
    package's modules import each other relatively, so they load under that name too)."""
    qualified = f"trainium_eks_lambda_{name}_{module}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = module_spec(qualified, lambda_source(name), module)
    if spec is None or spec.loader is None:
        raise ImportError(f"{lambda_source(name) / module}: not a Python module or package")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = loaded
    try:
        spec.loader.exec_module(loaded)
    except BaseException:
        for name in [name for name in sys.modules if name.split(".")[0] == qualified]:
            del sys.modules[name]
        raise
    return loaded


def module_spec(qualified: str, folder: Path, module: str) -> Optional[ModuleSpec]:
    """The import spec of ``folder/<module>.py``, or of the package ``folder/<module>/`` (its ``__init__.py``, with
    the folder as where its modules are found), named ``qualified``."""
    package = folder / module
    if package.is_dir():
        return importlib.util.spec_from_file_location(
            qualified, package / "__init__.py", submodule_search_locations=[str(package)]
        )
    return importlib.util.spec_from_file_location(qualified, folder / f"{module}.py")


def lambda_constants(name: str, module: str, *names: str) -> Dict[str, Any]:
    """The module-level constants ``names`` of ``lambda/<name>/<module>.py`` (``module`` may name a package's module:
    ``preflight_checks/plan``), read from its source without running it
    (literals only: numbers, strings, tuples...), so that synth does not import what the handler imports (boto3 costs
    about 0.15 s). Raises ``KeyError`` naming a constant the module does not assign a literal to."""
    path = lambda_source(name) / f"{module}.py"
    found: Dict[str, Any] = {}
    for statement in ast.parse(path.read_text(), filename=str(path)).body:
        targets = statement.targets if isinstance(statement, ast.Assign) else []
        if isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets = [statement.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id in names:
                found[target.id] = ast.literal_eval(statement.value)
    missing = [constant for constant in names if constant not in found]
    if missing:
        raise KeyError(f"{path}: no literal module-level {', '.join(missing)}")
    return found
