"""The API reference (mkdocs.yml, docs/api, ``make docs``): a page for each subpackage that re-exports names, in the
nav, and on it every name of the subpackage's ``__all__``, so that a new public name cannot be left out of it."""

import importlib
import pkgutil
import re

import pytest
import yaml

import trainium_eks
from tests.support.apps import REPO

PAGES = REPO / "docs" / "api"
DIRECTIVE = re.compile(r"^::: (\S+)", re.MULTILINE)
"""A mkdocstrings directive: the object it documents."""


def re_exporting():
    """The subpackages of trainium_eks with an ``__all__``: those whose names users import."""
    names = [info.name for info in pkgutil.iter_modules(trainium_eks.__path__) if info.ispkg]
    return sorted(name for name in names if hasattr(importlib.import_module(f"trainium_eks.{name}"), "__all__"))


def nav_pages(entries):
    """Every page of mkdocs.yml's nav."""
    for entry in entries:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            yield from nav_pages(value) if isinstance(value, list) else [value]


def test_the_subpackages_that_re_export_names_are_the_known_ones():
    assert re_exporting() == ["constructs", "manifests", "stacks", "workloads"]


def test_each_page_of_the_reference_is_in_the_nav_and_documents_a_subpackage():
    nav = set(nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]))
    pages = {f"api/{path.name}" for path in PAGES.glob("*.md")}
    assert pages == {f"api/{name}.md" for name in re_exporting()}
    assert pages <= nav


@pytest.mark.parametrize("package", re_exporting())
def test_a_page_documents_every_name_of_its_subpackage_and_nothing_else(package):
    module = importlib.import_module(f"trainium_eks.{package}")
    documented = DIRECTIVE.findall((PAGES / f"{package}.md").read_text())
    expected = [module.__name__, *(f"{module.__name__}.{name}" for name in module.__all__)]
    assert sorted(documented) == sorted(expected), (
        f"docs/api/{package}.md: missing {sorted(set(expected) - set(documented))}, "
        f"not exported {sorted(set(documented) - set(expected))}"
    )
