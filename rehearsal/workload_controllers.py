"""The controllers of the scheduling rehearsal: what turns workload objects into pods, and pods' ends into job status.

Each is modelled on the controller the stacks install, at its pinned version:

- **DaemonSet** (Kubernetes): one pod per node its node selector, required affinity and tolerations admit, bound by
  the default scheduler (pinned to the node, as the DaemonSet controller's node affinity does); a device plugin's
  pod that runs makes its node advertise the plugin's resources (:data:`~.simulated_cluster.DEVICE_PLUGINS`).
  **Deployment**: ``replicas`` pods (default 1).
- **batch/v1 Job** (Kubernetes ``pkg/controller/job``): one pod at a time (``parallelism``/``completions`` 1);
  ``Complete`` when it succeeds; a failed pod is replaced until more than ``backoffLimit`` (default 6) have failed,
  unless the pod failure policy says ``FailJob`` for its exit code; ``suspend`` creates no pod.
- **Volcano Job** (volcano-sh/volcano v1.15.1 ``pkg/controllers/job``): a PodGroup of ``minAvailable`` members and
  the requests of that many pods, in ``spec.queue``, at ``spec.priorityClassName``'s priority; pods
  ``<job>-<task>-<index>`` only once the PodGroup has left ``Pending``; a failed pod takes the action of the first
  of its task's policies, then the job's, that names ``PodFailed`` (or ``*``) or its exit code
  (``job_controller_util.go`` ``applyPolicies``; ``job_controller_handler.go`` passes the first container's exit
  code): ``RestartJob`` (and a failure no policy names) kills every pod and the PodGroup and starts over, ``Failed``
  once the retries reach ``maxRetry``; ``TerminateJob`` kills the pods and ends the job ``Terminated``, at once;
  ``Completed`` when every pod has succeeded.
- **TrainJob** (kubeflow/trainer v2.3.0 with JobSet v0.12.0): the runtime's pod template merged with the TrainJob's
  trainer (image, command, ``resourcesPerNode``) and runtime patches (service account, node selector, tolerations,
  volumes; queue annotation); with ``podGroupPolicy.volcano`` a PodGroup of ``numNodes`` members named after the
  TrainJob (created at once, whatever the TrainJob's state); the pods ``<job>-node-0-<index>`` at once, scheduled
  by the runtime's ``schedulerName`` (the default scheduler without one); a failed pod is replaced while the child
  Job's ``backoffLimit`` (default 6) allows, then the JobSet restarts whole while ``failurePolicy.maxRestarts``
  allows (none: the first failed Job fails the JobSet and the TrainJob); ``Complete`` when every pod succeeded.
- **Garbage collection**: deleting an object deletes what it owns (``ownerReferences``: a release Job's held job).

What the containers do is :mod:`.container_programs`'s.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional

from rehearsal.container_programs import Programs
from rehearsal.pod_placement import pod_requests, selection_problems
from rehearsal.simulated_cluster import DEVICE_PLUGINS, Pod, PodGroup, SimulatedCluster, Workload

QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def reconcile(cluster: SimulatedCluster, programs: Programs) -> None:
    """One pass of every controller over every workload, then the device plugins' advertisement."""
    for workload in list(cluster.workloads.values()):
        if workload.ref not in cluster.workloads:
            continue
        {
            "daemonset": _daemon_set,
            "deployment": _deployment,
            "job": _batch_job,
            "vcjob": _volcano_job,
            "trainjob": _train_job,
        }.get(workload.kind, _unmodelled)(cluster, workload, programs)
    for node in cluster.nodes:
        node.advertised = {}
        for pod in cluster.pods:
            if pod.node == node.name and pod.phase == "Running" and pod.owner.startswith("daemonset/"):
                for resource in DEVICE_PLUGINS.get(pod.owner.rsplit("/", 1)[1], ()):
                    node.advertised[resource] = node.devices(resource)


def _unmodelled(cluster: SimulatedCluster, workload: Workload, programs: Programs) -> None:
    workload.detail = f"kind {workload.kind} is not modelled"


