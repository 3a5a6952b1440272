"""PyTorchJobChart: a distributed PyTorch job for the Kubeflow training operator v1 (``kubeflow.org/v1``)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from trainium_eks.core.conventions import DEFAULT_NAMESPACE
from trainium_eks.core.validation import Problems, check_dns_label, check_integer
from trainium_eks.manifests.addons.volcano_queue import DEFAULT_QUEUE
from trainium_eks.manifests.jobs import job_naming
from trainium_eks.manifests.jobs.distributed_job_chart import PET_CONTRACT, DistributedJobChart
from trainium_eks.manifests.jobs.job_deadline import DEFAULT_DEADLINE_SECONDS, check_deadline

PYTORCH_JOB_API_VERSION = "kubeflow.org/v1"
CONTAINER = "pytorch"
"""The operator finds the training container by this name (training-operator v1 docs)."""


class PyTorchJobChart(DistributedJobChart):
    """A ``kubeflow.org/v1`` PyTorchJob as the Kubeflow workshop wrote it, from the same
    :class:`~trainium_eks.manifests.jobs.distributed_workload.DistributedWorkload` as the Volcano job and the TrainJob.

    - ``pytorchReplicaSpecs``: ``Master`` (one replica) and ``Worker`` (nodes - 1), each with the container
      ``pytorch``, the same pod (environment contract, devices, CPU and memory, ``/dev/shm``, claims, tolerations,
      node selector, service account) and ``restartPolicy: OnFailure``;
    - ``nprocPerNode`` (a string, as the CRD wants), ``runPolicy``: ``activeDeadlineSeconds`` = ``deadline_seconds``,
      the bound of the whole job, every restart included, counted from the operator's first status of it;
      ``cleanPodPolicy: Running``: when the job has ended (succeeded, failed, or past its deadline) the operator deletes
      its running and pending pods and keeps the finished ones for their logs. Not ``None``: the operator marks a job
      past its deadline failed first and then deletes only the pods ``cleanPodPolicy`` names, none for ``None``, so
      its pods would run on (kubeflow/trainer v1.9.4 ``pkg/controller.v1/common/job.go`` ``ReconcileJobs``,
      ``DeletePodsAndServices``; :mod:`~trainium_eks.manifests.jobs.job_deadline`); ``backoffLimit``;
      ``schedulingPolicy`` with ``minAvailable`` = nodes and the Volcano queue, used when the operator runs with
      ``--gang-scheduler-name=volcano``;
    - optionally ``elasticPolicy`` (``min_nodes`` to ``nodes``, c10d rendezvous).

    The library renders and checks PyTorchJobs; it does not install the v1 operator (its CRDs are too large for the
    client-side ``kubectl apply`` of the aws-eks-v2 handler; docs/stacks.md says how to install it by hand).

    :param name: Base name, a DNS label of at most 28 characters. Required.
    :param namespace: Default: ``training``.
    :param queue: Volcano queue of ``schedulingPolicy``, or None. Default: ``training``.
    :param min_nodes: With a value, an elastic job (``elasticPolicy``) that runs on ``min_nodes`` to ``nodes`` nodes.
        Default: none (a fixed-size job).
    :param deadline_seconds: ``runPolicy.activeDeadlineSeconds``, the whole job's, from 60 seconds to 90 days.
        Default: :data:`~trainium_eks.manifests.jobs.job_deadline.DEFAULT_DEADLINE_SECONDS` (24 hours).
    :param wait_for: Jobs to wait for: the job is held until they have completed. Default: none.
    :param fabric_check: On more than one EFA node, run a collective benchmark across the job's nodes first, as a
        Volcano Job in ``queue`` (the library's default queue when ``queue`` is None: the check needs Volcano even when
        the operator gangs without it), and hold the PyTorchJob until it passed (:attr:`fabric_check`;
        :class:`~trainium_eks.manifests.jobs.distributed_job_chart.DistributedJobChart`). Default: true.
    :param fabric_floor_fraction: The share of the EFA link rate the check must reach. Default: 0.25.
    :param resolve: Turns CDK tokens into their CloudFormation form before hashing. Default: none.
    :param workload: The other props, documented on
        :class:`~trainium_eks.manifests.jobs.distributed_workload.DistributedWorkload`, but ``graceful_stop``: a stop
        ends every node's container, and the operator counts each container's restart against ``backoffLimit``
        (kubeflow/trainer v1.9.4 ``pkg/controller.v1/common/job.go`` ``PastBackoffLimit``).
    """

    ref_kind = "pytorchjob"

    def __init__(
        self,
        *,
        name: str,
        namespace: str = DEFAULT_NAMESPACE,
        queue: Optional[str] = DEFAULT_QUEUE,
        min_nodes: Optional[int] = None,
        deadline_seconds: int = DEFAULT_DEADLINE_SECONDS,
        resolve: Optional[Callable[[Any], Any]] = None,
        **workload: Any,
    ) -> None:
        problems = Problems(f"PyTorch job {name!r}")
        check_deadline(problems, "deadline_seconds", deadline_seconds)
        if queue is not None:
            check_dns_label(problems, "queue", queue)
        if min_nodes is not None:
            check_integer(problems, "min_nodes", min_nodes, minimum=1, maximum=workload.get("nodes") or 450)
        if workload.get("graceful_stop") is not None:
            problems.add(
                "graceful_stop",
                workload["graceful_stop"],
                "None on a PyTorchJob: its containers restart in place (restartPolicy OnFailure), and the operator "
                "counts every node's restart against backoffLimit, so one node's end would spend a retry per node; "
                "use a VolcanoJobChart or a TrainJobChart",
            )
        super().__init__(problems, name=name, namespace=namespace, workload=workload, queue=queue)
        self.deadline_seconds: int = deadline_seconds
        """``runPolicy.activeDeadlineSeconds``: the bound of the whole job."""

        pod = {**self.workload.pod_spec(CONTAINER, PET_CONTRACT), "restartPolicy": "OnFailure"}
        template = {
            "metadata": {
                "labels": {
                    **self.selector_labels(),
                    "app.kubernetes.io/instance": job_naming.PLACEHOLDER,
                    **self.workload.pod_labels(),
                }
            },
            "spec": pod,
        }
        replicas: Dict[str, Any] = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template}}
        if self.workload.nodes > 1:
            replicas["Worker"] = {
                "replicas": self.workload.nodes - 1,
                "restartPolicy": "OnFailure",
                "template": template,
            }
        scheduling: Dict[str, Any] = {"minAvailable": self.workload.nodes}
        if queue is not None:
            scheduling["queue"] = queue
        spec: Dict[str, Any] = {
            "nprocPerNode": str(self.workload.processes_per_node),
            "pytorchReplicaSpecs": replicas,
            "runPolicy": {
                "cleanPodPolicy": "Running",
                "activeDeadlineSeconds": deadline_seconds,
                "backoffLimit": self.workload.max_retries,
                "schedulingPolicy": scheduling,
            },
        }
        if min_nodes is not None:
            spec["elasticPolicy"] = {
                "minReplicas": min_nodes,
                "maxReplicas": self.workload.nodes,
                "rdzvBackend": "c10d",
                "nProcPerNode": self.workload.processes_per_node,
            }
        self.add_job(
            {
                "apiVersion": PYTORCH_JOB_API_VERSION,
                "kind": "PyTorchJob",
                "metadata": {
                    "name": job_naming.PLACEHOLDER,
                    "namespace": namespace,
                    "labels": {**self.selector_labels(), "app.kubernetes.io/instance": job_naming.PLACEHOLDER},
                },
                "spec": spec,
            },
            resolve,
        )
