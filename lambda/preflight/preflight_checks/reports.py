"""What a run says: one message for CloudFormation, one table for the command line."""

from __future__ import annotations

import textwrap
from typing import List, Sequence

from .results import FAIL, PASS, UNKNOWN, CheckResult


def failure_message(results: Sequence[CheckResult], *, limit: int = 3500) -> str:
    """One message for CloudFormation's ``Reason``: each failed check and what to do, then how many checks could not
    be made. At most ``limit`` characters: lines that do not fit are left out, and the last line says how many."""
    failed = [r for r in results if r.status == FAIL]
    unknown = [r for r in results if r.status == UNKNOWN]
    head = f"Preflight: {len(failed)} of {len(results)} checks failed."
    lines = [head]
    for result in failed:
        advice = f" What to do: {result.advice}" if result.advice else ""
        lines.append(f"- {result.check}: {result.message}.{advice}")
    if unknown:
        names = ", ".join(r.check for r in unknown)
        checks = "check" if len(unknown) == 1 else "checks"
        lines.append(f"{len(unknown)} {checks} could not be made ({names}): see the preflight function's log.")
    text = "\n".join(lines)
    if len(text) <= limit:
        return text
    kept: List[str] = []
    for index, line in enumerate(lines):
        omitted = len(lines) - index
        tail = f"… {omitted} more lines omitted: see the preflight function's log."
        if len("\n".join(kept + [line, tail])) > limit:
            candidate = "\n".join(kept + [tail])
            if len(candidate) > limit:  # even the first line is too long
                room = max(limit - len(tail) - 2, 0)
                return (lines[0][:room] + "…\n" + tail)[:limit]
            return candidate
        kept.append(line)
    return "\n".join(kept)[:limit]


def format_table(results: Sequence[CheckResult], *, width: int = 110) -> str:
    """The command line's table: check, status and message (with what to do under a failed or unknown check)."""
    if not results:
        return "(no checks)"
    check_width = max(len("CHECK"), *(len(r.check) for r in results))
    status_width = max(len("STATUS"), *(len(r.status) for r in results))
    message_width = max(width - check_width - status_width - 4, 30)
    indent = " " * (check_width + status_width + 4)
    rows = [f"{'CHECK':<{check_width}}  {'STATUS':<{status_width}}  MESSAGE"]
    for result in results:
        lines = textwrap.wrap(result.message, message_width) or [""]
        if result.advice and result.status != PASS:
            lines += textwrap.wrap(f"→ {result.advice}", message_width)
        rows.append(f"{result.check:<{check_width}}  {result.status:<{status_width}}  {lines[0]}")
        rows.extend(indent + line for line in lines[1:])
    return "\n".join(rows)
