"""The printed tables of a scenario: CloudFormation's actions, and the promises."""

from __future__ import annotations

from typing import List, Sequence

from rehearsal.scenario import ScenarioResult


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> List[str]:
    """Rows under headers, columns padded to their widest cell."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = []
    for row in [headers, *rows]:
        lines.append(
            indent + "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    return lines


def render(result: ScenarioResult) -> str:
    """The report of one scenario."""
    scenario = result.scenario
    old = scenario.old.label if scenario.old else "(nothing deployed)"
    new = scenario.new.label if scenario.new else "(cdk destroy)"
    lines = [f"=== {scenario.stack}: {scenario.name} ===", f"  {old}  ->  {new}", ""]
    lines.append("CloudFormation actions, in order (replacement rules: CloudFormation registry schemas via cfn-lint)")
    rows = []
    for index, step in enumerate(result.plan.steps):
        reasons = next((c.reasons for c in result.plan.changes if c.logical_id == step.logical_id), ())
        rows.append(
            [
                str(index + 1),
                step.phase if step.wave is None else f"{step.phase} {step.wave + 1}",
                step.operation,
                step.action.value,
                step.logical_id,
                step.resource_type,
                ", ".join(reasons)[:70],
            ]
        )
    lines.extend(table(["#", "phase (wave)", "request", "action", "logical id", "type", "why"], rows) or [])
    if not rows:
        lines.append("  (no changes)")
    lines.extend(["", "Promises"])
    for name, violations in result.violations.items():
        lines.append(f"  {'FAIL' if violations else 'ok  '}  {name}")
        lines.extend(f"          - {violation}" for violation in violations)
    return "\n".join(lines) + "\n"
