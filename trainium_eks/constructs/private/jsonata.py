"""JSONata in Amazon States Language: field values (``{% ... %}``) and string literals that survive CloudFormation."""

from __future__ import annotations

import re
from typing import Any

_EXPRESSION = "{{% {} %}}"

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", "'": "\\u0027"}

SUBSTITUTION = re.compile(r"\$(?=\{[A-Za-z0-9_:.]+\})")
"""A ``$`` that starts ``${NAME}``: CloudFormation reads such a placeholder in a state machine's ``DefinitionString``
as a ``DefinitionSubstitutions`` variable (cfn-lint E1029), so the definition must not contain one literally."""

_MULTI_LINE = re.compile("[\n\r\u2028\u2029]")


def jsonata(expression: str) -> str:
    """``expression`` as a JSONata field value of Amazon States Language (``{% ... %}``)."""
    return _EXPRESSION.format(expression)


def quoted(text: str) -> str:
    """``text`` as a JSONata string literal on one line: single quotes (the expression sits in a JSON string),
    JSON's escapes, ``\\u0027`` for a quote (JSONata has no ``\\'``) and ``\\u0024`` for the ``$`` of a
    ``${NAME}`` placeholder (:data:`SUBSTITUTION`); CDK tokens (``${Token[...]}``) stay as they are."""
    dollars = {match.start() for match in SUBSTITUTION.finditer(text)}
    escaped = []
    for index, char in enumerate(text):
        if index in dollars:
            escaped.append("\\u0024")
        elif char in _ESCAPES:
            escaped.append(_ESCAPES[char])
        elif ord(char) < 0x20:
            escaped.append(f"\\u{ord(char):04x}")
        else:
            escaped.append(char)
    return "'" + "".join(escaped) + "'"


def literals(value: Any) -> Any:
    """``value`` with every string a state machine definition cannot hold as a plain JSONata-template literal turned
    into a JSONata string literal of the same value: the empty string, multi-line strings and strings starting with
    ``{%`` (asl-validator 4.0.0 reads a literal as a non-empty single line not starting with ``{% ``), and strings
    with a ``${NAME}`` placeholder (:data:`SUBSTITUTION`)."""
    if isinstance(value, dict):
        return {key: literals(item) for key, item in value.items()}
    if isinstance(value, list):
        return [literals(item) for item in value]
    if isinstance(value, str) and (
        value == "" or value.startswith("{%") or _MULTI_LINE.search(value) or SUBSTITUTION.search(value)
    ):
        return jsonata(quoted(value))
    return value
