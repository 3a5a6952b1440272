"""DistributedJobChart: the part every distributed job chart shares, whatever API renders its pods."""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional

from trainium_eks.core.validation import Problems, check_bool, check_integer
from trainium_eks.manifests.jobs.distributed_workload import DistributedWorkload, NodeContract
from trainium_eks.manifests.jobs.fabric_check import (
    DEFAULT_SUSPECT_ROUNDS,
    MAX_SUSPECT_ROUNDS,
    FabricCheckChart,
    fabric_check_applies,
)
from trainium_eks.manifests.jobs.fabric_floor import DEFAULT_FABRIC_FLOOR_FRACTION, check_fabric_floor
from trainium_eks.manifests.jobs.gang_capacity import GangCapacity, check_capacity
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
    ``PyTorchJobChart``): it takes ``wait_for`` and the fabric check's settings out of the workload props, checks them
    and every workload prop into the subclass's ``problems`` (and raises once, listing all of them), then names the
    job.

    **Fabric check.** A job on more than one node of an EFA type (Neuron or NVIDIA) that requests EFA interfaces gets
    a :class:`~trainium_eks.manifests.jobs.fabric_check.FabricCheckChart` (:attr:`fabric_check`): a collective
    benchmark across the same number of nodes of the node group, with the job's devices, EFA interfaces, environment
    and placement, that waits for what the job waits for; the job waits for it too (it is added to :attr:`wait_for`
    before the job is named, so the job's name covers it), and
    :class:`~trainium_eks.constructs.job_sequence.JobSequence` applies the check before the job. The job is then held
    by its release until the check has completed; a check below the floor fails, its release Job fails, and the job
    is never created. A single-node job, a job on a type without EFA and a job that requests no EFA interface never
    get one. The settings live on the job chart, not on the sequence: the job's name depends on whether it waits for a
    check.

    :param problems: The subclass's collector, holding the problems of its own props.
    :param name: Base name of the job. Required.
    :param namespace: The job's namespace. Required.
    :param workload: The workload props (``image``, ``node_group``, ``script``, ``wait_for``...), and:

        - ``fabric_check``: whether the job gets its fabric check (when it applies). Default: true.
        - ``fabric_floor_fraction``: the share of the node's EFA link rate the check's all-reduce bus bandwidth must
          reach, above 0 and at most 1 (:mod:`~trainium_eks.manifests.jobs.fabric_floor`). Default: 0.25.
        - ``fabric_suspect_rounds``: how many times the check's release replaces the nodes the check names as
          suspects (below the floor with a node that cleared it) and runs it again, from 0 to 5; only on a Karpenter
          NodePool (:class:`~trainium_eks.manifests.jobs.fabric_check.FabricCheckChart`). Default: 2.
        - ``capacity``: how the release of the job (a gang of two pods or more) and of its fabric check holds all
          their nodes (:class:`~trainium_eks.manifests.jobs.gang_capacity.GangCapacity`). Default:
          ``GangCapacity()`` (3 attempts of 30 minutes, 10 minutes apart; a stall of 5 minutes restarts the gang, at
          most 3 times; the gang's Karpenter pool full of other jobs' nodes waited for up to 24 hours).
    :param queue: The Volcano queue of the fabric check (the job's own queue). Default: ``training``.
    """

    def __init__(
        self,
        problems: Problems,
        *,
        name: str,
        namespace: str,
        workload: Dict[str, Any],
        queue: Optional[str] = None,
    ) -> None:
        wait_for = workload.pop("wait_for", ())
        fabric_check = workload.pop("fabric_check", True)
        fabric_floor = workload.pop("fabric_floor_fraction", DEFAULT_FABRIC_FLOOR_FRACTION)
        suspect_rounds = workload.pop("fabric_suspect_rounds", DEFAULT_SUSPECT_ROUNDS)
        capacity = workload.pop("capacity", GangCapacity())
        check_wait_for(problems, wait_for)
        check_capacity(problems, "capacity", capacity)
        check_bool(problems, "fabric_check", fabric_check)
        check_fabric_floor(problems, "fabric_floor_fraction", fabric_floor)
        check_integer(problems, "fabric_suspect_rounds", suspect_rounds, minimum=0, maximum=MAX_SUSPECT_ROUNDS)
        self.workload = DistributedWorkload.from_props(problems, name=name, namespace=namespace, **workload)
        super().__init__(name, namespace=namespace, wait_for=wait_for)
        self.capacity = capacity
        self.node_pool = self.workload.node_group.node_pool
        self.nodes = self.workload.nodes
        self.processes_per_node = self.workload.processes_per_node
        self.fabric_check: Optional[FabricCheckChart] = None
        """The job's fabric check, applied before it by ``JobSequence.add`` (None: the job gets none)."""
        self._fabric = fabric_check is True and fabric_check_applies(self.workload)
        self._fabric_floor = fabric_floor
        self._suspect_rounds = suspect_rounds
        self._fabric_queue = queue

    def add_job(self, manifest: Mapping[str, Any], resolve: Optional[Callable[[Any], Any]]) -> None:
        """Name the job and add it (:meth:`JobChart.add_job`); with a fabric check, first make the check (named after
        its own spec and ``manifest``, the job's spec less the wait), add it to the waits, then label the check with
        the job's name."""
        if not self._fabric:
            super().add_job(manifest, resolve)
            return
        check = FabricCheckChart(
            workload=self.workload,
            queue=self._fabric_queue,
            floor_fraction=self._fabric_floor,
            suspect_rounds=self._suspect_rounds,
            capacity=self.capacity,
            wait_for=self.wait_for,
            gated_spec=manifest,
            resolve=resolve,
        )
        self.wait_for = self.wait_for + (check.ref,)
        super().add_job(manifest, resolve)
        check.label_for(self.job_name)
        self.fabric_check = check
