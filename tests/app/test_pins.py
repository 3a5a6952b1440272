"""Every install resolves from the public registries as written: exact pins of public versions, nothing local."""

import json
import re

import pytest

from tests.support.apps import REPO
from tests.support.requirements import requirement_lines

REQUIREMENT_FILES = sorted(
    [*REPO.glob("requirements*.txt"), *REPO.glob("constraints*.txt"), *REPO.glob("images/*/requirements*.txt")]
)
PIN = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?$"
)
"""``name==version`` with a public version (PEP 440 without a local label such as ``+cpu``, which only a local wheel
folder or another index could serve)."""


@pytest.mark.parametrize("path", REQUIREMENT_FILES, ids=lambda path: str(path.relative_to(REPO)))
def test_every_requirement_is_an_exact_public_pin_or_an_include_of_the_project(path):
    for number, line in requirement_lines(path):
        if line.startswith("-r "):
            assert (path.parent / line[3:]).exists(), f"{path.name}:{number}: {line}"
            continue
        assert PIN.fullmatch(line), f"{path.name}:{number}: {line!r} is not name==<public version>"


def test_npm_pins_are_exact_versions_from_the_registry():
    package = json.loads((REPO / "package.json").read_text())
    for name, version in {**package.get("dependencies", {}), **package.get("devDependencies", {})}.items():
        assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", version), (name, version)
    lock = json.loads((REPO / "package-lock.json").read_text())
    for where, entry in lock.get("packages", {}).items():
        if where:  # the registry's tarball (npm leaves "resolved" out for it in some entries), checked by its digest
            resolved = entry.get("resolved", "https://registry.npmjs.org/")
            assert resolved.startswith("https://registry.npmjs.org/") and entry.get("integrity"), (where, resolved)
