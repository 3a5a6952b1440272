"""A kubectl on PATH for the commands' tests: a Python script that records each call's arguments and then runs the
test's own answering code."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path


def fake_kubectl(tmp_path: Path, answers: str) -> Path:
    """The folder of a ``kubectl`` that appends its arguments to ``<tmp_path>/kubectl-data/calls`` and runs
    ``answers`` (Python; ``args`` are its arguments, ``data`` the data folder, ``sys`` and ``pathlib`` imported), to put
    first on PATH."""
    data = tmp_path / "kubectl-data"
    data.mkdir(exist_ok=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(
        f"#!{sys.executable}\n"
        "import sys, pathlib\n"
        f"data = pathlib.Path({str(data)!r})\n"
        "args = sys.argv[1:]\n"
        "with open(data / 'calls', 'a') as calls:\n"
        "    calls.write(' '.join(args) + '\\n')\n" + textwrap.dedent(answers)
    )
    kubectl.chmod(0o755)
    return bin_dir
