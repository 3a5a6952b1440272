"""Helpers of the job tests: the jobs embedded in a template, and a worker's launch script run as a pod would."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Dict

from rehearsal.kubelet_expansion import expand
from tests.conftest import resources_of
from trainium_eks.manifests.jobs.job_release import HELD_JOB_LABEL

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


def release_manifests(template) -> Dict[str, Dict[str, Any]]:
    """The release Jobs of the stack's JobSequence ``Jobs``, by the id their held job was added with."""
    found = {}
    for logical_id, resource in resources_of(template, MANIFEST).items():
        if logical_id.startswith("Jobs") and not logical_id.startswith(("JobsReleaseAccess", "JobsEtcd")):
            job = manifest_of(resource)
            if HELD_JOB_LABEL in (job["metadata"].get("labels") or {}):
                found[logical_id[len("Jobs") :].split(job["kind"], 1)[0]] = job
    return found


def held_job(release: Dict[str, Any]) -> Dict[str, Any]:
    """The job a release Job creates, as its container receives it (the kubelet expands ``$$``)."""
    (container,) = release["spec"]["template"]["spec"]["containers"]
    (variable,) = [e for e in container["env"] if e["name"] == "HELD_JOB"]
    return json.loads(expand(variable["value"], {}))


def job_manifests(template) -> Dict[str, Dict[str, Any]]:
    """The jobs of the stack's JobSequence ``Jobs``, by the id they were added with (``Staging``...): the job itself,
    or for a held job the job its release Job creates."""
    found = {}
    for logical_id, resource in resources_of(template, MANIFEST).items():
        if logical_id.startswith("Jobs") and not logical_id.startswith(("JobsReleaseAccess", "JobsEtcd")):
            job = manifest_of(resource)
            added_as = logical_id[len("Jobs") :].split(job["kind"], 1)[0]
            found[added_as] = held_job(job) if HELD_JOB_LABEL in (job["metadata"].get("labels") or {}) else job
    return found


def applied_objects(template) -> Dict[Any, Dict[str, Any]]:
    """Every Kubernetes object the stack applies, by (kind, name), and every job its release Jobs create."""
    found = {}
    for resource in resources_of(template, MANIFEST).values():
        obj = manifest_of(resource)
        found[obj["kind"], obj["metadata"]["name"]] = obj
        if HELD_JOB_LABEL in (obj["metadata"].get("labels") or {}):
            held = held_job(obj)
            found[held["kind"], held["metadata"]["name"]] = held
    return found


def nodegroups(template) -> Dict[str, Dict[str, Any]]:
    """The properties of the stack's managed node groups, by accelerator label (``system`` for the system nodes)."""
    return {
        props["Labels"].get("trainium-eks/accelerator", "system"): props
        for props in (r["Properties"] for r in resources_of(template, "AWS::EKS::Nodegroup").values())
    }


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
