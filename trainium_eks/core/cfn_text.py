"""A CloudFormation string expression (``Fn::Join`` of strings, ``Ref``, ``Fn::GetAtt``, ``Fn::Sub``) read as one
text."""

from __future__ import annotations

import json
from typing import Any, Callable, Optional, Sequence


def cfn_text(
    value: Any,
    *,
    reference: Callable[[str], str] = lambda logical_id: f"<{logical_id}>",
    attribute: Callable[[Sequence[str]], str] = lambda parts: f"<{'.'.join(parts)}>",
    other: Optional[Callable[[Any], str]] = None,
) -> str:
    """``value`` (a string or a resolved CloudFormation expression) as text: ``Fn::Join`` joined, each ``Ref`` as
    ``reference(logical id)``, each ``Fn::GetAtt`` as ``attribute([logical id, attribute])`` and an ``Fn::Sub`` of
    one string as that string (its ``${...}`` placeholders as written).

    The defaults give the form cdk-nag names an IAM resource by in a finding (``<Id>``, ``<Id.Attribute>``). Any
    other intrinsic is ``other(intrinsic)`` (:func:`compact_json` is how cdk-nag writes one) or, without ``other``,
    raises ValueError: the caller's expression is not a plain string expression."""
    nested = dict(reference=reference, attribute=attribute, other=other)
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Fn::Join":
            separator, parts = argument
            return separator.join(cfn_text(part, **nested) for part in parts)
        if function == "Ref":
            return reference(argument)
        if function == "Fn::GetAtt":
            return attribute(argument.split(".", 1) if isinstance(argument, str) else list(argument))
        if function == "Fn::Sub" and isinstance(argument, str):
            return argument
    if other is not None:
        return other(value)
    raise ValueError(f"not a string expression of Fn::Join, Ref, Fn::GetAtt and Fn::Sub: {value!r}")


def compact_json(value: Any) -> str:
    """``value`` as ``JSON.stringify`` writes it (no spaces)."""
    return json.dumps(value, separators=(",", ":"))
