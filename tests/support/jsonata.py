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

STEP_FUNCTIONS_JSONATA = r"""
const jsonata = require(process.argv[1]);
const crypto = require('crypto');
const HASHES = {'MD5': 'md5', 'SHA-1': 'sha1', 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512'};
function expression(text) {
  const e = jsonata(text);
  e.registerFunction('hash', (value, algorithm) => {
    if (!(algorithm in HASHES)) throw new Error('$hash: unsupported algorithm ' + algorithm);
    return crypto.createHash(HASHES[algorithm]).update(value, 'utf8').digest('hex');
  }, '<ss:s>');
  return e;
}
"""
"""Node.js prelude: ``expression(text)``, a JSONata expression with the function Step Functions adds that the
workflows use, ``$hash(value, algorithm)`` (MD5, SHA-1, SHA-256, SHA-384, SHA-512; the digest of the UTF-8 string
in hex), as the Step Functions developer guide describes it ("Transforming data with JSONata in Step Functions",
"JSONata functions provided by Step Functions"). The npm ``jsonata`` package has no ``$hash``; an unknown algorithm
fails the expression, as the service's does."""

_EVALUATE = STEP_FUNCTIONS_JSONATA + (
    "let text = ''; process.stdin.on('data', d => text += d);"
    "process.stdin.on('end', async () => { const out = [];"
    " for (const [e, b] of JSON.parse(text)) { const v = await expression(e).evaluate({}, b); out.push(v ?? null); }"
    " process.stdout.write(JSON.stringify(out)); });"
)


def evaluate(cases: Sequence[Tuple[str, Mapping[str, Any]]]) -> List[Any]:
    """The value of each JSONata ``expression`` with its variables (``undefined`` as None), in one Node.js run; a
    state field (``{% ... %}``) is evaluated as its expression."""
    expressions = [[expression.strip().removeprefix("{%").removesuffix("%}"), dict(b)] for expression, b in cases]
    return run_node(_EVALUATE, expressions)


def run_node(script: str, payload: Any) -> Any:
    """The JSON that ``script`` (given the npm ``jsonata`` package's path as its argument) writes for ``payload``
    read as JSON from its standard input, run by the venv's Node.js."""
    result = subprocess.run(
        [str(NODE), "-e", script, str(JSONATA)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)
