"""VolcanoJobChart: a distributed PyTorch job on a node group, as the Volcano Job TorchX would generate."""

from __future__ import annotations

from enum import Enum
from typing import Any, Callable, Optional

from trainium_eks.core.conventions import DEFAULT_NAMESPACE
from trainium_eks.core.validation import Problems, check_dns_label, coerce_enum
from trainium_eks.manifests.addons.etcd import CLIENT_PORT
from trainium_eks.manifests.addons.etcd import SERVICE_NAME as ETCD_SERVICE
from trainium_eks.manifests.addons.volcano_queue import DEFAULT_QUEUE
from trainium_eks.manifests.audit_exceptions import checkov_skips, worker_skips
from trainium_eks.manifests.jobs import job_naming
from trainium_eks.manifests.jobs.distributed_job_chart import DistributedJobChart
from trainium_eks.manifests.jobs.distributed_workload import MASTER_PORT, NodeContract
from trainium_eks.manifests.jobs.job_deadline import DEFAULT_DEADLINE_SECONDS, check_deadline, volcano_bound_seconds

VOLCANO_JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
TASK = "node"
"""The job's one task: its pods are ``<job>-node-<i>``, host names of the job's headless Service (svc plugin)."""


class Rendezvous(Enum):
    """torchrun rendezvous backends.

    ``C10D`` (the default, as TorchX's and PyTorch's documentation recommend): torchrun's own TCP store on node 0
    (``localhost:29500`` there, ``<job>-node-0.<job>:29500`` elsewhere, a host name of Volcano's svc plugin); nothing
    else runs. ``ETCD``: ``--rdzv_backend etcd --rdzv_endpoint etcd-server:2379``, as the tutorial did; the job
    sequence then deploys :class:`~trainium_eks.manifests.addons.etcd.EtcdChart` in the namespace, and the image needs
    python-etcd (pinned with urllib3 in ``images/bert-pretrain`` and ``versions.ETCD_CLIENT``). etcd's v2 API, which
    torch's etcd rendezvous uses, exists up to etcd 3.5 (3.6 removed it).
    """

    ETCD = "etcd"
    C10D = "c10d"


