"""Helpers of the job tests: the jobs embedded in a template, and a worker's launch script run as a pod would."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Dict

from tests.conftest import resources_of

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"

FAKE_LAUNCHER = """#!/usr/bin/env python3
import json, os, sys
print(json.dumps({"argv": [os.path.basename(sys.argv[0])] + sys.argv[1:], "env": dict(os.environ)}))
"""


def manifest_of(resource: Dict[str, Any]) -> Dict[str, Any]:
    """The one object a manifest resource applies (CloudFormation tokens replaced by ``cfn-token``)."""
    text = resource["Properties"]["Manifest"]
    if isinstance(text, dict):
        text = "".join(p if isinstance(p, str) else "cfn-token" for p in text["Fn::Join"][1])
    (obj,) = json.loads(text)
    return obj


def job_manifests(template) -> Dict[str, Dict[str, Any]]:
    """The jobs of the stack's JobSequence ``Jobs``, by the id they were added with (``Staging``...)."""
    found = {}
    for logical_id, resource in resources_of(template, MANIFEST).items():
        if logical_id.startswith("Jobs"):
            job = manifest_of(resource)
            added_as = logical_id[len("Jobs") :].split(job["kind"], 1)[0]
            found[added_as] = job
    return found


def pod_spec(job: Dict[str, Any]) -> Dict[str, Any]:
    """The pod template spec of a Volcano job (one task) or a batch/v1 job."""
    if job["apiVersion"].startswith("batch.volcano.sh"):
        (task,) = job["spec"]["tasks"]
        return task["template"]["spec"]
    return job["spec"]["template"]["spec"]


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
