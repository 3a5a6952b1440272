"""Which of a stack's own L1 resources a value refers to: a ``Ref`` to a resource of the stack itself, not to one
of another stack (``Fn::ImportValue``) or one that exists before the deploy (a plain ID)."""

from __future__ import annotations

import json
from typing import Any, List, Sequence, Type

from aws_cdk import CfnResource, Stack


def own_resources(stack: Stack, values: Sequence[Any], types: Sequence[Type[CfnResource]]) -> List[CfnResource]:
    """The resources of ``types`` in ``stack`` whose ``Ref`` is one of ``values`` (tokens such as
    ``subnet.subnet_id``, resolved in ``stack``)."""
    wanted = {json.dumps(stack.resolve(value)) for value in values}
    return [
        child
        for child in stack.node.find_all()
        if isinstance(child, tuple(types))
        and Stack.of(child) is stack
        and json.dumps({"Ref": stack.get_logical_id(child)}) in wanted
    ]
