"""The jobs a deployed stack runs (its seed sequences): every job its template applies, and every job its release
Jobs create, read by the release program's own rules (:mod:`trainium_eks.manifests.jobs.job_release_program`)."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from e2e.api import Api, ApiError
from e2e.processes import wait_for
from rehearsal.kubelet_expansion import expand
from trainium_eks.manifests.jobs.graceful_stop import STOP_FILE_ENV
from trainium_eks.manifests.jobs.job_release_program import (
    API,
    DONE_CONDITIONS,
    GANG_POD_LABELS,
    INGRESS_POLICY_LABEL,
    PEERS_SUFFIX,
    parse,
    ref_of,
    state,
)
from trainium_eks.manifests.jobs.progress_watch import PROGRESS_FILE_ENV
from trainium_eks.manifests.jobs.run_directory import RUN_DIRECTORY, run_mount, run_volume

SEED_RUN_MINUTES = 15
"""How long a stack's seed jobs may take on the test cluster (release programs poll every 20 s; kwok nodes are Ready
at once; the longest sequence has five links, about 2 minutes)."""

JobRef = Tuple[str, str]
"""(namespace, ``<kind>/<name>``) of a job."""


def seed_jobs(applied: List[Mapping[str, Any]]) -> List[JobRef]:
    """The jobs of ``applied`` (a stack's applied objects) and the held jobs their release Jobs create."""
    found: List[JobRef] = []
    for obj in applied:
        ref = ref_of(obj)
        if ref is None:
            continue
        namespace = obj["metadata"].get("namespace", "default")
        found.append((namespace, ref))
        for container in obj["spec"].get("template", {}).get("spec", {}).get("containers", []):
            for item in container.get("env") or []:
                if item.get("name") == "HELD_JOB":
                    found.append((namespace, ref_of(json.loads(expand(item["value"], {})))))
    return found


def job_states(api: Api, jobs: List[JobRef]) -> Dict[JobRef, str]:
    """Each job's state: 'done', 'failed' or 'waiting' (not created yet, or running)."""
    return {(namespace, ref): state(ref.split("/")[0], _read(api, namespace, ref)) for namespace, ref in jobs}


def wait_for_jobs(
    api: Api,
    jobs: List[JobRef],
    *,
    timeout: float,
    check: Optional[Callable[[], None]] = None,
    describe: Optional[Callable[[], str]] = None,
) -> Dict[JobRef, str]:
    """Wait (at most ``timeout`` seconds: HarnessError with each job's state and ``describe()``) until no job of
    ``jobs`` is waiting; their states."""
    states: Dict[JobRef, str] = {}

    def finished() -> bool:
        states.update(job_states(api, jobs))
        return "waiting" not in states.values()

    def described() -> str:
        lines = [f"{namespace}/{ref}: {found}" for (namespace, ref), found in states.items()]
        return "\n".join(lines) + ("\n" + describe() if describe is not None else "")

    wait_for("the seed jobs finished", finished, timeout=timeout, interval=5, check=check, describe=described)
    return states


def stop_graces(api: Api) -> Dict[str, int]:
    """``terminationGracePeriodSeconds`` of each pod (``<namespace>/<name>``) whose containers have the graceful
    stop's variable: what the controllers between a job chart and its pods (Volcano, the Trainer, JobSet, the Job
    controller) kept of the chart's grace (the API server fills in 30 where none is given)."""
    return {
        f"{pod['metadata']['namespace']}/{pod['metadata']['name']}": pod["spec"]["terminationGracePeriodSeconds"]
        for pod in api.list("v1", "Pod")
        if any(item.get("name") == STOP_FILE_ENV for c in pod["spec"]["containers"] for item in c.get("env") or [])
    }


JOB_LABELS = (*GANG_POD_LABELS.values(), "batch.kubernetes.io/job-name")
"""The label by which each job controller names a pod's job (the release program's, by which it watches a gang:
Volcano, JobSet under the Trainer, the training operator; then the Job controller's), in this order: a JobSet's pods
carry its Jobs' label too. What the controllers, not the chart, say a pod belongs to."""


def peers_policies(api: Api, namespace: str) -> Dict[str, Dict[str, Any]]:
    """Each peers policy of ``namespace`` (``<job>-peers``, as the releases create them) -> its owners' names and,
    per pod its selector selects as the controllers made the pods, the job the pod's controller label names."""
    found = {}
    for policy in api.list("networking.k8s.io/v1", "NetworkPolicy", namespace=namespace):
        name = policy["metadata"]["name"]
        if not name.endswith(PEERS_SUFFIX):
            continue
        selector = ",".join(f"{k}={v}" for k, v in policy["spec"]["podSelector"]["matchLabels"].items())
        pods = api.list("v1", "Pod", namespace, selector=selector)
        found[name] = {
            "owners": [owner["name"] for owner in policy["metadata"].get("ownerReferences") or ()],
            "selects": policy["spec"]["podSelector"]["matchLabels"] == {INGRESS_POLICY_LABEL: name},
            "pods": {
                pod["metadata"]["name"]: next(
                    (pod["metadata"]["labels"][k] for k in JOB_LABELS if k in pod["metadata"]["labels"]), None
                )
                for pod in pods
            },
        }
    return found


def run_directory_mounts(api: Api) -> Dict[str, bool]:
    """For each container (``<namespace>/<pod>/<container>``) whose files are in the run directory (the progress
    watch's or the graceful stop's variable names a file there): whether the pod that the controllers made (Volcano,
    the Trainer through JobSet, the Job controller) has the run directory's ``emptyDir`` and the container mounts it."""
    found = {}
    for pod in api.list("v1", "Pod"):
        for container in pod["spec"]["containers"]:
            files = [
                item.get("value") or ""
                for item in container.get("env") or []
                if item.get("name") in (PROGRESS_FILE_ENV, STOP_FILE_ENV)
            ]
            if any(path.startswith(RUN_DIRECTORY + "/") for path in files):
                key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}/{container['name']}"
                found[key] = run_volume() in pod["spec"].get("volumes", []) and run_mount() in (
                    container.get("volumeMounts") or []
                )
    return found


