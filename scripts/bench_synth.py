#!/usr/bin/env python3
"""Benchmark of the main job: `cdk synth` of the default app (and of its seed stack alone) against its peer, the
AWS CDK EKS Blueprints app in plain JavaScript (bench/blueprints), and against the floor of an app with one empty
stack.

All run through the same CDK CLI (node_modules/.bin/cdk) and the same Node.js (the venv's, put first on PATH as the
Makefile does), interleaved (default app, seed stack, peer, floor, default app, ...) after one untimed round, so that
all see the same machine noise; the Python apps share Python, jsii and aws-cdk-lib. For every run it records the wall
time, the CPU time of the whole process tree, the peak resident memory of the largest process of the tree
(``ru_maxrss`` of the children, read by a fresh wrapper per run) and the peak of the whole tree's resident memory
(sampled every 20 ms from /proc). It prints the medians, the ratios to the floor, the default app's ratios to the
peer, each template's size and resource count, and what each app adds to its own floor per resource (the Python floor
for the default app, the JavaScript one for the peer). Prints figures; asserts nothing.

The peer is built here, from its pinned package-lock.json (`npm ci`, registry only), when bench/blueprints has no
node_modules. Its Neuron device plugin add-on fetches two manifests over HTTPS at synth; this script writes its own
stand-ins for them (``NEURON_STAND_INS``, not upstream's YAML), serves them on 127.0.0.1 during the peer's runs, and
the peer's app.js points the add-on's loader there (its comment says how), so no run reaches the network.

    make bench            # or: python scripts/bench_synth.py [RUNS]   (default 7)
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, NamedTuple, Tuple

REPO = Path(__file__).resolve().parents[1]
CDK = REPO / "node_modules" / ".bin" / "cdk"
PEER = REPO / "bench" / "blueprints"
"""The peer: EKS Blueprints 1.19.0 (aws-cdk-lib 2.261.0), one stack like TrainiumEks; its app.js lists what it holds."""
DEFAULT_APP, SEED_STACK, BLUEPRINTS, FLOOR = "default app", "TrainiumEks only", "blueprints peer (JS)", "empty stack"
JS_FLOOR = "empty stack (JS)"
UNOPTIMIZED = "default app without -O"


class Variant(NamedTuple):
    arguments: List[str]
    cwd: Path


VARIANTS: Mapping[str, Variant] = {
    DEFAULT_APP: Variant([], REPO),
    SEED_STACK: Variant(["-c", "stacks=TrainiumEks"], REPO),
    BLUEPRINTS: Variant(["--app", "node app.js"], PEER),
    FLOOR: Variant(["--app", f"{sys.executable} -O {REPO / 'scripts' / 'empty_app.py'}"], REPO),
    JS_FLOOR: Variant(["--app", "node empty_app.js"], PEER),
    UNOPTIMIZED: Variant(["--app", f"{sys.executable} app.py"], REPO),
}
"""What is synthesized, interleaved: the whole default app (three stacks), its seed stack alone, the peer (with its
own cdk.json, from its folder), the floor, run as cdk.json runs the app (``python -O``), and the peer's own floor (one
empty stack on the peer's aws-cdk-lib, in plain JavaScript); and the default app run without ``-O``, which shows what
skipping jsii's Python type checks saves."""
NEURON_STAND_INS: Mapping[str, str] = {
    "k8s-neuron-device-plugin-rbac.yml": """\
# Stand-in written by scripts/bench_synth.py for the peer's synth; not the Neuron SDK's manifest.
apiVersion: v1
kind: ServiceAccount
metadata:
  name: neuron-device-plugin
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: neuron-device-plugin
rules:
  - apiGroups: [""]
    resources: [nodes]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [nodes/status]
    verbs: [patch, update]
  - apiGroups: [""]
    resources: [pods]
    verbs: [get, list, watch, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: neuron-device-plugin
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: neuron-device-plugin
subjects:
  - kind: ServiceAccount
    name: neuron-device-plugin
    namespace: kube-system
""",
    "k8s-neuron-device-plugin.yml": """\
# Stand-in written by scripts/bench_synth.py for the peer's synth; not the Neuron SDK's manifest.
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: neuron-device-plugin
  namespace: kube-system
spec:
  selector:
    matchLabels: {app: neuron-device-plugin}
  updateStrategy: {type: RollingUpdate}
  template:
    metadata:
      labels: {app: neuron-device-plugin}
    spec:
      serviceAccountName: neuron-device-plugin
      priorityClassName: system-node-critical
      tolerations:
        - {key: aws.amazon.com/neuron, operator: Exists, effect: NoSchedule}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - {key: node.kubernetes.io/instance-type, operator: In, values: [trn1.32xlarge, trn1n.32xlarge]}
      containers:
        - name: device-plugin
          image: registry.invalid/bench/neuron-device-plugin:stand-in
          securityContext:
            allowPrivilegeEscalation: false
            capabilities: {drop: [ALL]}
          volumeMounts:
            - {name: device-plugins, mountPath: /var/lib/kubelet/device-plugins}
      volumes:
        - name: device-plugins
          hostPath: {path: /var/lib/kubelet/device-plugins}
""",
}
"""The two manifests the peer's NeuronDevicePluginAddOn fetches at synth, by the file names of its upstream URLs:
small objects of the same kinds, written for this benchmark."""
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


