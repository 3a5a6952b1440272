"""TrainJobChart: a distributed PyTorch job for Kubeflow Trainer v2 (``trainer.kubeflow.org/v1alpha1`` TrainJob)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from trainium_eks.core.conventions import DEFAULT_NAMESPACE
from trainium_eks.core.validation import Problems, check_dns_label
from trainium_eks.manifests.addons.training_runtime import (
    DEFAULT_MAX_RESTARTS,
    DEFAULT_RUNTIME,
    NODE_JOB,
    TRAINER_API_VERSION,
    VOLCANO_QUEUE_ANNOTATION,
)
from trainium_eks.manifests.addons.volcano_queue import DEFAULT_QUEUE
from trainium_eks.manifests.jobs import job_naming
from trainium_eks.manifests.jobs.distributed_job_chart import PET_CONTRACT, DistributedJobChart
from trainium_eks.manifests.jobs.distributed_workload import RUNTIME_DEFAULT_SECCOMP, worker_security
from trainium_eks.manifests.jobs.job_deadline import DEFAULT_DEADLINE_SECONDS, check_deadline

RUNTIME_ATTEMPTS = DEFAULT_MAX_RESTARTS + 1
"""How many times a TrainJob on the library's runtime may run: its failure policy's restarts and the first run."""

PATCH_MANAGER = "trainium-eks/train-job-chart"
"""``manager`` of the TrainJob's runtime patch (who owns the patch). The Trainer's webhook denies a TrainJob whose
manager is not a domain-prefixed path (kubeflow/trainer v2.3.0 ``pkg/runtime/framework/plugins/jobset/jobset.go``
``JobSet.Validate``: ``validation.IsDomainPrefixedPath``, a DNS-1123 subdomain, ``/``, a non-empty path)."""


class TrainJobChart(DistributedJobChart):
    """A TrainJob of Kubeflow Trainer v2 on a node group, from the same
    :class:`~trainium_eks.manifests.jobs.distributed_workload.DistributedWorkload` as the Volcano job.

    - ``runtimeRef``: the library's ``ClusterTrainingRuntime``
      (:class:`~trainium_eks.manifests.addons.training_runtime.TrainingRuntimeChart`);
    - ``spec.trainer``: the image, the launch script (``torchrun`` with the node rank and node 0's address from the
      Trainer's ``PET_*`` variables, Composer's launcher, or the image's own launcher), ``numNodes``,
      ``numProcPerNode`` **always set** (the Trainer's ``auto`` counts only resources whose name contains "gpu" and
      otherwise falls back to the CPU count, so a Neuron job would start one process per requested vCPU),
      ``resourcesPerNode`` (Neuron devices, EFA interfaces, GPUs, CPU and memory), the environment contract;
    - a runtime patch (``spec.runtimePatches``, manager :data:`PATCH_MANAGER`) with what the runtime cannot know: the
      node selector and tolerations of the node group, the service account, the shared claims and the run directory
      (:mod:`~trainium_eks.manifests.jobs.run_directory`) with their mounts, the
      pods' security (the runtime's default seccomp profile; no privilege escalation, no capabilities), the label of
      ``internet_egress``, and the Volcano queue (the annotation ``scheduling.volcano.sh/queue-name`` of the patch's
      template metadata, where the Trainer's Volcano plugin reads it; ``queue=None``: the runtime's);
    - ``spec.activeDeadlineSeconds`` = ``deadline_seconds``: the bound of the whole TrainJob, every restart of its
      JobSet included, counted from its creation (so from its release, for a held job); once past, the Trainer fails
      it (``DeadlineExceeded``) and deletes its JobSet, and with it the Jobs and their pods
      (:mod:`~trainium_eks.manifests.jobs.job_deadline` cites the Trainer's source).

    A TrainJob that waits for others is held by :class:`~trainium_eks.constructs.job_sequence.JobSequence` until they
    have completed. Restarts after a failure are the runtime's (``TrainingRuntimeChart(max_restarts=2)``: three
    attempts, as ``max_retries=3`` of a Volcano job), as are gang scheduling and the pods' restart policy. The job's
    name carries a hash of its spec (:attr:`job_name`, at most 39 characters: the Trainer's JobSet webhook refuses the
    JobSet of a TrainJob whose pod names would exceed 63 characters, which allows 48, and the TrainJob then makes no
    pods); :attr:`ref` is ``trainjob/<name>``.

    :param name: Base name, a DNS label of at most 28 characters. Required.
    :param runtime: The ClusterTrainingRuntime. Default: :data:`DEFAULT_RUNTIME`.
    :param namespace: Default: ``training``.
    :param queue: Volcano queue, or None. Default: ``training``.
    :param deadline_seconds: ``spec.activeDeadlineSeconds``, the whole TrainJob's, from 60 seconds to 90 days.
        Default: :data:`~trainium_eks.manifests.jobs.job_deadline.DEFAULT_DEADLINE_SECONDS` (24 hours).
    :param wait_for: Jobs to wait for (their charts or references). Default: none.
    :param fabric_check: On more than one EFA node, run a collective benchmark across the job's nodes first, as a
        Volcano Job in ``queue`` (the library's default queue when ``queue`` is None), and hold the TrainJob until it
        passed (:attr:`fabric_check`; :class:`~trainium_eks.manifests.jobs.distributed_job_chart.DistributedJobChart`).
        Default: true.
    :param fabric_floor_fraction: The share of the EFA link rate the check must reach. Default: 0.25.
    :param resolve: Turns CDK tokens into their CloudFormation form before hashing. Default: none.
    :param workload: The other props (``image``, ``node_group``, ``script``, ``args``, ``nodes``,
        ``processes_per_node``, ``launcher``, ``env``, ``volumes``...), documented on
        :class:`~trainium_eks.manifests.jobs.distributed_workload.DistributedWorkload`.
    """

    ref_kind = "trainjob"

    def __init__(
        self,
        *,
        name: str,
        runtime: str = DEFAULT_RUNTIME,
        namespace: str = DEFAULT_NAMESPACE,
        queue: Optional[str] = DEFAULT_QUEUE,
        deadline_seconds: int = DEFAULT_DEADLINE_SECONDS,
        resolve: Optional[Callable[[Any], Any]] = None,
        **workload: Any,
    ) -> None:
        problems = Problems(f"train job {name!r}")
        check_dns_label(problems, "runtime", runtime)
        check_deadline(problems, "deadline_seconds", deadline_seconds)
        if queue is not None:
            check_dns_label(problems, "queue", queue)
        if workload.get("max_retries", RUNTIME_ATTEMPTS) != RUNTIME_ATTEMPTS:
            problems.add(
                "max_retries",
                workload["max_retries"],
                f"{RUNTIME_ATTEMPTS} or unset: a TrainJob runs as often as its runtime says "
                "(TrainingRuntimeChart(max_restarts=max_retries - 1) under another name)",
            )
        super().__init__(problems, name=name, namespace=namespace, workload=workload, queue=queue)
        self.queue = queue
        self.deadline_seconds: int = deadline_seconds
        """``spec.activeDeadlineSeconds``: the bound of the whole TrainJob."""

        metadata: Dict[str, Any] = {
            "name": job_naming.PLACEHOLDER,
            "namespace": namespace,
            "labels": {**self.selector_labels(), "app.kubernetes.io/instance": job_naming.PLACEHOLDER},
        }
        self.add_job(
            {
                "apiVersion": TRAINER_API_VERSION,
                "kind": "TrainJob",
                "metadata": metadata,
                "spec": {
                    "runtimeRef": {
                        "name": runtime,
                        "apiGroup": "trainer.kubeflow.org",
                        "kind": "ClusterTrainingRuntime",
                    },
                    "trainer": {
                        "image": self.workload.image,
                        "command": ["bash", "-c", self.workload.launch_script(PET_CONTRACT)],
                        "numNodes": self.workload.nodes,
                        "numProcPerNode": self.workload.processes_per_node,
                        "resourcesPerNode": self.workload.resources(),
                        "env": self.workload.environment(),
                    },
                    "runtimePatches": [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": self._runtime_patch()}],
                    "activeDeadlineSeconds": deadline_seconds,
                },
            },
            resolve,
        )

    def _runtime_patch(self) -> Dict[str, Any]:
        workload = self.workload
        # The runtime's pod template has the memory-backed /dev/shm; the patch adds the job's other volumes.
        volumes = [volume for volume in workload.pod_volumes() if volume["name"] != "dshm"]
        mounts: List[Dict[str, Any]] = [m for m in workload.volume_mounts() if m["name"] != "dshm"]
        pod = {
            "serviceAccountName": workload.service_account,
            "securityContext": dict(RUNTIME_DEFAULT_SECCOMP),
            **workload.node_group.pod_placement(),
            "volumes": volumes,
            "containers": [{"name": NODE_JOB, "securityContext": worker_security(), "volumeMounts": mounts}],
        }
        pod.update(workload.termination_grace())
        pod_template: Dict[str, Any] = {"spec": pod}
        if workload.pod_labels():
            pod_template["metadata"] = {"labels": workload.pod_labels()}
        replicated = {"name": NODE_JOB, "template": {"spec": {"template": pod_template}}}
        template: Dict[str, Any] = {"spec": {"replicatedJobs": [replicated]}}
        if self.queue is not None:
            template["metadata"] = {"annotations": {VOLCANO_QUEUE_ANNOTATION: self.queue}}
        return {"template": template}