def _read(api: Api, namespace: str, ref: str) -> Optional[Dict[str, Any]]:
    kind, name = ref.split("/")
    api_version, object_kind, _ = API[kind]
    try:
        return api.get(api_version, object_kind, name, namespace)
    except ApiError as error:
        if error.status == 404:  # a kind the server does not serve (its CRD is not installed): not created
            return None
        raise


def created_before_its_waits_ended(api: Api, applied: List[Mapping[str, Any]]) -> List[str]:
    """Each held job (of ``applied``'s release Jobs) that exists but was created before a job it waits for had
    completed: a release that let its job go too early (timestamps are whole seconds: equal counts as after)."""
    found = []
    for obj in applied:
        if obj.get("apiVersion") != "batch/v1" or obj.get("kind") != "Job":
            continue
        container = (obj["spec"]["template"]["spec"].get("containers") or [{}])[0]
        env = {item["name"]: expand(item.get("value", ""), {}) for item in container.get("env") or []}
        if "HELD_JOB" not in env:
            continue
        namespace, _, waits, _, held_ref = parse(container["command"][2:], env)
        job = _read(api, namespace, held_ref)
        if job is None:
            continue
        for wait in waits:
            ended = _ended_at(wait.split("/")[0], _read(api, namespace, wait))
            if ended is None or job["metadata"]["creationTimestamp"] < ended:
                found.append(f"{held_ref} created at {job['metadata']['creationTimestamp']}, {wait} ended at {ended}")
    return found


def _ended_at(kind: str, job: Optional[Mapping[str, Any]]) -> Optional[str]:
    """When a job completed (RFC 3339, whole seconds), or None."""
    if job is None or state(kind, job) != "done":
        return None
    status = job.get("status") or {}
    if kind == "vcjob":
        return (status.get("state") or {}).get("lastTransitionTime")
    return next(c["lastTransitionTime"] for c in status["conditions"] if c["type"] == DONE_CONDITIONS[kind])