def _new_pod(cluster: SimulatedCluster, workload: Workload, name: str, spec: Dict[str, Any], **extra: Any) -> Pod:
    pod = Pod(
        name=name,
        namespace=workload.namespace,
        owner=workload.ref,
        spec=spec,
        created=cluster.tick,
        scheduler=spec.get("schedulerName") or "default-scheduler",
        priority=cluster.priority_of(spec),
        generation=workload.generation,
        **extra,
    )
    cluster.pods.append(pod)
    return pod


def _daemon_set(cluster: SimulatedCluster, workload: Workload, programs: Programs) -> None:
    template = workload.manifest["spec"]["template"]["spec"]
    for node in cluster.nodes:
        name = f"{workload.name}-{node.name}"
        if any(p.name == name for p in cluster.pods_of(workload.ref)) or selection_problems(template, node.facts()):
            continue
        pinned = json.loads(json.dumps(template))
        pinned.setdefault("nodeSelector", {})["kubernetes.io/hostname"] = node.name
        _new_pod(cluster, workload, name, pinned)
    workload.state = "Running"


def _deployment(cluster: SimulatedCluster, workload: Workload, programs: Programs) -> None:
    spec = workload.manifest["spec"]
    existing = [p for p in cluster.pods_of(workload.ref) if not p.finished]
    for index in range(len(existing), int(spec.get("replicas", 1))):
        _new_pod(cluster, workload, f"{workload.name}-{workload.attempt}-{index}", spec["template"]["spec"])
        workload.attempt += 1
    workload.state = "Running"


def _batch_job(cluster: SimulatedCluster, workload: Workload, programs: Programs) -> None:
    if workload.finished:
        return
    spec = workload.manifest["spec"]
    if spec.get("suspend"):
        workload.state = "Suspended"
        return
    pods = cluster.pods_of(workload.ref)
    if any(p.phase == "Succeeded" for p in pods):
        workload.state = "Complete"
        cluster.say(f"{workload.ref} Complete")
        return
    for pod in pods:
        if pod.phase == "Failed" and not pod.reason:
            pod.reason = "counted"
            workload.failures += 1
            if _fails_job(spec, pod):
                workload.state, workload.detail = "Failed", f"pod failure policy FailJob (exit {pod.exit_code})"
                cluster.say(f"{workload.ref} Failed: {workload.detail}")
                return
    if workload.failures > int(spec.get("backoffLimit", 6)):
        workload.state, workload.detail = "Failed", "BackoffLimitExceeded"
        cluster.say(f"{workload.ref} Failed: {workload.detail}")
        return
    if not any(not p.finished for p in pods):
        workload.generation = workload.failures
        _new_pod(cluster, workload, f"{workload.name}-{workload.failures}", spec["template"]["spec"])
    workload.state = "Running"


def _fails_job(spec: Mapping[str, Any], pod: Pod) -> bool:
    for rule in (spec.get("podFailurePolicy") or {}).get("rules") or ():
        codes = rule.get("onExitCodes")
        if rule.get("action") == "FailJob" and codes and codes.get("operator") == "In":
            if pod.exit_code in codes.get("values", ()):
                return True
    return False