def environment(**extra: str) -> Dict[str, str]:
    """The runs' environment: the venv's Node.js first on PATH (as in the Makefile), nothing that reaches AWS."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {
        **os.environ,
        "PATH": path,
        "AWS_EC2_METADATA_DISABLED": "true",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        **extra,
    }


def build_peer() -> None:
    """Install the peer's pinned packages (`npm ci` from its package-lock.json) unless bench/blueprints has them."""
    if (PEER / "node_modules").is_dir():
        return
    npm = shutil.which("npm", path=environment()["PATH"])
    if npm is None:
        raise SystemExit("npm not found: the peer (bench/blueprints) is installed with `npm ci`")
    print(f"building the peer: npm ci in {PEER.relative_to(REPO)}", flush=True)
    subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=PEER, env=environment(), check=True)


class QuietHandler(SimpleHTTPRequestHandler):
    """Serves the stand-ins' folder; logs nothing."""

    def log_message(self, *_: object) -> None:
        pass


def serve_stand_ins(directory: Path) -> Tuple[ThreadingHTTPServer, str]:
    """Write ``NEURON_STAND_INS`` into ``directory`` and serve it on 127.0.0.1; returns the server and its base URL."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in NEURON_STAND_INS.items():
        (directory / name).write_text(text)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def run(variant: Variant, out_dir: Path, env: Dict[str, str]) -> Dict[str, float]:
    """One `cdk synth` of ``variant`` (its extra CLI arguments, from its folder) into ``out_dir``, measured."""
    command = [str(CDK), "synth", "--quiet", "--output", str(out_dir), *variant.arguments]
    process = subprocess.Popen(
        [sys.executable, "-c", WRAPPER, *command], cwd=variant.cwd, env=env, stdout=subprocess.PIPE, text=True
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
        raise SystemExit(f"synth failed (in {variant.cwd}): {' '.join(command)}")
    return {**json.loads(output), "tree_mib": peak}


def median(rows: List[Dict[str, float]], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def templates(out_dir: Path) -> Iterator[Tuple[str, int, int]]:
    """Name, resource count and size in bytes of every template in a cloud assembly (nested ones included)."""
    for path in sorted(out_dir.glob("*.template.json")):
        yield path.name[: -len(".template.json")], len(json.loads(path.read_text())["Resources"]), path.stat().st_size


METRICS = (
    ("wall", "wall time", "s"),
    ("cpu", "CPU time (tree)", "s"),
    ("largest_mib", "peak RSS, largest proc", "MiB"),
    ("tree_mib", "peak RSS, process tree", "MiB"),
)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    build_peer()
    rows: Dict[str, List[Dict[str, float]]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as scratch:
        server, base_url = serve_stand_ins(Path(scratch) / "neuron-stand-ins")
        env = environment(BENCH_NEURON_BASE_URL=base_url)
        try:
            # One untimed round first: it writes what a first synth writes once (bytecode, Node's compile cache).
            for number, variant in enumerate(VARIANTS.values()):
                run(variant, Path(scratch) / f"warm-up-{number}", env)
            for index in range(runs):
                for number, (name, variant) in enumerate(VARIANTS.items()):
                    rows[name].append(run(variant, Path(scratch) / f"{number}-{index}", env))
        finally:
            server.shutdown()
        sizes = {
            name: list(templates(Path(scratch) / f"{number}-{runs - 1}"))
            for number, name in enumerate(VARIANTS)
            if name in (DEFAULT_APP, BLUEPRINTS)
        }
    measured = [name for name in VARIANTS if name not in (FLOOR, JS_FLOOR, UNOPTIMIZED)]
    print(f"cdk synth, {runs} interleaved runs each, {os.cpu_count()} cores; medians (ratio: / empty stack)")
    print(f"  {'':24}" + "".join(f"{name:>22}{'ratio':>7}" for name in measured) + f"{FLOOR:>16}")
    for key, label, unit in METRICS:
        base = median(rows[FLOOR], key)
        cells = "".join(
            f"{median(rows[name], key):>18.2f} {unit:<3}{median(rows[name], key) / base:>7.2f}" for name in measured
        )
        print(f"  {label:24}{cells}{base:>12.2f} {unit:<3}")
    print(
        f"{DEFAULT_APP} (3 stacks) against the peer and the floor (ratio of medians; below 1: the default app is less)"
    )
    print(f"  {'':24}{'/ ' + BLUEPRINTS:>28}{'/ ' + FLOOR:>16}")
    for key, label, _ in METRICS:
        own = median(rows[DEFAULT_APP], key)
        print(f"  {label:24}{own / median(rows[BLUEPRINTS], key):>28.2f}{own / median(rows[FLOOR], key):>16.2f}")
    for name in (DEFAULT_APP, BLUEPRINTS):
        walls = [row["wall"] for row in rows[name]]
        print(f"  wall time of the {name}: min {min(walls):.2f} s, max {max(walls):.2f} s")
    for name, found in sizes.items():
        for template, resources, size in found:
            print(f"  {name}: template {template}: {resources} resources, {size} bytes")
    optimized, unoptimized = median(rows[DEFAULT_APP], "wall"), median(rows[UNOPTIMIZED], "wall")
    print(
        f"python -O (cdk.json): default app {optimized:.2f} s, without -O {unoptimized:.2f} s: "
        f"{unoptimized - optimized:.2f} s less ({optimized / unoptimized:.2f})"
    )
    print("what each app adds to its own floor (median wall time less its floor's), per resource of its templates")
    for name, floor in ((DEFAULT_APP, FLOOR), (BLUEPRINTS, JS_FLOOR)):
        added = median(rows[name], "wall") - median(rows[floor], "wall")
        resources = sum(count for _, count, _ in sizes[name])
        print(
            f"  {name}: {added:.2f} s above {floor} ({median(rows[floor], 'wall'):.2f} s) for {resources} resources: "
            f"{1000 * added / resources:.1f} ms per resource"
        )


if __name__ == "__main__":
    main()
