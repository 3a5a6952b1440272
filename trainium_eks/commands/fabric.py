"""``python -m trainium_eks fabric``: what each fabric acceptance run measured, as a table and a chart.

Before a multi-node job on EFA types, its fabric check runs a collective benchmark across the job's nodes
(:mod:`~trainium_eks.manifests.jobs.fabric_program`); node 0 prints the result as one JSON line. This command reads
that line and shows it without anyone reading the log:

- without ``--log``: ``kubectl -n <namespace> get pods -l trainium-eks/fabric-check-for -o json`` (the label
  :data:`~trainium_eks.core.conventions.FABRIC_CHECK_LABEL`, whose value names the job the check gates), then
  ``kubectl logs`` of each check's pods, newest first, until one holds the result (node 0's pod). kubectl must point
  at the stack's cluster: the command does not look the cluster up, it names the kubectl context it read and the
  stack's ``UpdateKubeconfigCommand`` output that selects the right one (``aws eks update-kubeconfig --name
  <ClusterName> --region <region>``);
- with ``--log FILE``: a saved log (``kubectl logs <node 0's pod> > FILE``), the job named after the file.

For each check it prints the bus bandwidth by message size, its share of the link rate, the floor and the verdict
(with the pairs a bisection measured, its suspects, and from the cluster the node each suspect ran on), and writes a
chart (``--chart PATH``, default ``docs/fabric-<job>.png``): bus bandwidth against message size on a logarithmic
axis, with the floor and the link rate as horizontal lines.

Exit status: 0 when every check found passed; 1 when one failed or none has a result yet; 2 when the command cannot
read the results (no kubectl, a cluster it cannot reach, a file it cannot read).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from trainium_eks.commands.kubectl import KubectlError, cluster_hint, kubectl
from trainium_eks.core.conventions import DEFAULT_NAMESPACE, FABRIC_CHECK_LABEL, FABRIC_RESULT_MARKER
from trainium_eks.manifests.jobs.fabric_program import FabricResult, render, result_from_log, size_text

INDEX_LABELS = (
    "batch.kubernetes.io/job-completion-index",
    "volcano.sh/task-index",
    "training.kubeflow.org/replica-index",
)
"""Labels or annotations that number a job's pods; a pod numbered other than 0 is not node 0 and is skipped."""


class FabricError(KubectlError):
    """The results cannot be read: kubectl, the cluster or a file."""


def _pod_index(pod: Mapping[str, Any]) -> Optional[str]:
    metadata = pod.get("metadata") or {}
    for where in (metadata.get("labels") or {}, metadata.get("annotations") or {}):
        for label in INDEX_LABELS:
            if label in where:
                return str(where[label])
    return None


def checks_by_job(pods: Mapping[str, Any]) -> Dict[str, List[Mapping[str, Any]]]:
    """The fabric check pods of ``kubectl get pods -o json`` by the job they gate, newest first, without pods
    numbered other than 0."""
    jobs: Dict[str, List[Mapping[str, Any]]] = {}
    for pod in pods.get("items") or ():
        labels = (pod.get("metadata") or {}).get("labels") or {}
        job = labels.get(FABRIC_CHECK_LABEL)
        if job and _pod_index(pod) in (None, "0"):
            jobs.setdefault(job, []).append(pod)
    for found in jobs.values():
        found.sort(key=lambda pod: (pod.get("metadata") or {}).get("creationTimestamp") or "", reverse=True)
    return dict(sorted(jobs.items()))


Found = Tuple[str, Optional[FabricResult], str, List[str]]
"""A check found: the job it gates, its result (None: none yet), what was read, and where its suspects ran."""