def _volcano_job(cluster: SimulatedCluster, workload: Workload, programs: Programs) -> None:
    if workload.finished:
        return
    spec = workload.manifest["spec"]
    group = f"{workload.name}-pg{workload.generation}"
    if group not in cluster.pod_groups:
        templates = [(task, index) for task in spec.get("tasks") or () for index in range(int(task.get("replicas", 1)))]
        minimum = int(spec.get("minAvailable") or len(templates))
        requests: Dict[str, int] = {}
        for task, _ in templates[:minimum]:
            for name, value in pod_requests(_task_pod(task)).items():
                requests[name] = requests.get(name, 0) + value
        requests.pop("pods", None)
        cluster.pod_groups[group] = PodGroup(
            group,
            workload.namespace,
            workload.ref,
            minimum,
            requests,
            spec.get("queue") or "default",
            cluster.priority_of(spec),
            cluster.tick,
        )
        workload.state = "Pending"
        return
    pods = cluster.pods_of(workload.ref, workload.generation)
    if cluster.pod_groups[group].phase != "Pending" and not pods:
        for task in spec.get("tasks") or ():
            template = dict(_task_pod(task))
            template.setdefault("schedulerName", spec.get("schedulerName") or "volcano")
            for index in range(int(task.get("replicas", 1))):
                _new_pod(cluster, workload, f"{workload.name}-{task['name']}-{index}", template, group=group)
        return
    failed = [p for p in pods if p.phase == "Failed"]
    if failed:
        action = volcano_action(spec, _task_of(workload, failed[0]), failed[0].exit_code)
        cluster.pods = [p for p in cluster.pods if not (p.owner == workload.ref and not p.finished)]
        cluster.pod_groups.pop(group, None)
        if action == "TerminateJob":
            workload.state = "Terminated"
            workload.detail = f"TerminateJob: pod {failed[0].name} exited {failed[0].exit_code}"
            cluster.say(f"{workload.ref} Terminated ({workload.detail})")
            return
        workload.attempt += 1
        if workload.attempt >= int(spec.get("maxRetry", 3)):
            workload.state, workload.detail = "Failed", f"{workload.attempt} attempts failed (maxRetry)"
            cluster.say(f"{workload.ref} Failed: {workload.detail}")
            return
        workload.state = "Restarting"
        workload.generation += 1
        cluster.say(f"{workload.ref} restarts (attempt {workload.attempt + 1})")
        return
    if pods and all(p.phase == "Succeeded" for p in pods):
        workload.state = "Completed"
        cluster.pod_groups.pop(group, None)
        cluster.say(f"{workload.ref} Completed")
        return
    if sum(p.phase == "Running" for p in pods) >= cluster.pod_groups[group].min_member:
        workload.state = "Running"


def volcano_action(spec: Mapping[str, Any], task_name: str, exit_code: Optional[int]) -> Optional[str]:
    """The action Volcano takes for a pod of task ``task_name`` that failed with ``exit_code``: the first of the
    task's policies, then of the job's, whose events hold ``PodFailed`` or ``*`` or whose ``exitCode`` is the pod's
    (volcano v1.15.1 ``applyPolicies``); None when no policy matches (Volcano's ``SyncJob``)."""
    tasks = [t for t in spec.get("tasks") or () if t.get("name") == task_name]
    for policies in [(tasks[0].get("policies") or []) if tasks else [], spec.get("policies") or []]:
        for policy in policies:
            events = ([policy["event"]] if policy.get("event") else []) + list(policy.get("events") or [])
            if "PodFailed" in events or "*" in events:
                return policy.get("action")
            if policy.get("exitCode") is not None and policy["exitCode"] == exit_code:
                return policy.get("action")
    return None


def _task_of(workload: Workload, pod: Pod) -> str:
    """The task of a Volcano job's pod ``<job>-<task>-<index>``."""
    return pod.name[len(workload.name) + 1 :].rsplit("-", 1)[0]


def _task_pod(task: Mapping[str, Any]) -> Dict[str, Any]:
    return ((task.get("template") or {}).get("spec")) or {"containers": []}


