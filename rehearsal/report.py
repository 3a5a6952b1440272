"""The printed tables of a scenario: CloudFormation's actions, the handler's commands, the cluster's objects before
and after, and the promises."""

from __future__ import annotations

import re
from typing import Dict, List, Sequence, Tuple

from rehearsal.cluster_model import ClusterModel
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


def _objects(model: ClusterModel) -> Dict[Tuple[str, ...], Tuple[str, str]]:
    """(cluster, kind, namespace/name) -> (fingerprint, origin) of every object and release."""
    found: Dict[Tuple[str, ...], Tuple[str, str]] = {}
    for cluster_name, obj in model.all_objects():
        where = f"{obj.namespace}/{obj.name}" if obj.namespace else obj.name
        found[(cluster_name, f"{obj.kind}{'.' + obj.group if obj.group else ''}", where)] = (
            repr((sorted(obj.labels.items()), obj.content)),
            obj.origin,
        )
    for cluster_name, cluster in sorted(model.clusters.items()):
        for (namespace, name), release in sorted(cluster.releases.items()):
            found[(cluster_name, "helm release", f"{namespace}/{name}")] = (
                f"{release.chart} {release.version} r{release.revision}",
                f"{release.chart} {release.version} revision {release.revision}",
            )
    return found


def cluster_lines(before: ClusterModel, after: ClusterModel) -> List[str]:
    """The objects of both models: ``=`` unchanged, ``~`` changed, ``+`` new, ``-`` gone."""
    old, new = _objects(before), _objects(after)
    rows = []
    for key in sorted(set(old) | set(new)):
        mark = "+" if key not in old else "-" if key not in new else "=" if old[key][0] == new[key][0] else "~"
        rows.append([mark, key[1], key[2], (new.get(key) or old[key])[1]])
    clusters = sorted(set(before.clusters) | set(after.clusters))
    lines = [f"  clusters before: {', '.join(sorted(before.clusters)) or '(none)'}"]
    lines.append(f"  clusters after:  {', '.join(sorted(after.clusters)) or '(none)'}")
    if rows and clusters:
        lines.extend(table(["", "kind", "object", "origin"], rows))
    return lines


_TEMPORARY = re.compile(r"<scratch>/tmp/[^/\s]+")


def _scrubbed(text: str, workspace_root: str) -> str:
    """``text`` with the handler workspace's path as ``<scratch>``, and each temporary folder the handler made in it
    (its random name) as ``<scratch>/tmp/<temporary>``, so that a report names no folder that is gone."""
    if not workspace_root:
        return text
    return _TEMPORARY.sub("<scratch>/tmp/<temporary>", text.replace(workspace_root, "<scratch>"))


def render(result: ScenarioResult) -> str:
    """The report of one scenario."""
    scenario = result.scenario
    old = scenario.old.label if scenario.old else "(nothing deployed)"
    new = scenario.new.label if scenario.new else "(cdk destroy)"
    lines = [f"=== {scenario.stack}: {scenario.name} ===", f"  {old}  ->  {new}", ""]
    lines.append("CloudFormation actions, in order (replacement rules: CloudFormation registry schemas via cfn-lint)")
    rows = []
    for index, step in enumerate(result.plan.steps):
        ran = index < len(result.runs)
        reasons = next((c.reasons for c in result.plan.changes if c.logical_id == step.logical_id), ())
        status = "" if ran else "not reached"
        if result.stopped_at == index:
            status = "FAILED"
        rows.append(
            [
                str(index + 1),
                step.phase if step.wave is None else f"{step.phase} {step.wave + 1}",
                step.operation,
                step.action.value,
                step.logical_id,
                step.resource_type,
                status or ", ".join(reasons)[:70],
            ]
        )
    lines.extend(table(["#", "phase (wave)", "request", "action", "logical id", "type", "why / status"], rows) or [])
    if not rows:
        lines.append("  (no changes)")
    lines.extend(["", "Handler runs (the aws-eks-v2 kubectl handler from the installed aws-cdk-lib)"])
    workspace_root = ""
    for index, run in enumerate(result.runs):
        if run.invocation is None:
            if run.note:
                lines.append(f"  [{index + 1}] {run.note}")
            continue
        event = run.invocation.event
        verdict = "SUCCESS" if run.invocation.succeeded else "FAILED"
        lines.append(f"  [{index + 1}] {event['RequestType']} {event['LogicalResourceId']} -> {verdict}")
        for command in run.invocation.commands:
            if not workspace_root and "/outdir/" in " ".join(command["argv"]):
                path = next(arg for arg in command["argv"] if "/outdir/" in arg)
                workspace_root = path.split("/outdir/")[0]
            argv = _scrubbed(" ".join(command["argv"]), workspace_root)
            lines.append(f"      $ {command['tool']} {argv}   (exit {command['exit_code']})")
            for op, target, *_ in command["effects"]:
                lines.append(f"          {op} {target}")
            for line in command["stderr"].splitlines()[:3]:
                lines.append(f"          ! {_scrubbed(line, workspace_root)}")
        if not run.invocation.succeeded:
            lines.append(f"      handler raised: {run.invocation.error.strip()[:300]}")
    if result.stopped_at is not None:
        lines.append(f"  CloudFormation stops at step {result.stopped_at + 1} and rolls back (not rehearsed)")
    lines.extend(["", "Cluster objects before -> after"])
    lines.extend(cluster_lines(result.cluster_before, result.cluster_after))
    lines.extend(["", "Promises"])
    for name, violations in result.violations.items():
        lines.append(f"  {'FAIL' if violations else 'ok  '}  {name}")
        lines.extend(f"          - {violation}" for violation in violations)
    return "\n".join(lines) + "\n"
