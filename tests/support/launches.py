"""Run a job's launch script as its container would, with launchers (torchrun, composer, neuron_parallel_compile)
that print the arguments and environment they were started with."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Dict

from tests.support.manifests import pod_spec

FAKE_LAUNCHER = """#!/usr/bin/env python3
import json, os, sys
print(json.dumps({"argv": [os.path.basename(sys.argv[0])] + sys.argv[1:], "env": dict(os.environ)}))
"""


def launch(script: str, tmp_path, **variables: str) -> Dict[str, Any]:
    """Run a worker's launch script (``bash -c``) with ``variables`` and launchers (torchrun, composer,
    neuron_parallel_compile) that print the arguments and environment they were started with."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("torchrun", "neuron_parallel_compile", "composer"):
        (bin_dir / name).write_text(FAKE_LAUNCHER)
        (bin_dir / name).chmod(0o755)
    run_env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", **variables}
    result = subprocess.run(["bash", "-c", script], env=run_env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def volcano_launch(job: Dict[str, Any], tmp_path, node_index: int = 0) -> Dict[str, Any]:
    """What the worker of a Volcano job starts on node ``node_index`` (Volcano's env plugin sets VC_TASK_INDEX)."""
    (worker,) = pod_spec(job)["containers"]
    assert worker["command"][:2] == ["bash", "-c"]
    container_env = {e["name"]: e["value"] for e in worker.get("env", [])}
    return launch(worker["command"][2], tmp_path, **container_env, VC_TASK_INDEX=str(node_index))


def flag(words, name: str) -> str:
    """The value after ``name`` in a command line."""
    return words[words.index(name) + 1]