def _train_job(cluster: SimulatedCluster, workload: Workload, programs: Programs) -> None:
    if workload.finished:
        return
    spec = workload.manifest["spec"]
    runtime = cluster.runtime(spec["runtimeRef"]["name"])
    if runtime is None:
        workload.state, workload.detail = "Failed", "its ClusterTrainingRuntime does not exist"
        return
    nodes = int(spec["trainer"]["numNodes"])
    pod_spec, annotations = merged_pod_spec(runtime, workload.manifest)
    template = runtime["spec"]["template"]["spec"]
    volcano = "volcano" in (runtime["spec"].get("podGroupPolicy") or {})
    group = workload.name if volcano else None
    if volcano and group not in cluster.pod_groups:
        requests = {k: v * nodes for k, v in pod_requests(pod_spec).items() if k != "pods"}
        cluster.pod_groups[group] = PodGroup(
            group,
            workload.namespace,
            workload.ref,
            nodes,
            requests,
            annotations.get(QUEUE_ANNOTATION) or "default",
            cluster.priority_of(pod_spec),
            cluster.tick,
        )
    pods = cluster.pods_of(workload.ref, workload.generation)
    backoff_limit = int(template["replicatedJobs"][0]["template"]["spec"].get("backoffLimit", 6))
    failed = [p for p in pods if p.phase == "Failed"]
    if len(failed) > backoff_limit:
        max_restarts = (template.get("failurePolicy") or {}).get("maxRestarts")
        if max_restarts is None or workload.attempt >= int(max_restarts):
            workload.state = "Failed"
            workload.detail = "FailedJobs" if max_restarts is None else "ReachedMaxRestarts"
            cluster.pods = [p for p in cluster.pods if not (p.owner == workload.ref and not p.finished)]
            cluster.say(f"{workload.ref} Failed: {workload.detail}")
            return
        workload.attempt += 1
        workload.generation += 1
        cluster.pods = [p for p in cluster.pods if not (p.owner == workload.ref and not p.finished)]
        cluster.say(f"{workload.ref}: its JobSet restarts (attempt {workload.attempt + 1})")
        return
    by_index = {p.name.rsplit("-", 3)[-3]: p for p in pods if not p.finished or p.phase == "Succeeded"}
    for index in range(nodes):
        if str(index) not in by_index:
            _new_pod(
                cluster,
                workload,
                f"{workload.name}-node-0-{index}-{workload.generation}-{len(pods)}",
                pod_spec,
                group=group,
            )
    if pods and sum(p.phase == "Succeeded" for p in pods) >= nodes:
        workload.state = "Complete"
        cluster.pod_groups.pop(group or "", None)
        cluster.say(f"{workload.ref} Complete")
    elif any(p.phase == "Running" for p in pods):
        workload.state = "Running"


def merged_pod_spec(
    runtime: Mapping[str, Any], train_job: Mapping[str, Any]
) -> "tuple[Dict[str, Any], Dict[str, str]]":
    """The pod spec of a TrainJob's ``node`` pods and the annotations the Trainer's plugins read (the runtime's
    template metadata, then each runtime patch's: kubeflow/trainer v2.3.0 ``pkg/runtime/core/trainingruntime.go``
    ``newRuntimeInfo``)."""
    template = runtime["spec"]["template"]
    annotations = dict((template.get("metadata") or {}).get("annotations") or {})
    (node,) = [job for job in template["spec"]["replicatedJobs"] if job["name"] == "node"]
    pod = json.loads(json.dumps(node["template"]["spec"]["template"]["spec"]))
    trainer = train_job["spec"]["trainer"]
    for container in pod.get("containers") or ():
        if container["name"] == "node":
            container["image"] = trainer["image"]
            container["command"] = trainer.get("command")
            container["resources"] = trainer.get("resourcesPerNode") or {}
            container["env"] = list(container.get("env") or []) + list(trainer.get("env") or [])
    for patch in train_job["spec"].get("runtimePatches") or ():
        patched = patch["trainingRuntimeSpec"]["template"]
        annotations.update((patched.get("metadata") or {}).get("annotations") or {})
        for job in patched["spec"].get("replicatedJobs") or ():
            if job["name"] != "node":
                continue
            extra = job["template"]["spec"]["template"]["spec"]
            for key in ("serviceAccountName", "nodeSelector", "tolerations", "affinity"):
                if key in extra:
                    pod[key] = extra[key]
            pod["volumes"] = list(pod.get("volumes") or []) + list(extra.get("volumes") or [])
            for container in extra.get("containers") or ():
                for own in pod.get("containers") or ():
                    if own["name"] == container["name"]:
                        own["volumeMounts"] = list(own.get("volumeMounts") or []) + list(
                            container.get("volumeMounts") or []
                        )
    return pod, annotations


def status_of(workload: Optional[Workload]) -> Optional[Dict[str, Any]]:
    """The status a job object reports to the API (what the release program reads), or None when it is absent."""
    if workload is None:
        return None
    if workload.kind == "vcjob":
        return {"status": {"state": {"phase": workload.state}}}
    condition = {"Complete": "Complete", "Failed": "Failed"}.get(workload.state)
    return {"status": {"conditions": [{"type": condition, "status": "True"}] if condition else []}}
