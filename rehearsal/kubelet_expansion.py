"""The kubelet's expansion of ``$(VAR)`` references in a container's command, args and environment values.

Modelled on Kubernetes ``third_party/forked/golang/expansion/expand.go`` (``Expand``, ``tryReadVariableName``):
``$$`` gives ``$``; ``$(NAME)`` gives the value of ``NAME`` when it is defined (environment variables defined before
it, for env values), else stays ``$(NAME)``; a ``$`` followed by anything else, or an unclosed ``$(``, stays as it is.
"""

from __future__ import annotations

from typing import Mapping


def expand(text: str, variables: Mapping[str, str]) -> str:
    """``text`` as the kubelet passes it to the container, with ``variables`` defined."""
    out = []
    index = 0
    while True:
        dollar = text.find("$", index)
        if dollar < 0 or dollar + 1 >= len(text):
            out.append(text[index:])
            return "".join(out)
        out.append(text[index:dollar])
        following = text[dollar + 1]
        if following == "$":
            out.append("$")
            index = dollar + 2
        elif following == "(":
            closing = text.find(")", dollar + 2)
            if closing < 0:
                out.append("$(")
                index = dollar + 2
                continue
            name = text[dollar + 2 : closing]
            out.append(variables[name] if name in variables else f"$({name})")
            index = closing + 1
        else:
            out.append("$" + following)
            index = dollar + 2
