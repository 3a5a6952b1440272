"""Which of a stack's own L1 resources a value refers to: a reference to a resource of the stack itself, not to one
of another stack (even one whose logical ID is the same) or one that exists before the deploy (a plain ID)."""

from __future__ import annotations

from typing import Any, List, Sequence, Type

from aws_cdk import CfnResource, Reference, Stack, Token, Tokenization


def own_resources(stack: Stack, values: Sequence[Any], types: Sequence[Type[CfnResource]]) -> List[CfnResource]:
    """The resources of ``types`` in ``stack`` that ``values`` (tokens such as ``subnet.subnet_id``) refer to, in
    the order of ``values``. A value is matched by the resource its token refers to (the ``Reference``'s target),
    not by the ``Ref`` it resolves to: a subnet of another stack resolves, in ``stack``, to a ``Ref`` of its own
    logical ID, which a subnet of ``stack`` built by the same constructs has too."""
    found: List[CfnResource] = []
    for value in values:
        token = Tokenization.reverse(value, fail_concat=False) if Token.is_unresolved(value) else None
        if not isinstance(token, Reference):
            continue
        target = token.target
        if (
            isinstance(target, tuple(types))
            and Stack.of(target) is stack
            and all(target.node.path != f.node.path for f in found)
        ):
            found.append(target)
    return found
