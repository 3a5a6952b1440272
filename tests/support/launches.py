"""Run a job's launch script as its container would, with launchers (torchrun, composer, neuron_parallel_compile)
that print the arguments and environment they were started with."""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import Any, Dict, Optional

from tests.support.manifests import pod_spec
from trainium_eks.manifests.jobs.distributed_workload import FI_INFO, UVERBS_DIR
from trainium_eks.manifests.jobs.run_directory import RUN_DIRECTORY

FAKE_LAUNCHER = """#!/usr/bin/env python3
import json, os, sys
print(json.dumps({"argv": [os.path.basename(sys.argv[0])] + sys.argv[1:], "env": dict(os.environ)}))
"""


FAKE_FI_INFO = """#!/bin/sh
if [ "$1 $2" = "-p efa" ]; then printf 'provider: efa\\n    fabric: efa\\n    domain: rdmap16s27-rdm\\n'; exit 0; fi
echo "fi_getinfo: -61 (No data available)" >&2
exit 195
"""
"""libfabric's fi_info on a node with EFA: ``-p efa`` lists the efa provider."""


def fake_efa(script: str, tmp_path, devices: Optional[int] = None, fi_info: str = FAKE_FI_INFO) -> str:
    """``script`` with its EFA self-check pointed at a fake ``/dev/infiniband`` holding ``devices`` uverbs files
    (default: as many as the check expects) and a fake ``fi_info`` (default: one that lists the efa provider)."""
    expected = re.search(r"^efa_expected=(\d+)$", script, re.MULTILINE)
    if expected is None:
        return script
    device_dir = tmp_path / "infiniband"
    device_dir.mkdir(exist_ok=True)
    for old in device_dir.glob("uverbs*"):
        old.unlink()
    for index in range(int(expected.group(1)) if devices is None else devices):
        (device_dir / f"uverbs{index}").write_text("")
    fake = tmp_path / "fi_info"
    fake.write_text(fi_info)
    fake.chmod(0o755)
    return script.replace(UVERBS_DIR, str(device_dir)).replace(FI_INFO, str(fake))


def launch(script: str, tmp_path, **variables: str) -> Dict[str, Any]:
    """Run a worker's launch script (``bash -c``) with ``variables``, launchers (torchrun, composer,
    neuron_parallel_compile) that print the arguments and environment they were started with, and the EFA the
    script's self-check expects (:func:`fake_efa`). Variables that name files in the run directory name them in
    ``tmp_path/run`` instead, as the pod's volume mounted there would hold them."""
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    variables = {
        name: str(run_dir) + value[len(RUN_DIRECTORY) :] if value.startswith(RUN_DIRECTORY + "/") else value
        for name, value in variables.items()
    }
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("torchrun", "neuron_parallel_compile", "composer"):
        (bin_dir / name).write_text(FAKE_LAUNCHER)
        (bin_dir / name).chmod(0o755)
    run_env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", **variables}
    result = subprocess.run(
        ["bash", "-c", fake_efa(script, tmp_path)], env=run_env, capture_output=True, text=True, check=True
    )
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
