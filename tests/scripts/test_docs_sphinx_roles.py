"""scripts/docs_sphinx_roles.py: the API reference's Sphinx roles become checked cross-references, and a role or a
``:param:`` that names nothing is a warning (which fails ``make docs``)."""

import importlib.util
import logging
import textwrap

import griffe
import pytest

from tests.support.apps import REPO

SPEC = importlib.util.spec_from_file_location("docs_sphinx_roles", REPO / "scripts" / "docs_sphinx_roles.py")
docs_sphinx_roles = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(docs_sphinx_roles)

MODULE = '''
"""A module."""

import json

from trainium_eks.base import Base

LIMIT = 3
"""A constant."""


class Chart(Base):
    """Uses :data:`LIMIT`, :attr:`ready`, :attr:`inherited`, :meth:`render`, :class:`~trainium_eks.base.Base`,
    :func:`json.dumps`, :mod:`trainium_eks.base`, :class:`~trainium_eks.base.
    Base` and :class:`Base`.

    :param name: A name.
    :param wait_for: Taken by ``**props``.
    """

    def __init__(self, *, name: str, **props) -> None:
        self.name = name

    def render(self) -> None:
        """Sets :attr:`ready`."""
        self.ready = True


def helper(value: int) -> int:
    """Documents one parameter too many.

    :param value: A value.
    :param valeu: A typo.
    """
    return value
'''

BASE = '''
"""The base."""


class Base:
    """A base class."""

    def __init__(self) -> None:
        self.inherited = 1
'''


@pytest.fixture
def load(tmp_path, caplog):
    """Loads a package ``trainium_eks`` of ``files`` (name: source) with the extension, as ``make docs`` does, and
    returns it with the warnings logged while its docstrings were rewritten and parsed."""
    extension = docs_sphinx_roles.SphinxRoles()

    def loaded(**files):
        package = tmp_path / "trainium_eks"
        package.mkdir()
        (package / "__init__.py").write_text('"""The package."""\n')
        for name, source in files.items():
            (package / f"{name}.py").write_text(textwrap.dedent(source))
        caplog.set_level(logging.WARNING, logger="griffe")
        found = griffe.load(
            "trainium_eks",
            search_paths=[tmp_path],
            try_relative_path=False,
            extensions=griffe.Extensions(extension),
            docstring_parser="sphinx",
        )
        for obj in (found["chart.Chart"], found["chart.helper"]):
            obj.docstring.parse()  # what mkdocstrings renders, and griffe's warnings about parameters
        return found, [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]

    yield loaded
    for name in ("griffe", "mkdocs.plugins.griffe"):
        logging.getLogger(name).removeFilter(extension.keyword_arguments)


def test_roles_become_optional_references_to_the_objects_they_name(load):
    package, warnings = load(chart=MODULE, base=BASE)
    text = package["chart.Chart"].docstring.value
    for path, title in [
        ("trainium_eks.chart.LIMIT", "LIMIT"),
        ("trainium_eks.chart.Chart.ready", "ready"),  # assigned by a method, which griffe does not collect
        ("trainium_eks.base.Base.inherited", "inherited"),
        ("trainium_eks.chart.Chart.render", "render"),
        ("trainium_eks.base.Base", "Base"),  # by its path, wrapped onto the next line, and imported
        ("trainium_eks.base", "trainium_eks.base"),
    ]:
        assert f'<autoref identifier="{path}" optional>`{title}`</autoref>' in text
    assert "`json.dumps`" in text and ":func:" not in text
    assert text.count('<autoref identifier="trainium_eks.base.Base" optional>`Base`</autoref>') == 3
    assert "Sets <autoref identifier=" in package["chart.Chart.render"].docstring.value
    assert [warning.rpartition("/")[2] for warning in warnings] == [
        "chart.py:30: Parameter 'valeu' does not appear in the function signature",
        "chart.py:30: No matching parameter for 'valeu'",
    ]


def test_a_role_that_names_nothing_is_a_warning(load):
    broken = MODULE.replace(":data:`LIMIT`", ":data:`LIMT`")
    broken = broken.replace(":mod:`trainium_eks.base`", ":mod:`trainium_eks.gone`")
    package, warnings = load(chart=broken, base=BASE)
    # The path of the docstring's file (relative to the working directory when inside it), its first line, the role.
    assert [warning.rpartition("/")[2] for warning in warnings if "names nothing" in warning] == [
        "chart.py:13: :data:`LIMT` in the docstring of trainium_eks.chart.Chart names nothing",
        "chart.py:13: :mod:`trainium_eks.gone` in the docstring of trainium_eks.chart.Chart names nothing",
    ]
    assert "`LIMT`" in package["chart.Chart"].docstring.value


def test_a_parameter_the_signature_takes_through_kwargs_is_no_warning_but_a_typo_is(load):
    _, warnings = load(chart=MODULE, base=BASE)
    assert not [warning for warning in warnings if "wait_for" in warning]
    assert [warning for warning in warnings if "valeu" in warning]


def test_every_role_of_the_library_names_something(caplog):
    caplog.set_level(logging.WARNING, logger="griffe")
    extension = docs_sphinx_roles.SphinxRoles()
    try:
        griffe.load("trainium_eks", search_paths=[REPO], extensions=griffe.Extensions(extension))
    finally:
        for name in ("griffe", "mkdocs.plugins.griffe"):
            logging.getLogger(name).removeFilter(extension.keyword_arguments)
    assert [record.getMessage() for record in caplog.records if "names nothing" in record.getMessage()] == []
