"""The documentation the tests read: the README (the front door) and the topic pages of ``docs/``."""

from __future__ import annotations

from pathlib import Path
from typing import List

from tests.support.apps import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"


def page(name: str) -> str:
    """The text of the topic page ``docs/<name>``."""
    return (DOCS / name).read_text()


def pages() -> List[Path]:
    """The README and every topic page of ``docs/`` (not the generated API pages), in a stable order."""
    return [README, *sorted(DOCS.glob("*.md"))]


def all_text() -> str:
    """The README and every topic page, one after the other: where a fact may be stated once."""
    return "\n".join(path.read_text() for path in pages())
