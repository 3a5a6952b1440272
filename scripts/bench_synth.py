#!/usr/bin/env python3
"""Benchmark of the main job: `cdk synth` of the default app (and of its seed stack alone) against the floor of
an app with one empty stack.

All run through the same CDK CLI, Python, jsii and aws-cdk-lib, interleaved (default app, seed stack, floor, default
app, ...) so that all see the same machine noise. For every run it records the wall time, the CPU time of the whole
process tree, the peak resident memory of the largest process of the tree (``ru_maxrss`` of the children, read by a
fresh wrapper per run) and the peak of the whole tree's resident memory (sampled every 20 ms from /proc). It prints
the medians, the ratios to the floor, and each template's size and resource count. Prints figures; asserts nothing.

    make bench            # or: python scripts/bench_synth.py [RUNS]   (default 7)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
CDK = REPO / "node_modules" / ".bin" / "cdk"
VARIANTS = {
    "default app": [],
    "TrainiumEks only": ["-c", "stacks=TrainiumEks"],
    "empty stack": ["--app", f"{sys.executable} {REPO / 'scripts' / 'empty_app.py'}"],
}
"""What is synthesized, interleaved: the whole default app (three stacks), its seed stack alone, and the floor."""
WRAPPER = (
    "import json, resource, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(json.dumps({'wall': time.perf_counter() - start, 'cpu': usage.ru_utime + usage.ru_stime,"
    " 'largest_mib': usage.ru_maxrss / 1024}))\n"
)


def tree_rss_mib(root: int) -> float:
    """Resident memory of ``root`` and all its descendants, MiB (0 when it has ended)."""
    children: Dict[int, List[int]] = {}
    rss: Dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            rss[int(entry.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
            children.setdefault(int(fields[1]), []).append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        total += rss.get(pid, 0)
        pending.extend(children.get(pid, ()))
    return total / 2**20


def run(app: List[str], out_dir: Path) -> Dict[str, float]:
    """One `cdk synth` with the extra CLI arguments ``app`` (none: the default app of cdk.json), measured."""
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "CDK_DISABLE_CLI_TELEMETRY": "true"}
    command = [str(CDK), "synth", "--quiet", "--output", str(out_dir), *app]
    process = subprocess.Popen(
        [sys.executable, "-c", WRAPPER, *command], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
    )
    peak = 0.0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss_mib(process.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    output, _ = process.communicate()
    done.set()
    sampler.join()
    if process.returncode:
        raise SystemExit(f"synth failed: {' '.join(command)}")
    return {**json.loads(output), "tree_mib": peak}


def median(rows: List[Dict[str, float]], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    rows: Dict[str, List[Dict[str, float]]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(runs):
            for number, (name, arguments) in enumerate(VARIANTS.items()):
                rows[name].append(run(arguments, Path(scratch) / f"{number}-{index}"))
        templates = {
            path.name.split(".")[0]: (path.stat().st_size, len(json.loads(path.read_text())["Resources"]))
            for path in sorted((Path(scratch) / f"0-{runs - 1}").glob("*.template.json"))
        }
    floor = rows["empty stack"]
    print(f"cdk synth, {runs} interleaved runs each, {os.cpu_count()} cores; medians (ratio: / empty stack)")
    print(
        f"  {'':24}"
        + "".join(f"{name:>18}{'ratio':>7}" for name in VARIANTS if name != "empty stack")
        + f"{'empty stack':>16}"
    )
    for key, label, unit in (
        ("wall", "wall time", "s"),
        ("cpu", "CPU time (tree)", "s"),
        ("largest_mib", "peak RSS, largest proc", "MiB"),
        ("tree_mib", "peak RSS, process tree", "MiB"),
    ):
        base = median(floor, key)
        cells = "".join(
            f"{median(rows[name], key):>14.2f} {unit:<3}{median(rows[name], key) / base:>7.2f}"
            for name in VARIANTS
            if name != "empty stack"
        )
        print(f"  {label:24}{cells}{base:>12.2f} {unit:<3}")
    walls = [r["wall"] for r in rows["default app"]]
    print(f"  wall time of the default app: min {min(walls):.2f} s, max {max(walls):.2f} s")
    for name, (size, resources) in templates.items():
        print(f"  template {name}: {resources} resources, {size} bytes")


if __name__ == "__main__":
    main()
