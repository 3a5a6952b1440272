"""FabricCheckChart: a collective benchmark across a job's nodes, as a Volcano Job, before the job itself runs.

Every multi-node job chart of the library on EFA nodes (``VolcanoJobChart``, ``TrainJobChart``, ``PyTorchJobChart``
with ``nodes > 1`` and EFA interfaces requested) makes one (:attr:`DistributedJobChart.fabric_check
<trainium_eks.manifests.jobs.distributed_job_chart.DistributedJobChart.fabric_check>`), and
:class:`~trainium_eks.constructs.job_sequence.JobSequence` applies it first: the check waits for what the job waits
for, the job waits for the check too, so its release creates it only once the check has completed (a check that
failed fails the release, and the job is never created). The check itself is always a Volcano Job, whatever the
operator of the job it guards.

Sources read at the pinned tags (``trainium_eks.facts.versions``):

- **Volcano v1.15.1 plugins** (``pkg/controllers/job/plugins``). ``ssh``: at job creation it makes the Secret
  ``<job>-ssh`` (a fresh 2048-bit RSA key: ``id_rsa``, ``id_rsa.pub``, ``authorized_keys`` = the public key, and
  ``config`` with ``StrictHostKeyChecking no``, ``UserKnownHostsFile /dev/null`` and one ``Host <job>-<task>-<i>`` /
  ``HostName <job>-<task>-<i>.<job>`` / ``Port 22`` per pod); each pod gets it as the volume ``<job>-ssh``, mounted
  (``subPath .ssh``, mode 0600) at ``--ssh-key-file-path``, default ``/root/.ssh`` (``ssh/ssh.go``, ``ssh/const.go``):
  so the container runs as root and starts its own ``sshd``. ``svc``: the headless Service ``<job>`` (with
  ``--publish-not-ready-addresses``), ``hostname``/``subdomain`` of each pod, the ConfigMap ``<job>-svc`` mounted at
  ``/etc/volcano`` and the variables ``VC_NODE_HOSTS`` (``<job>-node-0.<job>,<job>-node-1.<job>,...``) and
  ``VC_NODE_NUM``, and a NetworkPolicy admitting only the job's own pods (``svc/svc.go``, ``svc/const.go``). ``env``:
  ``VC_TASK_INDEX``, the pod's index (``env/env.go``). The webhook only checks that the plugins exist
  (``pkg/webhooks/admission/jobs/validate/admit_job.go`` ``validateJobCreate``); the pod volumes ``<job>-ssh`` and
  ``<job>-svc`` must be DNS labels, which the job's base name of at most 28 characters keeps them.
- **Volcano policies** (``pkg/controllers/job/job_controller_util.go`` ``applyPolicies``): a failed pod's event
  ``PodFailed`` carries its first container's exit code (``job_controller_handler.go`` ``updatePod``), and the
  first of the task's policies that matches the event or the exit code decides. The webhook refuses a policy with
  both, exit code 0 and a repeated exit code (``validate/util.go`` ``validatePolicies``). ``TerminateJob`` ends the
  job ``Terminated``, which the release program reads as failed.
- **nccom-test** (aws-neuronx-tools; Neuron SDK ``tools/neuron-sys-tools/nccom-test.rst`` at 81ce03a): multi-node
  runs go through MPI with passwordless ssh to every host, ``--hosts`` listing them and ``NEURON_RT_ROOT_COMM_ID`` set
  to the first host's IP address and a free port; the invoking host "should usually be one of the provided hosts".
  The invocation is aws-k8s-tester's (aws/aws-k8s-tester 9c7b987 ``test/cases/neuron/manifests/
  multi-node-test-neuron.yaml``): the hosts' IP addresses from ``getent hosts``, ``CCOM_SOCKET_IFNAME=eth0``,
  ``NEURON_RT_ROOT_COMM_ID=<host 0>:63182``, ``nccom-test -r <cores x nodes> -N <nodes> -b 8 -e 2G -f 2 -n 5 -w 5
  -d fp32 allr --hosts ... --data-collector-host <launcher's IP> --data-collector-port 60006``; here with
  ``--non-interactive`` and ``--report-to-json-file`` (both in the guide), and launched on node 0 instead of a
  separate launcher pod, so node 0's IP address is the data collector's: the guide's default, "current host", is a
  name the other hosts may not resolve (only ``<job>-node-<i>.<job>`` is a DNS name, Volcano's ``svc`` plugin).
- **The Neuron DLC** (aws-neuron/deep-learning-containers tag 2.29.1, 12641304, ``pytorch/training/2.9.0/
  Dockerfile.neuronx``, the base of ``images/bert-pretrain``): Open MPI 4.1.5 built with
  ``--enable-orterun-prefix-by-default``, ``openmpi-bin`` and ``openssh-server`` with ``/var/run/sshd``,
  ``StrictHostKeyChecking no`` and ``StrictModes no``; aws-neuronx-tools 2.29.22 (``nccom-test``, on ``PATH`` in
  ``/opt/aws/neuron/bin``); the EFA installer's libfabric in ``/opt/amazon/efa`` (``fi_info`` off ``PATH``). It runs
  as root. So the Trainium check runs in the job's own image.
- **nccl-tests** on NVIDIA EFA types: the training images of the library have no nccl-tests, MPI or sshd, so the
  check runs the published image :data:`~trainium_eks.facts.versions.NCCL_TESTS` (its source there), as
  aws-k8s-tester's ``test/cases/nvidia/manifests/mpi-job-nccl-test-multi-node.yaml`` runs it: ``mpirun
  --allow-run-as-root --tag-output -np <gpus x nodes> -bind-to none -map-by slot -x ... --mca pml ^cm,ucx --mca btl
  tcp,self --mca btl_tcp_if_exclude lo,docker0,veth_def_agent all_reduce_perf -b 8 -e 2G -f 2 -c 1 -n 10``, with
  ``NCCL_DEBUG=INFO`` so that the log says which network carried the traffic.
- **Open MPI as root**: ``OMPI_ALLOW_RUN_AS_ROOT=1`` with ``OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`` (Open MPI 4.0.2 and
  later, open-mpi/ompi PR #6911) lets nccom-test's own ``mpirun`` run as root.

What the pods do (:func:`fabric_script`): every pod first runs the EFA self-check of the training containers
(:func:`~trainium_eks.manifests.jobs.distributed_workload.efa_self_check`), writes its environment to
``/etc/environment`` (ssh sessions get it through ``pam_env``, so the ranks MPI starts over ssh see the job's variables
and ``PATH``), writes its node's name to :data:`NODE_FILE`, and starts ``sshd``. Node 0 waits (at most
:data:`PEER_WAIT_SECONDS`) until it can ssh to every peer, reads their nodes' names, then runs the fabric program
(:mod:`~trainium_eks.manifests.jobs.fabric_program`, from the namespace's ConfigMap :data:`PROGRAM_CONFIG_MAP`,
:class:`FabricProgramChart`) around the benchmark under ``timeout`` :data:`BENCHMARK_TIMEOUT_SECONDS`; the program
prints the result line (:data:`~trainium_eks.core.conventions.FABRIC_RESULT_MARKER`) and exits 0 above the floor. Node 0
then writes its exit status to :data:`DONE_FILE` on every peer over ssh and exits with it; each peer exits with the
status node 0 wrote (0 when node 0 passed; another after :data:`PEER_EXIT_DELAY_SECONDS`, so that node 0 ends first), or
1 when none came within :data:`REPORT_WAIT_SECONDS`. The pods' ``activeDeadlineSeconds`` (:data:`POD_DEADLINE_SECONDS`,
image pulls included) bounds a pod that hangs all the same: Volcano has no deadline of a whole job, so a pod past it
fails (``DeadlineExceeded``), the job restarts as for any failed pod, and the whole check runs at most :data:`MAX_RETRY`
attempts of :data:`POD_DEADLINE_SECONDS`, 4 hours, on its nodes (:mod:`~trainium_eks.manifests.jobs.job_deadline` cites
the kubelet's and Volcano's source).

**Failures and retries.** A retry reruns the benchmark on the same nodes (a ``RestartJob`` recreates the pods; the
nodes stay), so it helps only with what passes: a peer slow to start, a benchmark that could not bootstrap. Hence
``maxRetry`` :data:`MAX_RETRY` (two attempts) with ``PodFailed``/``PodEvicted`` -> ``RestartJob``, and a verdict that
another run on the same nodes would repeat ends the job at once: exit 3 (below the floor), 4 (the transport is not
EFA), 6 (suspect nodes named) and 78 (a pod's EFA self-check) -> ``TerminateJob``. The job then ends ``Terminated``
(or ``Failed`` after its attempts), the release of the job it guards fails, and so does every release after it; the
guarded job is never created and holds nothing. To try again, replace the nodes (or fix what the message says) and
deploy a change that renames the job or its check: CloudFormation then creates the new ones and deletes the failed
ones (a deploy without a change applies nothing again).

**Suspect nodes.** Below the floor on three nodes or more, node 0 measures pairs of the nodes
(:func:`~trainium_eks.manifests.jobs.fabric_program.bisect`, each pair run under :data:`PAIR_TIMEOUT_SECONDS`, at
most :data:`~trainium_eks.manifests.jobs.fabric_program.MAX_PAIR_RUNS` runs, :data:`BISECTION_SECONDS` in all, which
the peers' wait for the verdict includes) and, when it finds nodes below the floor with a node that cleared it, exits
6 with the pairs and the suspects (their task indices: pod ``<check>-node-<i>``) in its container's termination
message (:data:`TERMINATION_LOG`; Volcano keeps a terminated job's failed pods, ``PodRetainPhaseSoft`` in
volcano-sh/volcano v1.15.1 ``pkg/controllers/job/state/running.go``; the kubelet copies at most 4 KiB of the file into
the pod's status, kubernetes v1.36.3 ``pkg/kubelet/kuberuntime/kuberuntime_container.go``). The check's release reads
it: on a Karpenter NodePool it taints each suspect's node ``trainium-eks/fabric-suspect`` (``NoSchedule``), holds new
nodes and runs the check again, up to ``suspect_rounds`` times
(:mod:`~trainium_eks.manifests.jobs.job_release_program`); on node groups it names them and fails.

The job and its pods carry :data:`~trainium_eks.core.conventions.FABRIC_CHECK_LABEL` with the guarded job's name, so
``python -m trainium_eks fabric`` finds them. The job's name is ``<base>-fabric-<hash>``: ``<base>`` is the
guarded job's base name (cut to fit 28 characters with ``-fabric``), the hash covers the check's spec and the guarded
job's own spec (less the wait for the check), so a changed job gets a fresh check, on the nodes it will run on.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from trainium_eks.core.conventions import FABRIC_CHECK_LABEL, FABRIC_RESULT_MARKER
from trainium_eks.core.validation import (
    ConfigurationError,
    Problems,
    check_dns_label,
    check_integer,
    check_label_value,
)
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import Accelerator
from trainium_eks.manifests.addons.volcano_queue import DEFAULT_QUEUE
from trainium_eks.manifests.audit_exceptions import SSHD_KEEPS_CAPABILITIES, checkov_skips, worker_skips
from trainium_eks.manifests.jobs import fabric_program, job_naming
from trainium_eks.manifests.jobs.distributed_workload import (
    EFA_SELF_CHECK_EXIT,
    RUNTIME_DEFAULT_SECCOMP,
    DistributedWorkload,
    efa_self_check,
)
from trainium_eks.manifests.jobs.fabric_floor import (
    DEFAULT_FABRIC_FLOOR_FRACTION,
    check_fabric_floor,
    fabric_floor_gbps,
)
from trainium_eks.manifests.jobs.gang_capacity import GangCapacity, check_capacity
from trainium_eks.manifests.jobs.job_chart import JobChart, check_wait_for
from trainium_eks.manifests.jobs.job_deadline import MAX_DEADLINE_SECONDS, volcano_bound_seconds
from trainium_eks.manifests.jobs.job_release import held_annotations, is_held, kubelet_literal
from trainium_eks.manifests.jobs.job_release_program import (
    DEFAULT_SUSPECT_ROUNDS,
    MAX_SUSPECT_ROUNDS,
    SUSPECT_ROUNDS_ANNOTATION,
)
from trainium_eks.manifests.jobs.mounted_program import MountedProgram, MountedProgramChart, program_source

VOLCANO_JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
TASK = "node"
"""The check's one task: pods ``<job>-node-<i>``, as the training job's (``VC_NODE_HOSTS`` names them)."""
CONTAINER = "fabric"

FABRIC_PROGRAM = MountedProgram(
    name="fabric-program",
    file="fabric_program.py",
    mount="/opt/trainium-eks/fabric",
    source=program_source(Path(__file__).parent / "fabric_program.py"),
)
"""The fabric program (:mod:`~trainium_eks.manifests.jobs.fabric_program`, code only: :func:`program_source`), which
node 0 of a check runs from the namespace's ConfigMap (:class:`FabricProgramChart`): in every check's template it
would be escaped three times over (24 KB of program took a check to 75 KB)."""

FABRIC_PROGRAM_SOURCE = FABRIC_PROGRAM.source
PROGRAM_CONFIG_MAP = FABRIC_PROGRAM.config_map
PROGRAM_MOUNT = FABRIC_PROGRAM.mount
PROGRAM_PATH = FABRIC_PROGRAM.path

NAME_SUFFIX = "-fabric"
GATED_PLACEHOLDER = "__GATED_JOB_NAME__"
"""Stands for the guarded job's name in the check's spec while the check is named (the guarded job's name depends on
the check's, through its wait)."""

MAX_RETRY = 2
"""Attempts of a check: one restart after a failure another attempt may not repeat."""
TERMINAL_EXIT_CODES: Tuple[int, ...] = (
    fabric_program.BELOW_FLOOR,
    fabric_program.NOT_EFA,
    fabric_program.SUSPECT_NODES,
    EFA_SELF_CHECK_EXIT,
)
"""Exit statuses that end the check at once (``TerminateJob``): below the floor (3), not EFA (4), suspect nodes named
(6), a pod's EFA self-check (78). Another attempt on the same nodes would say the same."""

PEER_WAIT_SECONDS = 900
"""How long node 0 waits to reach every peer's sshd (their image pulls, DNS of the headless Service)."""
BENCHMARK_TIMEOUT_SECONDS = 1800
"""How long the benchmark may run on every node (``timeout``; exit 124, a benchmark failure)."""
PAIR_TIMEOUT_SECONDS = 240
"""How long the benchmark may run on a pair of nodes while the check bisects (the same sweep on two nodes)."""
KILL_AFTER_SECONDS = 60
"""``timeout --kill-after``: how long a benchmark past its time has to stop before it is killed."""
BISECTION_SECONDS = fabric_program.MAX_PAIR_RUNS * (PAIR_TIMEOUT_SECONDS + KILL_AFTER_SECONDS)
"""The longest a bisection takes (:func:`~trainium_eks.manifests.jobs.fabric_program.bisect`): its runs, each at most
its timeout and the kill's grace."""
REPORT_WAIT_SECONDS = PEER_WAIT_SECONDS + BENCHMARK_TIMEOUT_SECONDS + KILL_AFTER_SECONDS + BISECTION_SECONDS + 300
"""How long a peer waits for node 0's verdict before it fails."""
POD_DEADLINE_SECONDS = 2 * 3600
"""``activeDeadlineSeconds`` of each pod by default: a bound on a hung pod, image pulls and all waits included (its
waits, :data:`REPORT_WAIT_SECONDS`, take 101 minutes at most)."""
MIN_POD_DEADLINE_SECONDS = REPORT_WAIT_SECONDS + 600
"""The shortest pod deadline a check takes: a peer's longest wait for the verdict, and ten minutes more (an image pull
longer than that needs a longer deadline)."""
SSHD = "/usr/sbin/sshd"
SSHD_RUN_DIR = "/run/sshd"
"""sshd's privilege separation directory (the DLC makes ``/var/run/sshd``, the same on Ubuntu)."""
ENVIRONMENT_FILE = "/etc/environment"
"""Read by ``pam_env`` for every ssh session (Ubuntu's sshd runs with ``UsePAM yes``)."""
WORK_DIR = "/run/trainium-eks-fabric"
"""The check's own folder in each pod (made by its script, beside sshd's): the verdict and the benchmark's report."""
DONE_FILE = f"{WORK_DIR}/done"
"""Where node 0 writes its exit status on each peer."""
NODE_FILE = f"{WORK_DIR}/node"
"""Where each pod writes the name of its node (:data:`NODE_NAME_ENV`), which node 0 reads over ssh and gives the
program (``--node-names``): the summary names each suspect's node, whose pod Volcano may have deleted by the time
the check's release reads it."""
NODE_NAME_ENV = "TRAINIUM_EKS_NODE_NAME"
"""The pod's node (the downward API's ``spec.nodeName``)."""
PEER_EXIT_DELAY_SECONDS = 120
"""How long a peer waits before it exits with node 0's failed verdict: node 0 exits first, so Volcano terminates the
check on node 0's exit status and keeps node 0's pod, with its termination message (it deletes the pods still
running: volcano-sh/volcano v1.15.1 ``pkg/controllers/job/job_controller_actions.go`` ``killJob``)."""
SSHD_CAPABILITIES = (
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "NET_BIND_SERVICE",
    "SETGID",
    "SETUID",
    "SYS_CHROOT",
)
"""The capabilities a fabric check container keeps (it drops all others): the container runtime's default set
(containerd ``pkg/oci/spec.go`` ``defaultUnixCaps``) less ``MKNOD``, ``NET_RAW``, ``SETFCAP`` and ``SETPCAP``, for its
``sshd``, which runs as root (Volcano's ssh plugin mounts the
keys at ``/root/.ssh``): a root sshd always chroots its pre-authentication child and drops it to an unprivileged user,
and a failure is fatal (openssh-portable V_10_5_P1 ``sshd-auth.c``: ``chroot``, ``setgroups``, ``permanently_set_uid``:
``SYS_CHROOT``, ``SETGID``, ``SETUID``); it kills that child (``sshd-session.c``: ``KILL``); an sshd built with Linux
audit exits when it cannot write audit records (``audit-linux.c``: ``AUDIT_WRITE``); port 22 is privileged
(``NET_BIND_SERVICE``); and the pods write ``/etc/environment`` and generate host keys (the file capabilities). The
benchmark itself needs none, as a training container (``worker_security``)."""

NEURON_ROOT_COMM_PORT = 63182
"""Port of ``NEURON_RT_ROOT_COMM_ID`` on node 0 (aws-k8s-tester's) for the run on every node; a bisection's pair runs
take the next ports, one each (:func:`~trainium_eks.manifests.jobs.fabric_program.run_on`)."""
NCCOM_DATA_COLLECTOR_PORT = 60006
"""Port of nccom-test's data collector on node 0 (nccom-test.rst's default, which aws-k8s-tester passes explicitly), the
same way."""
NCCOM_REPORT = f"{WORK_DIR}/nccom-test-results.json"
TERMINATION_LOG = "/dev/termination-log"
"""Where the program writes its summary: the container's ``terminationMessagePath`` (Kubernetes' default), which the
kubelet copies into the pod's status (at most 4 KiB), where the check's release reads the suspects."""
NCCL_TESTS_BINARY = "/opt/nccl-tests/build/all_reduce_perf"
MAX_BYTES = "2G"

ENVIRONMENT_PREFIXES = ("FI_", "NCCL_", "NEURON_", "CCOM_", "OMPI_", "XLA_")
ENVIRONMENT_NAMES = ("PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "OPAL_PREFIX", "PMIX_MCA_gds")
"""What each pod writes to ``/etc/environment`` (those set), for the processes MPI starts over ssh."""


def fabric_check_applies(workload: DistributedWorkload) -> bool:
    """Whether a job of ``workload`` gets a fabric check: more than one node, EFA interfaces requested on a node
    group that has them, and Neuron or NVIDIA devices (a benchmark to run: nccom-test or nccl-tests)."""
    return (
        workload.nodes > 1
        and workload.node_group.efa_interfaces > 0
        and workload.efa_interfaces > 0
        and workload.accelerator in (Accelerator.NEURON, Accelerator.NVIDIA)
    )


def fabric_base_name(base: str) -> str:
    """The check's base name for a job of base name ``base``: ``<base>-fabric``, ``base`` cut to keep 28 characters
    (:data:`~trainium_eks.manifests.jobs.job_naming.BASE_NAME`)."""
    return base[: 28 - len(NAME_SUFFIX)].rstrip("-") + NAME_SUFFIX


class FabricCheckChart(JobChart):
    """The fabric acceptance job of a multi-node job on EFA nodes: a Volcano Job on the job's nodes, with the job's
    devices, EFA interfaces, environment, placement and tolerations (the module docstring says what runs and why).

    - ``schedulerName: volcano``, the job's queue, one task ``node`` of one replica per node, ``minAvailable`` = nodes
      (the gang of the job itself), ``maxRetry`` :data:`MAX_RETRY`, plugins ``ssh`` (defaults: keys at
      ``/root/.ssh``), ``svc`` (``--publish-not-ready-addresses``) and ``env``;
    - policies, in order: exit 3, 4, 6 and 78 -> ``TerminateJob``, ``PodEvicted`` and ``PodFailed`` -> ``RestartJob``;
    - pods: the job's image on Neuron nodes, :data:`~trainium_eks.facts.versions.NCCL_TESTS` on NVIDIA nodes; the
      job's requests and limits (Neuron devices, EFA interfaces, GPUs, CPU and memory), environment, node selector and
      tolerations; a memory-backed ``/dev/shm``; the program's ConfigMap at :data:`PROGRAM_MOUNT`
      (:class:`FabricProgramChart`); no service account token; ``restartPolicy: Never``; ``activeDeadlineSeconds``
      ``deadline_seconds`` (the whole check: at most ``deadline_seconds`` x :data:`MAX_RETRY`, :attr:`bound_seconds`);
    - :data:`~trainium_eks.core.conventions.FABRIC_CHECK_LABEL` = the guarded job's name on the job and its pods.

    The job charts build it (``fabric_check=True``, the default); build one yourself to check a node group with a
    workload of your own, with ``gated_job`` the label's value.

    :param workload: The guarded job's workload (a job chart's ``workload``). Required.
    :param queue: Volcano queue. Default: ``training``.
    :param floor_fraction: The share of the node's EFA link rate the all-reduce bus bandwidth must reach
        (:mod:`~trainium_eks.manifests.jobs.fabric_floor`). Default: 0.25.
    :param capacity: How the check's release holds its nodes
        (:class:`~trainium_eks.manifests.jobs.gang_capacity.GangCapacity`; the job charts give theirs). Default:
        ``GangCapacity()``.
    :param wait_for: The jobs the check waits for (those the guarded job waits for). Default: none.
    :param gated_job: The guarded job's name (the label's value). Default: none: the job chart gives it with
        :meth:`label_for` once it is named.
    :param gated_spec: The guarded job's spec as hashed, less its wait for the check: what the check's name covers
        besides its own spec. Default: none.
    :param deadline_seconds: ``activeDeadlineSeconds`` of each pod, from :data:`MIN_POD_DEADLINE_SECONDS` (111
        minutes while its waits are those of the module) to 90 days. Default: :data:`POD_DEADLINE_SECONDS` (2 hours).
    :param suspect_rounds: How many times the release taints the nodes the check names as suspects, holds new ones and
        runs the check again (only on a Karpenter NodePool; see the module docstring), from 0 to 5. Default:
        :data:`DEFAULT_SUSPECT_ROUNDS` (2).
    :param resolve: Turns CDK tokens into their CloudFormation form before hashing. Default: none.
    """

    ref_kind = "vcjob"
    needs_fabric_program = True
    """Its pods mount the namespace's :class:`FabricProgramChart` (``JobSequence`` applies it first)."""

    def __init__(
        self,
        *,
        workload: DistributedWorkload,
        queue: Optional[str] = DEFAULT_QUEUE,
        floor_fraction: Any = DEFAULT_FABRIC_FLOOR_FRACTION,
        capacity: Any = None,
        wait_for: Sequence[Any] = (),
        gated_job: Optional[str] = None,
        gated_spec: Any = None,
        deadline_seconds: int = POD_DEADLINE_SECONDS,
        suspect_rounds: int = DEFAULT_SUSPECT_ROUNDS,
        resolve: Optional[Callable[[Any], Any]] = None,
    ) -> None:
        problems = Problems("fabric check")
        if not isinstance(workload, DistributedWorkload):
            raise ConfigurationError("fabric check", [f"workload={workload!r}: a DistributedWorkload"])
        queue = DEFAULT_QUEUE if queue is None else queue
        check_dns_label(problems, "queue", queue)
        check_fabric_floor(problems, "fabric_floor_fraction", floor_fraction)
        capacity = GangCapacity() if capacity is None else capacity
        check_capacity(problems, "capacity", capacity)
        check_wait_for(problems, wait_for)
        check_integer(
            problems,
            "deadline_seconds",
            deadline_seconds,
            minimum=MIN_POD_DEADLINE_SECONDS,
            maximum=MAX_DEADLINE_SECONDS,
        )
        check_integer(problems, "suspect_rounds", suspect_rounds, minimum=0, maximum=MAX_SUSPECT_ROUNDS)
        if gated_job is not None:
            check_label_value(problems, "gated_job", gated_job)
        if not fabric_check_applies(workload):
            problems.add(
                "workload",
                f"{workload.nodes} x {workload.node_group.instance_type}, {workload.efa_interfaces} EFA",
                "a job on more than one node of a Neuron or NVIDIA type with EFA, requesting EFA interfaces",
            )
        problems.raise_if_any()
        super().__init__(fabric_base_name(workload.name), namespace=workload.namespace, wait_for=wait_for)
        self.capacity = capacity
        self.node_pool = workload.node_group.node_pool
        self.workload = workload
        self.queue = queue
        self.floor_fraction = float(floor_fraction)
        self.deadline_seconds: int = deadline_seconds
        """``activeDeadlineSeconds`` of each pod (of each attempt)."""
        self.suspect_rounds: int = suspect_rounds
        """How many times the release replaces suspect nodes and runs the check again."""
        instance = workload.node_group.instance
        self.benchmark = "nccom" if workload.accelerator is Accelerator.NEURON else "nccl"
        """``nccom`` (nccom-test) on Neuron nodes, ``nccl`` (nccl-tests) on NVIDIA nodes."""
        share = workload.efa_interfaces / instance.efa_interfaces
        self.link_gbps = float(instance.efa_link_gbps) * share
        """The link rate the pods can reach: the node's EFA link rate, times the share of its EFA interfaces the job
        requests (each network card carries its part: trn1.32xlarge 8 x 100 Gbps, p5 32 x 100)."""
        self.floor_gbps = fabric_floor_gbps(instance, self.floor_fraction) * share
        """The floor in Gbps: ``floor_fraction`` of :attr:`link_gbps`
        (:func:`~trainium_eks.manifests.jobs.fabric_floor.fabric_floor_gbps`)."""
        self.image = workload.image if self.benchmark == "nccom" else versions.NCCL_TESTS.image
        self.gated_job: Optional[str] = None
        """The guarded job's name, once known."""
        self._template = self._render()
        if is_held(self._template, self.wait_for):  # always: the check is a gang
            metadata = self._template["metadata"]
            metadata["annotations"] = {
                **(metadata.get("annotations") or {}),
                **held_annotations(self.wait_for),
                **self._gang_annotations(),
                **self._suspect_annotations(),
            }
        self.job_name = job_naming.hashed_name(self.component, {"check": self._template, "job": gated_spec}, resolve)
        self.ref = f"{self.ref_kind}/{self.job_name}"
        if gated_job is not None:
            self.label_for(gated_job)

    @property
    def bound_seconds(self) -> int:
        """The longest the check may run on its nodes: :attr:`deadline_seconds` times its attempts
        (:func:`~trainium_eks.manifests.jobs.job_deadline.volcano_bound_seconds`)."""
        return volcano_bound_seconds(self.deadline_seconds, MAX_RETRY)

    def _suspect_annotations(self) -> Dict[str, str]:
        """The rounds the release gives suspects (:data:`SUSPECT_ROUNDS_ANNOTATION`), when not the default."""
        if self.suspect_rounds == DEFAULT_SUSPECT_ROUNDS:
            return {}
        return {SUSPECT_ROUNDS_ANNOTATION: str(self.suspect_rounds)}

    def label_for(self, gated_job: str) -> None:
        """Add the job, labelled with the guarded job's name ``gated_job`` (once)."""
        if self.gated_job is not None:
            raise ValueError(f"{self.job_name} already checks the fabric of {self.gated_job}")
        problems = Problems(f"fabric check {self.job_name}")
        check_label_value(problems, "gated_job", gated_job)
        problems.raise_if_any()
        self.gated_job = gated_job
        text = json.dumps(self._template).replace(GATED_PLACEHOLDER, gated_job)
        self.add_object(job_naming.with_name(json.loads(text), self.job_name))

    def _render(self) -> Dict[str, Any]:
        workload = self.workload
        labels = {
            **self.selector_labels(),
            "app.kubernetes.io/instance": job_naming.PLACEHOLDER,
            FABRIC_CHECK_LABEL: GATED_PLACEHOLDER,
        }
        pod = {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "activeDeadlineSeconds": self.deadline_seconds,
            "securityContext": dict(RUNTIME_DEFAULT_SECCOMP),
            **workload.node_group.pod_placement(),
            "containers": [
                {
                    "name": CONTAINER,
                    "image": self.image,
                    "command": ["bash", "-c", kubelet_literal(self.script())],
                    "env": [
                        *workload.environment(training=False),
                        {"name": NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    ],
                    "ports": [{"name": "ssh", "containerPort": 22}],
                    "resources": workload.resources(),
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"], "add": list(SSHD_CAPABILITIES)},
                    },
                    "volumeMounts": [
                        {"name": "dshm", "mountPath": "/dev/shm"},
                        {"name": "fabric-program", "mountPath": PROGRAM_MOUNT, "readOnly": True},
                    ],
                }
            ],
            "volumes": [
                {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                {"name": "fabric-program", "configMap": {"name": PROGRAM_CONFIG_MAP}},
            ],
        }
        policies: List[Dict[str, Any]] = [{"exitCode": code, "action": "TerminateJob"} for code in TERMINAL_EXIT_CODES]
        policies += [{"event": "PodEvicted", "action": "RestartJob"}, {"event": "PodFailed", "action": "RestartJob"}]
        task = {
            "name": TASK,
            "replicas": workload.nodes,
            "minAvailable": workload.nodes,
            "maxRetry": MAX_RETRY,
            "policies": policies,
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        "sidecar.istio.io/inject": "false",
                        **checkov_skips({**worker_skips(self.image), "CKV_K8S_25": SSHD_KEEPS_CAPABILITIES}),
                    },
                },
                "spec": pod,
            },
        }
        return {
            "apiVersion": VOLCANO_JOB_API_VERSION,
            "kind": "Job",
            "metadata": {"name": job_naming.PLACEHOLDER, "namespace": workload.namespace, "labels": dict(labels)},
            "spec": {
                "schedulerName": "volcano",
                "queue": self.queue,
                "minAvailable": workload.nodes,
                "maxRetry": MAX_RETRY,
                "plugins": {"ssh": [], "svc": ["--publish-not-ready-addresses"], "env": []},
                "tasks": [task],
            },
        }

    @property
    def ranks_per_node(self) -> int:
        """The benchmark's ranks on each node: the NeuronCores of the job's Neuron devices, or the node's GPUs."""
        workload = self.workload
        if self.benchmark == "nccl":
            return workload.node_group.gpus
        instance = workload.node_group.instance
        return workload.neuron_devices * (instance.neuron_cores // max(1, instance.neuron_devices))

    def benchmark_words(self) -> List[str]:
        """The benchmark's command with the program's placeholders for the hosts it runs on
        (:func:`~trainium_eks.manifests.jobs.fabric_program.benchmark_command`): ``timeout``, then nccom-test (``-r
        {ranks} -N {nodes} ... allr --hosts {hosts} --data-collector-host {launcher} --data-collector-port
        {collector_port}``: node 0 invokes every run, so it collects every run's data, as aws-k8s-tester's launcher
        does) or mpirun (``-np {ranks} ... --host {slots}`` and nccl-tests' all-reduce)."""
        timeout = ["timeout", f"--kill-after={KILL_AFTER_SECONDS}", "{timeout}"]
        if self.benchmark == "nccom":
            return timeout + [
                "nccom-test",
                "-r",
                "{ranks}",
                "-N",
                "{nodes}",
                "-b",
                "8",
                "-e",
                MAX_BYTES,
                "-f",
                "2",
                "-n",
                "5",
                "-w",
                "5",
                "-d",
                "fp32",
                "--non-interactive",
                "--report-to-json-file",
                NCCOM_REPORT,
                "allr",
                "--hosts",
                "{hosts}",
                "--data-collector-host",
                "{launcher}",
                "--data-collector-port",
                "{collector_port}",
            ]
        words = timeout + ["mpirun", "--allow-run-as-root", "--tag-output", "-np", "{ranks}"]
        words += ["-bind-to", "none", "-map-by", "slot"]
        for name in self.forwarded_variables():
            words += ["-x", name]
        words += ["--mca", "pml", "^cm,ucx", "--mca", "btl", "tcp,self"]
        words += ["--mca", "btl_tcp_if_exclude", "lo,docker0,veth_def_agent", "--host", "{slots}"]
        return words + self.nccl_tail()

    @staticmethod
    def nccl_tail() -> List[str]:
        """What follows mpirun's host list: nccl-tests' all-reduce, 8 B to 2 GiB by factors of 2, checked, 10
        iterations (aws-k8s-tester's)."""
        return [NCCL_TESTS_BINARY, "-b", "8", "-e", MAX_BYTES, "-f", "2", "-g", "1", "-c", "1", "-n", "10"]

    def forwarded_variables(self) -> List[str]:
        """The variables mpirun passes to every rank (``-x``): the job's environment, ``NCCL_DEBUG`` (the transport
        lines) and the image's paths and preload."""
        names = [entry["name"] for entry in self.workload.environment(training=False)]
        return names + ["NCCL_DEBUG", "PATH", "LD_LIBRARY_PATH", "LD_PRELOAD"]

    def program_words(self) -> List[str]:
        """The fabric program's arguments but ``--hosts``, which the script adds in the pod
        (:func:`~trainium_eks.manifests.jobs.fabric_program.program_arguments` with the library's result marker)."""
        return fabric_program.program_arguments(
            benchmark=self.benchmark,
            floor_gbps=self.floor_gbps,
            link_gbps=self.link_gbps,
            efa_devices=self.workload.efa_interfaces,
            benchmark_argv=self.benchmark_words(),
            marker=FABRIC_RESULT_MARKER,
            ranks_per_node=self.ranks_per_node,
            timeout_seconds=BENCHMARK_TIMEOUT_SECONDS,
            pair_timeout_seconds=PAIR_TIMEOUT_SECONDS,
            root_comm_port=NEURON_ROOT_COMM_PORT if self.benchmark == "nccom" else None,
            collector_port=NCCOM_DATA_COLLECTOR_PORT if self.benchmark == "nccom" else None,
            result_file=TERMINATION_LOG,
        )

    def script(self) -> str:
        """The bash script of every pod (:func:`fabric_script`)."""
        return fabric_script(self)


class FabricProgramChart(MountedProgramChart):
    """The ConfigMap :data:`PROGRAM_CONFIG_MAP` holding the fabric program, which every check of the namespace mounts
    at :data:`PROGRAM_MOUNT`. :class:`~trainium_eks.constructs.job_sequence.JobSequence` applies it once per namespace,
    before the checks (and their releases); apply it yourself with a check of your own.

    :param namespace: The checks' namespace. Required.
    """

    def __init__(self, *, namespace: str) -> None:
        super().__init__(FABRIC_PROGRAM, component="fabric-program", namespace=namespace)


def _quoted(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(word) for word in words)


def fabric_script(chart: FabricCheckChart) -> str:
    """The script of the check's pods: the EFA self-check, ``/etc/environment``, ``sshd``; then node 0 waits for its
    peers, runs the fabric program around the benchmark and tells the peers its exit status, which they exit with."""
    workload = chart.workload
    names = " ".join(ENVIRONMENT_NAMES) + " " + " ".join(f"${{!{prefix}@}}" for prefix in ENVIRONMENT_PREFIXES)
    ssh = "ssh -o BatchMode=yes -o ConnectTimeout=10"
    lines = efa_self_check(workload.efa_interfaces)
    lines += [
        f"for name in {names}; do",
        '  if [ -n "${!name+set}" ]; then printf \'%s="%s"\\n\' "$name" "${!name}"; fi',
        f"done > {ENVIRONMENT_FILE}",
        f"mkdir -p {SSHD_RUN_DIR} {WORK_DIR} && ssh-keygen -A > /dev/null",
        f'echo "${{{NODE_NAME_ENV}}}" > {NODE_FILE}',
        f'{SSHD} || {{ echo "fabric check: sshd did not start on $(hostname)" >&2; exit 1; }}',
        'IFS=, read -r -a hosts <<< "${VC_NODE_HOSTS}"',
        f'if [ "${{#hosts[@]}}" -ne {workload.nodes} ]; then',
        f'  echo "fabric check: VC_NODE_HOSTS names ${{#hosts[@]}} hosts, not {workload.nodes}" >&2; exit 1',
        "fi",
        'if [ "${VC_TASK_INDEX}" != 0 ]; then',
        f"  deadline=$((SECONDS + {REPORT_WAIT_SECONDS}))",
        f"  until [ -s {DONE_FILE} ]; do",
        '    if [ "${SECONDS}" -ge "${deadline}" ]; then',
        f'      echo "fabric check: node 0 gave no verdict within {REPORT_WAIT_SECONDS} s" >&2; exit 1',
        "    fi",
        "    sleep 5",
        "  done",
        f"  read -r code < {DONE_FILE}",
        '  echo "fabric check: node 0 finished with exit status ${code}"',
        f'  if [ "${{code}}" != 0 ]; then sleep {PEER_EXIT_DELAY_SECONDS}; fi',
        '  exit "${code}"',
        "fi",
        f"deadline=$((SECONDS + {PEER_WAIT_SECONDS}))",
        'for host in "${hosts[@]:1}"; do',
        f'  until {ssh} "${{host}}" true 2> /dev/null; do',
        '    if [ "${SECONDS}" -ge "${deadline}" ]; then',
        f'      echo "fabric check: cannot ssh to ${{host}} after {PEER_WAIT_SECONDS} s (its sshd, or the DNS of'
        " the job's Service)\" >&2",
        "      exit 1",
        "    fi",
        "    sleep 5",
        "  done",
        "done",
        f'nodes="$(cat {NODE_FILE})"',
        'nodes="${nodes:--}"',
        'for host in "${hosts[@]:1}"; do',
        f'  node="$({ssh} "${{host}}" cat {NODE_FILE})"',
        '  nodes="${nodes},${node:--}"',
        "done",
    ]
    program = (
        f'python3 {PROGRAM_PATH} --hosts="${{addresses}}" --node-names="${{nodes}}" {_quoted(chart.program_words())}'
    )
    if chart.benchmark == "nccom":
        lines += [
            'addresses=""',
            'for host in "${hosts[@]}"; do',
            '  ip="$(getent hosts "${host}" | awk \'{print $1; exit}\')"',
            '  if [ -z "${ip}" ]; then echo "fabric check: ${host} does not resolve" >&2; exit 1; fi',
            '  addresses="${addresses:+${addresses},}${ip}"',
            "done",
            "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
            program,
        ]
    else:
        lines += ['addresses="${VC_NODE_HOSTS}"', "export NCCL_DEBUG=INFO", program]
    lines += [
        "code=$?",
        'for host in "${hosts[@]:1}"; do',
        f'  {{ {ssh} "${{host}}" "echo ${{code}} > {DONE_FILE}" || echo "fabric check: could not tell ${{host}} the'
        ' verdict" >&2; } &',
        "done",
        "wait",
        'exit "${code}"',
    ]
    return "\n".join(lines)