def suspect_lines(result: FabricResult, node_zero: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> List[str]:
    """Where each suspect of ``result`` ran: its pod (``<check>-node-<i>``, named as node 0's ``node_zero``) and its
    node, as node 0 named it, else from ``pods`` (``kubectl get pods`` items; Volcano deletes the peers still running
    when it ends a check)."""
    prefix = str(node_zero["metadata"]["name"]).rsplit("-", 1)[0]
    nodes = {(p.get("metadata") or {}).get("name"): (p.get("spec") or {}).get("nodeName") for p in pods}
    lines = []
    for index in result.suspects:
        name = f"{prefix}-{index}"
        named = result.node_names[index] if index < len(result.node_names) else ""
        node = named or nodes.get(name) or "(not known: node 0 could not read it, and the pod is gone)"
        lines.append(f"  suspect node {index}: pod/{name} on node {node}")
    return lines


def results_from_cluster(namespace: str, stack: str) -> List[Found]:
    """``(job, result or None, what was read, where its suspects ran)`` of every fabric check in ``namespace`` of
    kubectl's cluster."""
    context = kubectl(["config", "current-context"], stack, "config current-context").strip()
    print(f"kubectl context {context} (the cluster of stack {stack}?), namespace {namespace}")
    listing = kubectl(["-n", namespace, "get", "pods", "-l", FABRIC_CHECK_LABEL, "-o", "json"], stack, "get pods")
    try:
        items = json.loads(listing)
        jobs = checks_by_job(items)
    except (json.JSONDecodeError, AttributeError) as error:
        raise FabricError(f"kubectl get pods did not answer JSON: {error}") from error
    if not jobs:
        raise FabricError(
            f"no fabric check pods (label {FABRIC_CHECK_LABEL}) in namespace {namespace} of context {context}: none "
            f"has run there, they were deleted, or this is not the cluster of stack {stack} ({cluster_hint(stack)})"
        )
    found: List[Found] = []
    for job, pods in jobs.items():
        result, read, suspects = None, "no pod has printed a result yet", []
        for pod in pods:
            name = pod["metadata"]["name"]
            phase = (pod.get("status") or {}).get("phase", "?")
            try:
                text = kubectl(["-n", namespace, "logs", name, "--all-containers=true"], stack, "logs", hint=False)
                result = result_from_log(text, FABRIC_RESULT_MARKER)
                read = f"pod/{name}"
                suspects = suspect_lines(result, pod, items.get("items") or [])
                break
            except KubectlError as error:
                read = f"pod/{name} ({phase}): {error}"
            except ValueError:
                read = f"pod/{name} ({phase}) has printed no result yet"
        found.append((job, result, read, suspects))
    return found


def result_from_file(path: Path) -> Found:
    """``(job, result, what was read, [])`` of a saved log; the job is named after the file."""
    try:
        text = path.read_text(errors="replace")
    except OSError as error:
        raise FabricError(f"{path}: {error.strerror or error}") from error
    try:
        return path.stem, result_from_log(text, FABRIC_RESULT_MARKER), str(path), []
    except ValueError as error:
        return path.stem, None, f"{path}: {error}", []


def chart_path(option: Optional[Path], job: str, several: bool) -> Path:
    """Where the chart of ``job`` goes: ``docs/fabric-<job>.png``, or ``--chart`` (with ``-<job>`` before its suffix
    when there are several checks)."""
    if option is None:
        return Path("docs") / f"fabric-{job}.png"
    return option.with_name(f"{option.stem}-{job}{option.suffix or '.png'}") if several else option


def write_chart(job: str, result: FabricResult, path: Path) -> None:
    """Bus bandwidth (Gbps) against message size (log scale), the floor and the link rate as horizontal lines."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as error:
        raise FabricError("the chart needs matplotlib (pip install -r requirements-dev.txt)") from error
    figure, axes = pyplot.subplots(figsize=(9, 5))
    rows = sorted(result.rows, key=lambda row: row.bytes)
    checked = set(result.checked_rows)
    if rows:
        axes.plot([r.bytes for r in rows], [r.busbw_gbps for r in rows], marker="o", label="bus bandwidth")
        marked = [r for r in rows if r in checked]
        axes.scatter(
            [r.bytes for r in marked],
            [r.busbw_gbps for r in marked],
            s=90,
            facecolors="none",
            edgecolors="black",
            zorder=3,
            label="sizes the floor applies to",
        )
        axes.set_xscale("log", base=2)
        low, high = rows[0].bytes, rows[-1].bytes
        ticks = [2**k for k in range(0, 44, 2) if low / 2 <= 2**k <= high * 2]
        axes.set_xticks(ticks, [size_text(tick) for tick in ticks], rotation=45, fontsize="small")
        axes.minorticks_off()
    else:
        axes.text(
            0.5, 0.5, f"no measurement: {result.reason}", ha="center", va="center", wrap=True, transform=axes.transAxes
        )
    axes.axhline(
        result.link_gbps,
        linestyle=":",
        color="grey",
        label=f"EFA link rate {result.link_gbps:g} Gbps ({result.link_gbps / 8:g} GB/s)",
    )
    axes.axhline(
        result.floor_gbps,
        linestyle="--",
        color="red",
        label=f"floor {result.floor_gbps:g} Gbps ({result.floor_gbps / 8:g} GB/s)",
    )
    top = max([result.link_gbps, result.floor_gbps, *(r.busbw_gbps for r in rows)])
    axes.set_ylim(0, top * 1.12)
    axes.set_xlabel("message size (log scale)")
    axes.set_ylabel("all-reduce bus bandwidth (Gbps)")
    axes.set_title(f"{job}: {result.benchmark} all-reduce across nodes, {result.verdict.upper()}")
    axes.grid(True, which="major", alpha=0.3)
    axes.legend(loc="center left", fontsize="small")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainium_eks fabric", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True, help="the stack whose cluster ran the checks (kubectl's context)")
    parser.add_argument("--log", type=Path, help="read a saved log of node 0's pod instead of the cluster")
    parser.add_argument("--chart", type=Path, help="where to write the chart (PNG); default docs/fabric-<job>.png")
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE, help=f"default {DEFAULT_NAMESPACE}")
    options = parser.parse_args(argv)
    try:
        found = (
            [result_from_file(options.log)] if options.log else results_from_cluster(options.namespace, options.stack)
        )
        status = 0
        for job, result, read, suspects in found:
            if result is None:
                print(f"\n{job}: no result: {read}")
                status = 1
                continue
            print(f"\n{render(result, title=f'{job} (from {read})')}")
            for line in suspects:
                print(line)
            path = chart_path(options.chart, job, len(found) > 1)
            write_chart(job, result, path)
            print(f"  chart: {path}")
            status = status if result.passed else 1
    except KubectlError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return status
