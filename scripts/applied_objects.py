#!/usr/bin/env python3
"""Write every Kubernetes object a synthesized app applies to YAML, one file per object: the objects of each
``Custom::AWSCDK-EKS-KubernetesResource`` of ``CDK_OUT``'s templates, and the job each release Job creates (from its
``HELD_JOB`` variable, as the kubelet expands it). CloudFormation references become the text ``cfn-token``.

    python scripts/applied_objects.py [--pods] CDK_OUT OUT_DIR     (make audit runs checkov on OUT_DIR)

With ``--pods``, a Volcano Job is written as the pods of its tasks instead (a v1 Pod per task, from the task's pod
template, as Volcano's job controller makes them): checkov reads any object of kind ``Job`` as a batch/v1 Job and
would miss the tasks' pod templates.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rehearsal.kubelet_expansion import expand  # noqa: E402
from trainium_eks.core.cfn_text import cfn_text  # noqa: E402
from trainium_eks.manifests.jobs.job_release import HELD_JOB_LABEL  # noqa: E402

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
TOKEN = "cfn-token"


def applied_objects(template: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
    """The objects ``template`` applies, each release Job followed by the job it creates."""
    for resource in template.get("Resources", {}).values():
        if not str(resource.get("Type", "")).startswith(MANIFEST):
            continue
        text = cfn_text(resource["Properties"]["Manifest"], reference=lambda _: TOKEN, attribute=lambda _: TOKEN)
        for obj in json.loads(text):
            yield obj
            if HELD_JOB_LABEL in (obj.get("metadata", {}).get("labels") or {}):
                (container,) = obj["spec"]["template"]["spec"]["containers"]
                (held,) = [variable["value"] for variable in container["env"] if variable["name"] == "HELD_JOB"]
                yield json.loads(expand(held, {}))


def task_pods(job: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The pods of a Volcano Job's tasks, one per task, named ``<job>-<task>``."""
    pods = []
    for task in job["spec"]["tasks"]:
        template = task["template"]
        metadata = {**template.get("metadata", {}), "name": f"{job['metadata']['name']}-{task['name']}"}
        metadata["namespace"] = job["metadata"].get("namespace")
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]})
    return pods


def write(cdk_out: Path, out_dir: Path, *, pods: bool = False) -> List[Path]:
    """Write the objects of every template of ``cdk_out`` to ``out_dir``, one file each
    (``<stack>.<kind>.<namespace>.<name>.yaml``); with ``pods``, Volcano Jobs as their tasks' pods."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for template_path in sorted(cdk_out.glob("*.template.json")):
        stack = template_path.name.split(".")[0]
        for applied in applied_objects(json.loads(template_path.read_text())):
            volcano = applied["apiVersion"].startswith("batch.volcano.sh/")
            for obj in task_pods(applied) if pods and volcano else [applied]:
                metadata = obj.get("metadata", {})
                name = ".".join([stack, obj["kind"], metadata.get("namespace") or "cluster", metadata["name"]])
                path = out_dir / f"{name}.yaml"
                path.write_text(yaml.safe_dump(obj, sort_keys=False))
                written.append(path)
    return written


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--pods"]
    if len(arguments) != 2:
        sys.exit(__doc__)
    written = write(Path(arguments[0]), Path(arguments[1]), pods="--pods" in sys.argv[1:])
    print(f"{len(written)} objects written to {arguments[1]}")
