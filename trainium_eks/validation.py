"""Synth-time validation: collect every problem of a construct, then raise once.

Principle 1 of the design: an inconsistent topology is one clear error that names the setting, the value and
what is allowed. Constructs create a :class:`Problems` collector, record each problem with :meth:`Problems.add`
and call :meth:`Problems.raise_if_any` at the end of their checks.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional

from aws_cdk import Token


class ConfigurationError(ValueError):
    """Raised at synth time when settings are inconsistent. Its message lists every problem found."""

    def __init__(self, where: str, problems: List[str]) -> None:
        self.where = where
        self.problems = list(problems)
        noun = "problem" if len(problems) == 1 else "problems"
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{where}: {len(problems)} configuration {noun}:\n{lines}")


class Problems:
    """Collects configuration problems so that one error reports all of them.

    :param where: What is being checked, usually the construct path; it starts the error message.
    :param setting_names: How to name each setting in messages, when the user set it under another name (the
        default app maps ``node_count`` to its context key ``nodeCount``). Default: the setting's own name.
    """

    def __init__(self, where: str, *, setting_names: Optional[Mapping[str, str]] = None) -> None:
        self.where = where
        self.setting_names: Mapping[str, str] = dict(setting_names or {})
        self._problems: List[str] = []

    def add(self, setting: str, value: Any, allowed: str) -> None:
        """Record that ``setting`` has ``value``, with ``allowed`` telling what would be accepted."""
        self._problems.append(f"{self.setting_names.get(setting, setting)}={value!r}: {allowed}")

    def __bool__(self) -> bool:
        return bool(self._problems)

    def __iter__(self):
        return iter(self._problems)

    def raise_if_any(self) -> None:
        """Raise :class:`ConfigurationError` with every recorded problem, if there is one."""
        if self._problems:
            raise ConfigurationError(self.where, self._problems)


def is_concrete(value: Any) -> bool:
    """True when ``value`` is known at synth time (not a CloudFormation token), so it can be checked."""
    return value is not None and not Token.is_unresolved(value)
