"""DistributedJobChart: the part every distributed job chart shares, whatever API renders its pods."""

from __future__ import annotations

from typing import Any, Dict

from trainium_eks.core.validation import Problems
from trainium_eks.manifests.jobs.distributed_workload import DistributedWorkload, NodeContract
from trainium_eks.manifests.jobs.job_chart import JobChart, check_wait_for

PET_CONTRACT = NodeContract(
    node_index="${PET_NODE_RANK}",
    master_addr="${PET_MASTER_ADDR}",
    torchrun_args=(
        "--node_rank",
        "${PET_NODE_RANK}",
        "--master_addr",
        "${PET_MASTER_ADDR}",
        "--master_port",
        "${PET_MASTER_PORT}",
    ),
)
"""How a pod of either Kubeflow operator learns where it stands: the ``PET_*`` variables both inject.

- Trainer v2 (TrainJob): ``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK`` (the Job completion index),
  ``PET_MASTER_ADDR`` (``<job>-node-0-0.<job>``), ``PET_MASTER_PORT`` (29500). Source: kubeflow/trainer v2.3.0
  ``pkg/runtime/framework/plugins/torch/torch.go``.
- Training operator v1 (PyTorchJob): ``PET_MASTER_ADDR`` (``<job>-master-0``), ``PET_MASTER_PORT``,
  ``PET_NODE_RANK`` (master 0, worker i: i+1), ``PET_NNODES``, ``PET_NPROC_PER_NODE`` when ``nprocPerNode`` is set,
  besides ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE`` and ``RANK``. Source: kubeflow/trainer v1.9.4
  ``pkg/controller.v1/pytorch/envvar.go``."""


class DistributedJobChart(JobChart):
    """A job chart whose pods run a :class:`DistributedWorkload` (``VolcanoJobChart``, ``TrainJobChart``,
    ``PyTorchJobChart``): it takes ``wait_for`` out of the workload props, checks it and every workload prop into the
    subclass's ``problems`` (and raises once, listing all of them), then names the job.

    :param problems: The subclass's collector, holding the problems of its own props.
    :param name: Base name of the job. Required.
    :param namespace: The job's namespace. Required.
    :param workload: The workload props (``image``, ``node_group``, ``script``, ``wait_for``...).
    """

    def __init__(self, problems: Problems, *, name: str, namespace: str, workload: Dict[str, Any]) -> None:
        wait_for = workload.pop("wait_for", ())
        check_wait_for(problems, wait_for)
        self.workload = DistributedWorkload.from_props(problems, name=name, namespace=namespace, **workload)
        super().__init__(name, namespace=namespace, wait_for=wait_for)
        self.nodes = self.workload.nodes
        self.processes_per_node = self.workload.processes_per_node
