"""The project's requirement files as pip reads them."""

from pathlib import Path
from typing import Iterator, Tuple


def requirement_lines(path: Path) -> Iterator[Tuple[int, str]]:
    """(line number, requirement) of every line of ``path`` that is not empty or a comment."""
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if line:
            yield number, line
