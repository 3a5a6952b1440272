"""The Kubernetes objects a template applies: manifest resources, the release Jobs and the jobs they hold."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional, Sequence

from rehearsal.kubelet_expansion import expand
from tests.support.apps import resources_of
from trainium_eks.core.cfn_text import cfn_text
from trainium_eks.manifests.jobs.job_release import HELD_JOB_LABEL

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
NOT_JOBS = (
    "JobsReleaseAccess",
    "JobsEtcd",
    "JobsFabricProgram",
    "JobsReleaseProgram",
    "JobsStagingProgram",
    "JobsReleaseGuard",
    "JobsPeersGuard",
    "JobsFabricSuspect",
)
"""What a JobSequence ``Jobs`` applies besides jobs and releases: the release access, etcd, the fabric, release and
staging programs, the held jobs' admission policy, the releases' NetworkPolicy admission policy, the fabric suspect
taint's permission and policy."""


def manifest_of(resource: Dict[str, Any]) -> Dict[str, Any]:
    """The one object a manifest resource applies (CloudFormation tokens replaced by ``cfn-token``, or by a value of
    the shape EC2 gives: ``sg-0cfntoken`` for a security group's ``GroupId``, ``subnet-0cfntoken`` for a subnet's
    ``Ref``)."""
    (obj,) = applied_list(
        resource,
        token="cfn-token",
        reference=lambda logical_id: "subnet-0cfntoken" if "Subnet" in logical_id else "cfn-token",
        attribute=lambda parts: "sg-0cfntoken" if parts[-1] == "GroupId" else "cfn-token",
    )
    return obj


def applied_list(
    resource: Dict[str, Any],
    *,
    token: str = "TOKEN",
    reference: Optional[Callable[[str], str]] = None,
    attribute: Optional[Callable[[Sequence[str]], str]] = None,
) -> List[Dict[str, Any]]:
    """The objects a manifest resource applies, each CloudFormation reference replaced by ``token`` (or by what
    ``reference`` and ``attribute`` make of it)."""
    return json.loads(
        cfn_text(
            resource["Properties"]["Manifest"],
            reference=reference or (lambda _: token),
            attribute=attribute or (lambda _: token),
        )
    )


def release_manifests(template) -> Dict[str, Dict[str, Any]]:
    """The release Jobs of the stack's JobSequence ``Jobs``, by the id their held job was added with."""
    found = {}
    for logical_id, resource in resources_of(template, MANIFEST).items():
        if logical_id.startswith("Jobs") and not logical_id.startswith(NOT_JOBS):
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
        if logical_id.startswith("Jobs") and not logical_id.startswith(NOT_JOBS):
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


def node_pools(template) -> Dict[str, Dict[str, Any]]:
    """The Karpenter NodePools and their EC2NodeClasses the stack applies, by accelerator label:
    ``{"neuron": {"NodePool": ..., "EC2NodeClass": ...}}``."""
    objects = [manifest_of(r) for r in resources_of(template, MANIFEST).values()]
    classes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "EC2NodeClass"}
    return {
        pool["spec"]["template"]["metadata"]["labels"]["trainium-eks/accelerator"]: {
            "NodePool": pool,
            "EC2NodeClass": classes[pool["spec"]["template"]["spec"]["nodeClassRef"]["name"]],
        }
        for pool in objects
        if pool["kind"] == "NodePool"
    }


def pool_requirements(pool: Dict[str, Any]) -> Dict[str, List[str]]:
    """A NodePool's requirements: key -> values."""
    return {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]}


def pod_spec(job: Dict[str, Any]) -> Dict[str, Any]:
    """The pod template spec of a Volcano job (one task) or a batch/v1 job."""
    if job["apiVersion"].startswith("batch.volcano.sh"):
        (task,) = job["spec"]["tasks"]
        return task["template"]["spec"]
    return job["spec"]["template"]["spec"]


def pod_templates(obj: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every pod template in ``obj`` (a Job's, a Deployment's, a Volcano task's, a TrainJob's runtime patch), as
    ``{"labels": ..., "spec": ...}``: each dict whose ``spec`` holds ``containers``, with the labels of its
    ``metadata``."""
    found: List[Dict[str, Any]] = []
    if isinstance(obj, dict):
        spec = obj.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
            found.append({"labels": dict((obj.get("metadata") or {}).get("labels") or {}), "spec": spec})
        for value in obj.values():
            found += pod_templates(value)
    elif isinstance(obj, list):
        for value in obj:
            found += pod_templates(value)
    return found