class VolcanoJobChart(DistributedJobChart):
    """A distributed PyTorch job: one Volcano Job of one task with a replica per node, a launcher in every pod.

    It renders the ``batch.volcano.sh/v1alpha1`` Job that TorchX's Kubernetes scheduler generates for the
    tutorial, with what TorchX cannot express, and with one task of N replicas instead of N tasks of one (the same
    pods; the manifest no longer grows with the node count):

    - ``schedulerName: volcano``, the queue, the task ``node`` with one replica per node, ``minAvailable`` = nodes
      (gang scheduling: every node or none), ``maxRetry`` with ``PodEvicted``/``PodFailed`` -> ``RestartJob``, the
      svc plugin (``--publish-not-ready-addresses``: pods ``<job>-node-<i>`` resolve as ``<job>-node-<i>.<job>``
      before they are ready) and the env plugin (``VC_TASK_INDEX``: the pod's node index);
    - ``torchrun --nnodes N --nproc_per_node P --rdzv_backend ... --rdzv_endpoint ... --rdzv_id <job name>``, wrapped
      in ``neuron_parallel_compile`` in precompile mode; or Composer's launcher with the node index and node 0's
      address (``launcher="composer"``);
    - per node, ``NEURON_CC_FLAGS=--cache_dir=<cache root>/<cache set>_<node index>`` from ``VC_TASK_INDEX`` (the
      tutorial's per-replica compile cache);
    - everything else of :class:`~trainium_eks.manifests.jobs.distributed_workload.DistributedWorkload` (environment
      contract, devices, CPU and memory requests, ``/dev/shm``, claims, tolerations, node selector, service account);
    - ``activeDeadlineSeconds`` = ``deadline_seconds`` on every pod. A Volcano Job has no deadline of its own, so this
      is the bound: a pod active on its node longer fails (``DeadlineExceeded``), Volcano restarts the whole job as for
      any failed pod, and the job fails after ``max_retries`` attempts (one for 0); the job runs at most
      ``deadline_seconds`` x attempts on its nodes (:attr:`bound_seconds`;
      :mod:`~trainium_eks.manifests.jobs.job_deadline` cites the kubelet's and Volcano's source). A restarted job starts
      its script again, so a script that resumes from its checkpoints continues where the attempt stopped.

    The job's name is ``<name>-<hash of the rendered spec>`` (:attr:`job_name`): changing any setting yields a new
    job, never an update of an immutable pod template.

    :param name: Base name, a DNS label of at most 28 characters. Required.
    :param rendezvous: ``Rendezvous`` or its value (``"etcd"``). Default: ``Rendezvous.C10D``.
    :param namespace: Default: ``training``.
    :param queue: Volcano queue. Default: ``training``.
    :param deadline_seconds: ``activeDeadlineSeconds`` of each pod, so of each attempt, from 60 seconds to 90 days.
        Default: :data:`~trainium_eks.manifests.jobs.job_deadline.DEFAULT_DEADLINE_SECONDS` (24 hours).
    :param resolve: Turns CDK tokens into their CloudFormation form before hashing (``Stack.resolve``). Default:
        none (values are hashed as they are).
    :param wait_for: The jobs to wait for (their charts, or ``job/<name>``, ``vcjob/<name>``...): the job is held until
        they have completed (:class:`~trainium_eks.constructs.job_sequence.JobSequence`). Default: none.
    :param fabric_check: On more than one EFA node, run a collective benchmark across the job's nodes first and hold
        the job until it passed (:attr:`fabric_check`, a
        :class:`~trainium_eks.manifests.jobs.fabric_check.FabricCheckChart` in ``queue``; see
        :class:`~trainium_eks.manifests.jobs.distributed_job_chart.DistributedJobChart`). Default: true.
    :param fabric_floor_fraction: The share of the EFA link rate the check must reach. Default: 0.25.
    :param workload: The job's other props (``image``, ``node_group``, ``script``, ``args``, ``nodes``,
        ``processes_per_node``, ``launcher``, ``cache_set``, ``precompile``, ``volumes``, ``env``, ...),
        as documented on
        :class:`~trainium_eks.manifests.jobs.distributed_workload.DistributedWorkload`.
    """

    ref_kind = "vcjob"

    def __init__(
        self,
        *,
        name: str,
        rendezvous: Any = Rendezvous.C10D,
        namespace: str = DEFAULT_NAMESPACE,
        queue: str = DEFAULT_QUEUE,
        deadline_seconds: int = DEFAULT_DEADLINE_SECONDS,
        resolve: Optional[Callable[[Any], Any]] = None,
        **workload: Any,
    ) -> None:
        problems = Problems(f"training job {name!r}")
        chosen = coerce_enum(problems, "rendezvous", rendezvous, Rendezvous)
        check_dns_label(problems, "queue", queue)
        check_deadline(problems, "deadline_seconds", deadline_seconds)
        super().__init__(problems, name=name, namespace=namespace, workload=workload, queue=queue)
        self.rendezvous: Rendezvous = chosen
        self.deadline_seconds: int = deadline_seconds
        """``activeDeadlineSeconds`` of each pod (of each attempt)."""

        watched = self.workload.progress is not None
        task = {
            "name": TASK,
            "replicas": self.nodes,
            "minAvailable": self.nodes,
            "maxRetry": self.workload.max_retries,
            "policies": [
                {"event": "PodEvicted", "action": "RestartJob"},
                {"event": "PodFailed", "action": "RestartJob"},
            ],
            "template": {
                "metadata": {
                    "labels": {
                        **self.selector_labels(),
                        "app.kubernetes.io/instance": job_naming.PLACEHOLDER,
                        **self.workload.pod_labels(),
                    },
                    "annotations": {
                        "sidecar.istio.io/inject": "false",
                        **checkov_skips(worker_skips(self.workload.image, liveness_probe=watched)),
                    },
                },
                "spec": {
                    **self.workload.pod_spec("worker", _volcano_contract(chosen)),
                    "activeDeadlineSeconds": deadline_seconds,
                },
            },
        }
        self.add_job(
            {
                "apiVersion": VOLCANO_JOB_API_VERSION,
                "kind": "Job",
                "metadata": {
                    "name": job_naming.PLACEHOLDER,
                    "namespace": namespace,
                    "labels": {**self.selector_labels(), "app.kubernetes.io/instance": job_naming.PLACEHOLDER},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "queue": queue,
                    "minAvailable": self.nodes,
                    "maxRetry": self.workload.max_retries,
                    "plugins": {"svc": ["--publish-not-ready-addresses"], "env": []},
                    "tasks": [task],
                },
            },
            resolve,
        )

    @property
    def bound_seconds(self) -> int:
        """The longest the job may run on its nodes: :attr:`deadline_seconds` times its attempts
        (:func:`~trainium_eks.manifests.jobs.job_deadline.volcano_bound_seconds`)."""
        return volcano_bound_seconds(self.deadline_seconds, self.workload.max_retries)

    @property
    def needs_etcd(self) -> bool:
        """Whether the job rendezvouses through the etcd server of its namespace."""
        return self.rendezvous is Rendezvous.ETCD


def _volcano_contract(rendezvous: Rendezvous) -> NodeContract:
    """Node index from Volcano's env plugin; node 0 is ``localhost`` on itself and ``<job>-node-0.<job>`` elsewhere."""
    node_zero = f"{job_naming.PLACEHOLDER}-{TASK}-0.{job_naming.PLACEHOLDER}"
    setup = [f'if [ "${{VC_TASK_INDEX}}" = 0 ]; then NODE_ZERO=localhost; else NODE_ZERO={node_zero}; fi']
    if rendezvous is Rendezvous.ETCD:
        endpoint = f"{ETCD_SERVICE}:{CLIENT_PORT}"
    else:
        endpoint = f"${{NODE_ZERO}}:{MASTER_PORT}"
    rdzv = ["--rdzv_backend", rendezvous.value, "--rdzv_endpoint", endpoint, "--rdzv_id", job_naming.PLACEHOLDER]
    return NodeContract(node_index="${VC_TASK_INDEX}", master_addr="${NODE_ZERO}", torchrun_args=rdzv, setup=setup)
