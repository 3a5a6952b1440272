"""``python -m trainium_eks cost``: what each stack of the app costs per hour, by component, and what a run cost.

The stacks are built in this process from the project's settings (``cdk.json``, ``cdk.context.json`` and ``-c
key=value``, as ``cdk synth`` reads them; nothing is synthesized or deployed), and each stack's cost lines are printed
(:class:`~trainium_eks.core.cost.CostLine`: on-demand list prices of the stack's region, with their sources in
``trainium_eks/facts/catalog.py`` and ``trainium_eks/facts/pricing.py``). A component without a verified price shows
``n/a`` and every sum that lacks it says so.

- ``--hours N``: what the stack costs over N hours.
- ``--job-status FILE`` (``kubectl get vcjob <name> -o json``, or ``job``): the run's duration from the job's status
  and what the stack cost during it; with several files, how each compares with the first (e.g. the Composer
  baseline and recipe runs). ``--duration 1h20m`` gives a duration by hand instead.
- ``--run-summary FILE``: the summary a Composer run prints last (``kubectl logs <pod of node 0> | tail -n 1``):
  each run's final accuracy next to its time and cost, and, as MosaicML compares recipes, the time and cost each
  later run took to reach the first run's final accuracy (from the accuracy after every epoch), or that it never
  did. The time is the fit time of the whole run, every attempt of a restarted run included (``total_fit_s``); a
  resumed run's summary without the earlier attempts' time is priced as it is and marked as the last attempt only.
- ``--chart PATH``: a bar chart of the stacks' cost per hour by component (PNG, matplotlib).
- ``--held FILE`` (``kubectl get nodes,pods -A -o json``): what bills now without training, instead of the stacks'
  tables: nodes a gang's release holds for it, gangs placed in part, idle training nodes
  (:mod:`~trainium_eks.commands.held_capacity`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence

from trainium_eks.commands.held_capacity import HeldCapacityError, held_report
from trainium_eks.commands.project_app import ProjectError, project_stacks
from trainium_eks.core.cost import CostLine, total

_DURATION = re.compile(r"^(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?$")


class CostError(ProjectError):
    """A setting, file or job status the command cannot use."""


@dataclass(frozen=True)
class StackCost:
    """The cost lines of one stack and its region."""

    name: str
    region: str
    lines: Sequence[CostLine]


@dataclass(frozen=True)
class Run:
    """A finished run: its name, how long it ran, and how long it waited before (from the job's creation: nodes that
    Karpenter launched for it bill from then)."""

    name: str
    duration: timedelta
    waited: timedelta = timedelta(0)


@dataclass(frozen=True)
class RunSummary:
    """What a training run reported (``run-summary.json`` of ``images/composer-resnet``): its name, final test
    accuracy, training time, and ``(epoch, seconds of fit time, accuracy)`` after every evaluation, over the
    ``attempts`` of the run the summary covers (a restarted run carries its earlier attempts in its checkpoints).
    ``last_attempt_from`` is the epoch a resumed run's last attempt started at when the summary covers that attempt
    only (its time is then short of the run's), else None."""

    name: str
    final_accuracy: float
    seconds: float
    accuracy_by_epoch: Sequence[Sequence[float]]
    attempts: int = 1
    last_attempt_from: Optional[int] = None

    def seconds_to(self, accuracy: float) -> Optional[float]:
        """Seconds of fit time when the run first reached ``accuracy``, or None if it never did."""
        return next((float(t) for _, t, value in self.accuracy_by_epoch if value >= accuracy), None)


def summary_of(name: str, data: Any) -> RunSummary:
    """The :class:`RunSummary` of a run summary's JSON; a summary without accuracy is refused.

    The time is ``total_fit_s``, the fit seconds of every attempt the summary covers, else (a summary from before
    restarts were carried) ``fit_s``, the last attempt's, else ``wall_clock_s``. A summary that covers one attempt
    (``attempts`` 1, or none given) but whose attempt started after epoch 0 (``start_epoch``) is of a resumed run
    whose earlier attempts are not in it: its ``last_attempt_from`` says so.
    """
    if not isinstance(data, dict) or not isinstance(data.get("final_accuracy"), (int, float)):
        raise CostError(f"{name}: not a run summary (no final_accuracy): give the last log line of node 0's pod")
    points = data.get("accuracy_by_epoch") or []
    if not all(isinstance(p, list) and len(p) == 3 for p in points):
        raise CostError(f"{name}: accuracy_by_epoch must be [[epoch, seconds, accuracy], ...]")
    seconds = float(data.get("total_fit_s") or data.get("fit_s") or data.get("wall_clock_s") or 0)
    attempts = int(data.get("attempts") or 1)
    start_epoch = int(data.get("start_epoch") or 0)
    label = data.get("run_name") or name
    partial = start_epoch if attempts == 1 and start_epoch > 0 else None
    return RunSummary(str(label), float(data["final_accuracy"]), seconds, points, attempts, partial)


def parse_duration(text: str) -> timedelta:
    """``1h20m``, ``45m``, ``90s``, ``1.5h`` (Go's duration form, as Volcano's ``runningDuration``) -> timedelta."""
    match = _DURATION.match(text.strip()) if isinstance(text, str) else None
    if not text or match is None or not any(match.groupdict().values()):
        raise CostError(f"duration {text!r}: hours, minutes and seconds such as 1h20m, 45m or 90s")
    parts = {key: float(value or 0) for key, value in match.groupdict().items()}
    return timedelta(hours=parts["h"], minutes=parts["m"], seconds=parts["s"])


def _time(text: Any, where: str) -> datetime:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError as error:
        raise CostError(f"{where}: {text!r} is not a time") from error


def run_of(job: Mapping[str, Any]) -> Run:
    """The duration of a finished job from its status: a Volcano Job (from its ``Running`` condition, when its
    ``minAvailable`` pods ran, to its last transition to ``Completed``; Volcano keeps one condition per status, so
    after a restart the run counts from the last ``Running``) or a batch/v1 Job (``startTime`` to
    ``completionTime``). A job that has not finished is refused."""
    kind = job.get("kind")
    name = job.get("metadata", {}).get("name", "?")
    status = job.get("status") or {}
    if kind == "Job" and str(job.get("apiVersion", "")).startswith("batch.volcano.sh/"):
        state = status.get("state") or {}
        if state.get("phase") != "Completed":
            raise CostError(f"vcjob/{name} is {state.get('phase', 'not started')}, not Completed: no run to price")
        running = [
            c for c in status.get("conditions", []) if c.get("status") == "Running" and "lastTransitionTime" in c
        ]
        if not running:
            raise CostError(f"vcjob/{name}: its status has no Running condition with a time")
        start = _time(running[0]["lastTransitionTime"], f"vcjob/{name} Running")
        end = _time(state.get("lastTransitionTime"), f"vcjob/{name} Completed")
        return Run(f"vcjob/{name}", end - start, _waited(job, start))
    if kind == "Job" and job.get("apiVersion") == "batch/v1":
        if "completionTime" not in status:
            raise CostError(f"job/{name} has not completed (no completionTime): no run to price")
        start = _time(status.get("startTime"), f"job/{name} startTime")
        end = _time(status["completionTime"], f"job/{name} completionTime")
        return Run(f"job/{name}", end - start, _waited(job, start))
    raise CostError(
        f"{kind}/{name}: the status of a Volcano Job or a batch/v1 Job (kubectl get vcjob|job <name> -o json); "
        "for another kind, give --duration"
    )


def _waited(job: Mapping[str, Any], start: datetime) -> timedelta:
    """From the job's creation to its start (0 without a creation time): for a job whose nodes Karpenter launched,
    the launch; for a batch Job, whose ``startTime`` is its controller's first sync, about nothing."""
    created = job.get("metadata", {}).get("creationTimestamp")
    if not created:
        return timedelta(0)
    return max(timedelta(0), start - _time(created, "metadata.creationTimestamp"))


def _last_json_line(path: Path) -> Any:
    """The last line of ``path`` that is a JSON object (a log's summary line, or a summary file)."""
    for line in reversed(path.read_text().splitlines()):
        if line.strip().startswith("{"):
            return json.loads(line)
    raise CostError(f"{path}: no JSON line (the run summary is the last line node 0's pod prints)")


def stack_costs(project: Path, overrides: Sequence[str], stacks: Sequence[str] = ()) -> List[StackCost]:
    """Build the app's stacks (``stacks``, default the app's own selection) and return their cost lines."""
    built = project_stacks(project, overrides, stacks)
    return [StackCost(name, stack.region, list(stack.cost_lines)) for name, stack in built.items()]


def _usd(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:,.2f}"


def render(
    costs: StackCost,
    *,
    hours: Optional[float] = None,
    runs: Sequence[Run] = (),
    summaries: Sequence[RunSummary] = (),
) -> str:
    """The table of one stack: every line per hour (and over ``hours``), the idle and training sums, the runs and what
    they reached."""
    header = ["component", "quantity", "USD/hour"] + ([f"USD/{hours:g} h"] if hours is not None else [])
    rows: List[List[str]] = []
    for line in costs.lines:
        rows.append(
            [line.component, line.quantity, _usd(line.usd_per_hour)]
            + ([_usd(line.for_hours(hours))] if hours is not None else [])
        )
    groups = (
        ("idle cluster", [line for line in costs.lines if line.idle]),
        ("training nodes", [line for line in costs.lines if not line.idle]),
        ("whole stack", list(costs.lines)),
    )
    notes = []
    for label, group in groups:
        summed = total(group)
        mark = " *" if summed.missing else ""
        # Each sum is of the figures shown above it (rounded to cents), so the table adds up as printed.
        per_hour = sum(round(line.usd_per_hour, 2) for line in group if line.usd_per_hour is not None)
        over = sum(round(line.for_hours(hours), 2) for line in group if line.usd_per_hour is not None) if hours else 0
        rows.append([label, "", f"{per_hour:,.2f}{mark}"] + ([f"{over:,.2f}{mark}"] if hours is not None else []))
        if summed.missing:
            notes.append(f"* {label}: without {', '.join(summed.missing)} (no verified price in {costs.region})")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [f"{costs.name} ({costs.region}), on-demand list prices"]
    for index, row in enumerate([header, *rows]):
        if index == len(rows) - 2:
            lines.append("  " + "  ".join("-" * w for w in widths))
        cells = [cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  " + "  ".join(cells).rstrip())
    lines.extend(f"  {note}" for note in dict.fromkeys(notes))
    if runs:
        idle = total([line for line in costs.lines if line.idle]).usd_per_hour
        launched = [line for line in costs.lines if not line.idle and line.usd_per_hour is not None]
        lines.append(
            "  runs (what the stack cost while each ran; in brackets the training nodes launched for it, billed "
            "from the job's creation to the end of the pool's idle timeout):"
        )
        first = runs[0]
        for run in runs:
            run_hours = run.duration.total_seconds() / 3600
            nodes = run_nodes_usd(launched, run)
            text = f"    {run.name}: {run.duration} = {run_hours:.2f} h, {idle * run_hours + nodes:,.2f} USD"
            text += f" ({nodes:,.2f})"
            if run is not first:
                saved = idle * (first.duration - run.duration).total_seconds() / 3600
                saved += run_nodes_usd(launched, first) - nodes
                ratio = run.duration / first.duration if first.duration else float("nan")
                text += f"; {ratio:.2f} x the time of {first.name}, {saved:+,.2f} USD saved"
            lines.append(text)
    if summaries:
        lines.extend(_accuracy_lines(total(costs.lines).usd_per_hour, summaries))
    return "\n".join(lines)


def run_nodes_usd(launched: Sequence[CostLine], run: Run) -> float:
    """What the nodes launched for ``run`` cost: each line's rate over the wait for the nodes, the run and the
    line's tail (the idle timeout before Karpenter removes them)."""
    hours = (run.waited + run.duration).total_seconds() / 3600
    return sum((line.usd_per_hour or 0.0) * (hours + line.tail_hours) for line in launched)


def _accuracy_lines(usd_per_hour: float, summaries: Sequence[RunSummary]) -> List[str]:
    """Each run's accuracy next to its training time (of every attempt) and cost; each later run's time and cost to
    the first run's final accuracy."""
    first = summaries[0]
    target = first.final_accuracy
    lines = ["  accuracy (fit time of every attempt from each run's summary; cost at the whole stack's rate):"]
    for summary in summaries:
        run_hours = summary.seconds / 3600
        text = (
            f"    {summary.name}: {100 * summary.final_accuracy:.2f} % after {run_hours:.2f} h, "
            f"{usd_per_hour * run_hours:,.2f} USD"
        )
        if summary.attempts > 1:
            text += f" ({summary.attempts} attempts)"
        if summary.last_attempt_from is not None:
            text += f" (last attempt only, from epoch {summary.last_attempt_from}: the earlier ones are not in it)"
        if summary is not first:
            reached = summary.seconds_to(target)
            if reached is None:
                text += f"; never reached {first.name}'s {100 * target:.2f} %"
            else:
                ratio = reached / first.seconds if first.seconds else float("nan")
                text += (
                    f"; reached {first.name}'s {100 * target:.2f} % after {reached / 3600:.2f} h "
                    f"({ratio:.2f} x its time, {usd_per_hour * reached / 3600:,.2f} USD)"
                )
        lines.append(text)
    return lines


def write_chart(costs: Sequence[StackCost], path: Path) -> None:
    """A horizontal stacked bar per stack: its cost per hour by component, what bills while idle solid and what a
    running job adds hatched (components without a price left out and named in the legend)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as error:
        raise CostError("--chart needs matplotlib (pip install -r requirements-dev.txt)") from error
    components = list(dict.fromkeys(line.component for stack in costs for line in stack.lines))
    figure, axes = pyplot.subplots(figsize=(10, 1.4 + 0.8 * len(costs)))
    names = [f"{stack.name}\n({stack.region})" for stack in costs]
    left = [0.0] * len(costs)
    for component in components:
        widths = []
        for stack in costs:
            priced = [line.usd_per_hour for line in stack.lines if line.component == component]
            widths.append(sum(value for value in priced if value is not None))
        unpriced = any(
            line.usd_per_hour is None for stack in costs for line in stack.lines if line.component == component
        )
        idle = all(line.idle for stack in costs for line in stack.lines if line.component == component)
        label = component + ("" if idle else " (while a job runs)") + (" (some n/a)" if unpriced else "")
        axes.barh(names, widths, left=left, label=label, hatch=None if idle else "//")
        left = [a + b for a, b in zip(left, widths, strict=True)]
    for index, (value, stack) in enumerate(zip(left, costs, strict=True)):
        lower = " or more (n/a left out)" if total(stack.lines).missing else ""
        axes.text(value, index, f" {value:,.2f}{lower}", va="center", fontsize="small")
    axes.set_xlabel("on-demand USD per hour (linear: the training nodes dominate)")
    axes.set_xlim(0, max(left) * 1.35)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    axes.set_title("What each stack costs per hour, by component")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainium_eks cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", action="append", default=[], help="a stack of the app (repeat); default: all")
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE", help="as cdk synth -c")
    parser.add_argument("--hours", type=float, help="also show the cost over this many hours")
    parser.add_argument("--job-status", type=Path, action="append", default=[], help="a finished job's JSON (repeat)")
    parser.add_argument("--duration", action="append", default=[], help="a run's duration, e.g. 1h20m (repeat)")
    parser.add_argument(
        "--run-summary", type=Path, action="append", default=[], help="a run's summary JSON, the first the reference"
    )
    parser.add_argument("--chart", type=Path, help="write a bar chart of the cost per hour (PNG)")
    parser.add_argument("--project", type=Path, default=Path.cwd(), help="the project directory (default: here)")
    parser.add_argument("--held", type=Path, help="kubectl get nodes,pods -A -o json: what bills without training")
    parser.add_argument("--at", help="the time --held reports at (ISO 8601; default: now)")
    options = parser.parse_args(argv)
    try:
        if options.held:
            now = _time(options.at, "--at") if options.at else datetime.now(timezone.utc)
            now = now if now.tzinfo else now.replace(tzinfo=timezone.utc)
            print(held_report(json.loads(options.held.read_text()), now))
            return 0
        if options.hours is not None and not options.hours > 0:
            raise CostError(f"--hours {options.hours}: a positive number of hours")
        runs = [run_of(json.loads(path.read_text())) for path in options.job_status]
        runs += [Run(f"run {text}", parse_duration(text)) for text in options.duration]
        summaries = [summary_of(str(path), _last_json_line(path)) for path in options.run_summary]
        costs = stack_costs(options.project, options.context, options.stack)
        if (runs or summaries) and len(costs) != 1:
            raise CostError("a run belongs to one stack: give --stack with --job-status, --duration or --run-summary")
        print("\n\n".join(render(stack, hours=options.hours, runs=runs, summaries=summaries) for stack in costs))
        if options.chart:
            write_chart(costs, options.chart)
            print(f"\nchart: {options.chart}")
    except (ProjectError, HeldCapacityError, OSError, json.JSONDecodeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
