#!/usr/bin/env python3
"""Benchmark of the main job: wall time of `cdk synth` of the default app, resource count, template size.

Runs the CDK CLI RUNS times (default 5) into a fresh output folder each time and prints the median, min and max
wall time, then the resource count and template bytes of the synthesized stack. Prints figures; asserts nothing.

    make bench            # or: python scripts/bench_synth.py [RUNS]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CDK = REPO / "node_modules" / ".bin" / "cdk"
STACK = "TrainiumEks"


def synth_once(out_dir: Path) -> float:
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "CDK_DISABLE_CLI_TELEMETRY": "true"}
    start = time.perf_counter()
    subprocess.run([str(CDK), "synth", "--quiet", "--output", str(out_dir)], cwd=REPO, env=env, check=True)
    return time.perf_counter() - start


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    times = []
    with tempfile.TemporaryDirectory() as scratch:
        for run in range(runs):
            out_dir = Path(scratch) / f"run{run}"
            times.append(synth_once(out_dir))
        template_path = out_dir / f"{STACK}.template.json"
        template_bytes = template_path.stat().st_size
        resources = len(json.loads(template_path.read_text())["Resources"])
    print(f"cdk synth of the default app, {runs} runs, {os.cpu_count()} cores")
    print(f"  median wall time: {statistics.median(times):.2f} s (min {min(times):.2f} s, max {max(times):.2f} s)")
    print(f"  resources:        {resources}")
    print(f"  template bytes:   {template_bytes}")


if __name__ == "__main__":
    main()
