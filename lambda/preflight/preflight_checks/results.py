"""The verdict of one check: pass, fail or unknown, and the exception of a check that cannot be made."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any

PASS = "pass"
FAIL = "fail"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict.

    :param check: The check's name, ``kind/subject`` (for example ``on-demand-vcpus/Trn``).
    :param status: ``pass``, ``fail`` or ``unknown`` (the check could not be made).
    :param message: What was found, with the figures.
    :param advice: What to do (for ``fail`` and ``unknown``).
    """

    check: str
    status: str
    message: str
    advice: str = ""


class CannotCheck(Exception):
    """A check could not be made (the verdict is ``unknown``): ``message`` says why, ``advice`` what to do."""

    def __init__(self, message: str, advice: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.advice = advice


def date_text(value: Any) -> str:
    if isinstance(value, _dt.datetime):
        return value.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return str(value) if value else ""
