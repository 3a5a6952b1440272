"""JSONata evaluated by the engine the repository pins for asl-validator (the npm ``jsonata`` package), run by the
venv's Node.js: no JSONata package is installed for Python."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Mapping, Sequence, Tuple

from tests.support.apps import REPO

NODE = Path(sys.executable).parent / "node"
JSONATA = REPO / "node_modules" / "jsonata"
_EVALUATE = (
    "const jsonata = require(process.argv[1]); let text = ''; process.stdin.on('data', d => text += d);"
    "process.stdin.on('end', async () => { const out = [];"
    " for (const [e, b] of JSON.parse(text)) { const v = await jsonata(e).evaluate({}, b); out.push(v ?? null); }"
    " process.stdout.write(JSON.stringify(out)); });"
)


def evaluate(cases: Sequence[Tuple[str, Mapping[str, Any]]]) -> List[Any]:
    """The value of each JSONata ``expression`` with its variables (``undefined`` as None), in one Node.js run; a
    state field (``{% ... %}``) is evaluated as its expression."""
    expressions = [[expression.strip().removeprefix("{%").removesuffix("%}"), dict(b)] for expression, b in cases]
    result = subprocess.run(
        [str(NODE), "-e", _EVALUATE, str(JSONATA)],
        input=json.dumps(expressions),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)
