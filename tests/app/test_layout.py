"""The repository's layout rules: tests mirror the package, share helpers only through tests/support, and the
installed package holds the library alone."""

import ast
import importlib

import pytest

from tests.support.apps import REPO

TESTS = REPO / "tests"
PACKAGE = REPO / "trainium_eks"
MIRRORED = ("commands", "constructs", "core", "facts", "manifests", "stacks", "workloads")
"""Test folders that mirror a subpackage of trainium_eks module by module."""


def files_of_tests():
    return sorted(path for path in TESTS.rglob("test_*.py") if "support" not in path.parts)


@pytest.mark.parametrize("path", files_of_tests(), ids=lambda path: str(path.relative_to(TESTS)))
def test_no_test_module_imports_another_test_module(path):
    tree = ast.parse(path.read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    others = sorted(name for name in imported if name.startswith("tests.") and not name.startswith("tests.support"))
    assert others == [], f"import shared helpers from tests.support, not {others}"


@pytest.mark.parametrize(
    "path",
    [path for path in files_of_tests() if path.relative_to(TESTS).parts[0] in MIRRORED],
    ids=lambda path: str(path.relative_to(TESTS)),
)
def test_a_mirrored_test_module_is_named_after_the_module_it_tests(path):
    relative = path.relative_to(TESTS)
    module = PACKAGE.joinpath(*relative.parts[:-1], relative.name.removeprefix("test_"))
    assert module.exists(), f"{relative} mirrors no module: expected {module.relative_to(REPO)}"


def test_every_test_folder_is_a_package_and_the_rehearsal_is_not_in_the_library():
    for folder in {path.parent for path in TESTS.rglob("*.py")}:
        assert (folder / "__init__.py").exists(), folder
    assert not (PACKAGE / "rehearsal").exists()
    assert (REPO / "rehearsal" / "__init__.py").exists()


@pytest.mark.parametrize("package", ["constructs", "manifests", "stacks", "workloads"])
def test_each_subpackage_re_exports_the_names_users_import(package):
    module = importlib.import_module(f"trainium_eks.{package}")
    assert module.__all__ == sorted(module.__all__, key=lambda name: (not name.isupper(), name))
    for name in module.__all__:
        value = getattr(module, name)
        home = getattr(value, "__module__", None)
        assert home is None or home.startswith("trainium_eks."), (name, home)
