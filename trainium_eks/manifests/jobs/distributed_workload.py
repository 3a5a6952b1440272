"""DistributedWorkload: what every distributed training job of the library runs on each node, whatever the operator.

The Volcano job (:mod:`~trainium_eks.manifests.jobs.volcano_job`), the Kubeflow TrainJob and the Kubeflow PyTorchJob
differ in their custom resource and in how a pod learns its node index and the address of node 0; they share
everything else, here: the checked topology (nodes, processes, devices), the environment contract, the resources,
the volumes, the placement and the launch command.
"""

from __future__ import annotations

import inspect
import re
import shlex
from dataclasses import dataclass
from enum import Enum
from typing import Any, Dict, List, Optional, Sequence

from trainium_eks.core.conventions import (
    DEFAULT_SERVICE_ACCOUNT,
    EFA_RESOURCE,
    EGRESS_INTERNET_LABEL,
    GPU_RESOURCE,
    NEURON_DEVICE_RESOURCE,
    SHARED_MOUNT,
)
from trainium_eks.core.validation import (
    Problems,
    check_absolute_path,
    check_bool,
    check_dns_label,
    check_dns_subdomain,
    check_image_reference,
    check_integer,
    check_number,
    check_pattern,
    check_string_map,
    check_strings,
    check_text,
    coerce_enum,
    is_integer,
    nearest,
)
from trainium_eks.facts.catalog import Accelerator
from trainium_eks.manifests.jobs import job_naming
from trainium_eks.manifests.jobs.graceful_stop import GracefulStop, check_graceful_stop
from trainium_eks.manifests.jobs.progress_watch import PROGRESS_FILE_ENV, ProgressWatch, check_progress, liveness_probe
from trainium_eks.manifests.jobs.run_directory import RUN_DIRECTORY, run_mount, run_volume
from trainium_eks.manifests.jobs.topology import NodeGroupTopology

LIBRARY_ENV_PREFIX = "TRAINIUM_EKS_"
"""The prefix of the environment variables the library sets in a training container, which ``env`` may not set."""
SHM_MOUNT = "/dev/shm"
"""Where a worker container mounts its memory-backed volume (PyTorch's DataLoader workers and the collectives' shared
memory use it)."""
LOCAL_CACHE_ROOT = "/var/cache/neuron-compile-cache"
"""Compile cache root when no shared volume is mounted at /data (node-local, lost with the node)."""

DEFAULT_RESOURCE_FRACTION = 0.5
"""Share of a node's vCPUs and memory a training pod requests by default."""

MASTER_PORT = 29500
"""Port of the rendezvous store on node 0 (torchrun's c10d default, the Kubeflow operators' default)."""

UVERBS_DIR = "/dev/infiniband"
"""Where a pod sees the EFA devices the EFA device plugin gave it, one ``uverbs<N>`` per interface (EKS user guide,
node-efa.html; the plugin's DaemonSet mounts ``/dev/infiniband/``: aws/eks-charts ``aws-efa-k8s-device-plugin``)."""

FI_INFO = "/opt/amazon/efa/bin/fi_info"
"""libfabric's ``fi_info`` as the EFA installer puts it in the images: not on the Neuron DLC's ``PATH``
(aws-neuron/deep-learning-containers 2.29.1 ``pytorch/training/2.9.0/Dockerfile.neuronx`` adds only
``/opt/aws/neuron/bin`` and ``/home/.openmpi/bin``), so it is called by its path."""

EFA_SELF_CHECK_EXIT = 78
"""Exit status of a container whose EFA self-check failed (:func:`efa_self_check`): ``EX_CONFIG`` of BSD's
``sysexits.h`` ("something was found in an unconfigured or misconfigured state"), distinct from torchrun's and the
launchers' statuses (1), the shell's (126, 127), ``timeout``'s (124), signals (128 + n) and the fabric program's (2 to
5, :mod:`~trainium_eks.manifests.jobs.fabric_program`)."""

CACHE_SET = re.compile(r"[A-Za-z0-9_-]+")
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


REMOVED_PROPS: Dict[str, str] = {
    "bf16": "the training script chooses bf16 by its own argument (args=[..., '--bf16'] for the BERT script), with "
    "torch.autocast; the XLA_DOWNCAST_BF16 it set is deprecated with torch-xla 2.x and not to be combined with "
    "autocast (Neuron's PyTorch 2.x migration guide)",
}
"""Props of the job charts removed since the last release -> what replaced them, said when one is given."""


class Launcher(Enum):
    """What starts the processes of a node.

    ``TORCHRUN``: ``torchrun`` (one process per NeuronCore or GPU), as TorchX and the Kubeflow operators expect.
    ``COMPOSER``: MosaicML Composer's launcher (``composer -n P --world_size W --node_rank R --master_addr A
    --master_port M``), which sets the ``NODE_RANK`` that Composer requires and plain ``torchrun`` does not.
    ``DIRECT``: the script (with ``python3``) or command runs once per pod and starts the processes itself (a
    launcher in the image that reads the operator's variables, such as ``images/cifar10-ddp/launch.py``).
    """

    TORCHRUN = "torchrun"
    COMPOSER = "composer"
    DIRECT = "direct"


@dataclass(frozen=True)
class NodeContract:
    """How a pod of a given job kind learns where it stands, as shell expressions evaluated in the pod.

    :param node_index: This pod's node index, 0 to nodes-1 (``${VC_TASK_INDEX}`` in a Volcano job,
        ``${PET_NODE_RANK}`` under the Kubeflow operators).
    :param master_addr: Host of node 0, as seen from this pod.
    :param torchrun_args: The ``torchrun`` arguments that say how the nodes meet (rendezvous), placed after
        ``--nnodes`` and ``--nproc_per_node``. Default: none (torchrun reads the operator's ``PET_*`` variables).
    :param setup: Shell lines run before the launcher (to compute ``master_addr``, say). Default: none.
    """

    node_index: str
    master_addr: str
    torchrun_args: Sequence[str] = ()
    setup: Sequence[str] = ()


class DistributedWorkload:
    """A checked, per-node description of a distributed training job on a node group.

    Defaults come from the node group (``TrainingNodeGroup.topology``): nodes = its node count, processes per
    node = its NeuronCores (GPUs on GPU nodes, 1 on CPU nodes), ``aws.amazon.com/neuron`` = all its devices,
    ``vpc.amazonaws.com/efa`` = all its attached interfaces, the shared claim at ``/data``. Every prop is checked
    (types, ranges, names, what the nodes have) and every problem is reported in one ``ConfigurationError``.

    What each pod gets:

    - the environment contract: ``FI_PROVIDER=efa``, ``FI_EFA_USE_DEVICE_RDMA=1``, ``FI_EFA_FORK_SAFE=1`` (EFA
      nodes); ``CCOM_SOCKET_IFNAME=eth0``, ``NEURON_RT_RESET_CORES=1``, ``XLA_TRANSFER_SEED_ASYNC=1``, and
      ``NEURON_CC_FLAGS=--cache_dir=<cache root>/<cache set>_<node index>`` set by the launch script from the pod's
      node index (Neuron nodes); then ``env``. Not ``XLA_DOWNCAST_BF16``: the training scripts choose bf16 by their
      own argument with ``torch.autocast``, and Neuron's migration guide says not to combine the two (the variable
      is deprecated with torch-xla 2.x);
    - requests and limits of Neuron devices, EFA interfaces and GPUs, CPU and memory requests of
      ``resource_fraction`` of the node (so the pods are not the first evicted);
    - a memory-backed ``/dev/shm``, the run directory with a progress watch or a graceful stop
      (:mod:`~trainium_eks.manifests.jobs.run_directory`), the claims at their mount paths, the node selector on the
      instance type and tolerations of the node group's taints, the service account;
    - no service-account token (training code never calls the Kubernetes API; EKS Pod Identity mounts its own token
      for AWS credentials: aws/amazon-eks-pod-identity-webhook ``pkg/handler/handler.go`` adds the projected volume
      ``eks-pod-identity-token`` whatever ``automountServiceAccountToken`` says), the runtime's default seccomp profile,
      no privilege escalation and no capabilities (:func:`worker_security`); with ``internet_egress``, the label that
      lets the pods open HTTPS connections outside the VPC through the training namespace's NetworkPolicies;
    - with ``progress``, the progress watch (:mod:`~trainium_eks.manifests.jobs.progress_watch`): the progress file
      and its bounds in the environment, the container's start written there first, and a liveness probe that stops
      the container when its training script's steps stop (a TrainJob's probe is its runtime's);
    - with ``graceful_stop``, the graceful stop (:mod:`~trainium_eks.manifests.jobs.graceful_stop`): the pod's
      ``terminationGracePeriodSeconds``, the stop file in the environment, and a launch script that stays process 1,
      runs the launcher in the background and turns SIGTERM into the stop file, so the training script saves a
      checkpoint at its next step and exits;
    - when the pod requests EFA interfaces, an EFA self-check before anything else runs (:func:`efa_self_check`): the
      container sees as many ``/dev/infiniband/uverbs*`` devices as it requested and libfabric lists the ``efa``
      provider (``/opt/amazon/efa/bin/fi_info -p efa``), or it exits at once with :data:`EFA_SELF_CHECK_EXIT` (78) and a
      message saying which. What that exit then does is the job's failure policy, the same as for any failed worker:
      a Volcano job's ``PodFailed -> RestartJob`` restarts the whole job, which fails once ``max_retries`` attempts
      have (volcano-sh/volcano v1.15.1 ``pkg/controllers/job/job_controller_util.go`` ``applyPolicies``: the task's
      policies, first match); a TrainJob's pod fails its child Job (``backoffLimit: 0``), and the JobSet restarts
      whole until ``failurePolicy.maxRestarts`` (kubernetes-sigs/jobset v0.12.0 ``pkg/controllers/failure_policy.go``);
      a PyTorchJob's container (``restartPolicy: OnFailure``) is restarted in place by the kubelet until the restarts
      exceed ``runPolicy.backoffLimit`` (kubeflow/trainer v1.9.4 ``pkg/controller.v1/common/job.go``
      ``PastBackoffLimit``). Each attempt fails within seconds of starting, before torchrun, so a retry costs only a
      pod start; a job that fails this way fails its release chain like any failed job (the jobs held after it are
      never created).

    :param name: Base name of the job, a DNS label of at most 28 characters. Required.
    :param image: Container image. Required.
    :param node_group: The nodes. Required.
    :param script: Python script to run. One of ``script``, ``module`` and ``command`` is required.
    :param module: Python module to run (``torchrun -m``).
    :param command: Executable to run per process (``torchrun --no-python``).
    :param args: Arguments of the script, module or command, a list of strings. Default: none.
    :param nodes: Default: the node group's node count.
    :param processes_per_node: Default: NeuronCores per node (Neuron), GPUs per node (GPU), else 1.
    :param neuron_devices: Neuron devices per pod. Default: all of the node's.
    :param efa_interfaces: EFA interfaces per pod. Default: all attached to the node.
    :param launcher: ``Launcher`` or its value. Default: ``Launcher.TORCHRUN``.
    :param cache_set: Neuron compile cache set, ``[A-Za-z0-9_-]+``. Default: ``default``.
    :param precompile: Run under ``neuron_parallel_compile`` (Neuron only). Default: false.
    :param volumes: Claim name -> absolute mount path, neither ``/dev/shm`` nor the run directory, nor below or above
        them (a claim at ``/dev`` would hide the container's devices).
        Default: the node group's shared claim at ``/data``.
    :param env: Extra environment variables (strings), none whose name starts with ``TRAINIUM_EKS_`` (the progress
        watch's and the graceful stop's: a job's own value would move their files or switch the probe on without its
        bounds). Default: none.
    :param namespace: The job's namespace (a DNS label). Required.
    :param service_account: Default: ``training``.
    :param max_retries: How many times the whole job may run, restarted after a pod failure or eviction (Volcano's
        ``maxRetry``: the job fails once its retry count reaches it). Default: 3.
    :param resource_fraction: Share of the node's vCPUs and memory requested per pod, in [0, 1). Default: 0.5.
    :param internet_egress: Let the pods open HTTPS connections to the internet (a model or data set downloaded at run
        time). Default: false (the namespace, its DNS and the Pod Identity agent only).
    :param progress: A :class:`~trainium_eks.manifests.jobs.progress_watch.ProgressWatch`: the container is stopped,
        and its job restarted by its failure policy, when its training script reports no step within the bounds (the
        script must write the progress file: the seed images' scripts do). Default: None (no watch).
    :param graceful_stop: A :class:`~trainium_eks.manifests.jobs.graceful_stop.GracefulStop`: a pod deleted while its
        node drains (a Spot or reservation warning, a Capacity Block's end) or its job restarts gets that grace, and
        its training script is told to checkpoint at its next step and exit (the script must read the stop file: the
        seed images' scripts do). Not on a PyTorchJob. Default: None (the launcher is process 1 and gets SIGTERM,
        which Composer's ignores there, and Kubernetes' 30 s grace).
    """

    def __init__(
        self,
        *,
        name: Any,
        image: Any,
        node_group: Any,
        namespace: Any,
        script: Any = None,
        module: Any = None,
        command: Any = None,
        args: Any = (),
        nodes: Any = None,
        processes_per_node: Any = None,
        neuron_devices: Any = None,
        efa_interfaces: Any = None,
        launcher: Any = Launcher.TORCHRUN,
        cache_set: Any = "default",
        precompile: Any = False,
        volumes: Any = None,
        env: Any = None,
        service_account: Any = DEFAULT_SERVICE_ACCOUNT,
        max_retries: Any = 3,
        resource_fraction: Any = DEFAULT_RESOURCE_FRACTION,
        internet_egress: Any = False,
        progress: Any = None,
        graceful_stop: Any = None,
        problems: Problems,
    ) -> None:
        if not isinstance(node_group, NodeGroupTopology):
            problems.add("node_group", node_group, "a NodeGroupTopology (TrainingNodeGroup.topology)")
            node_group = None
        job_naming.check_base_name(problems, name)
        check_image_reference(problems, "image", image)
        check_dns_label(problems, "namespace", namespace)
        check_dns_subdomain(problems, "service_account", service_account)
        self.launcher = coerce_enum(problems, "launcher", launcher, Launcher)
        entrypoints = {"script": script, "module": module, "command": command}
        given = {key: value for key, value in entrypoints.items() if value is not None}
        if len(given) != 1:
            problems.add("script/module/command", given, "exactly one of script, module or command")
        for key, value in given.items():
            check_text(problems, key, value, allowed=f"a non-empty {key} (a string)")
        check_strings(problems, "args", args)
        check_bool(problems, "precompile", precompile)
        check_bool(problems, "internet_egress", internet_egress)
        check_progress(problems, "progress", progress)
        check_graceful_stop(problems, "graceful_stop", graceful_stop)
        check_pattern(problems, "cache_set", cache_set, CACHE_SET, "letters, digits, '_' and '-' only ([A-Za-z0-9_-]+)")
        check_integer(problems, "max_retries", max_retries, minimum=0, maximum=100)
        check_number(problems, "resource_fraction", resource_fraction, minimum=0, below=1)
        if check_string_map(problems, "env", env if env is not None else {}):
            for key in env or {}:
                check_pattern(problems, "env key", key, ENV_NAME, "an environment variable name ([-._a-zA-Z0-9])")
                if isinstance(key, str) and key.startswith(LIBRARY_ENV_PREFIX):
                    problems.add(
                        "env key",
                        key,
                        f"a name not starting with {LIBRARY_ENV_PREFIX}: the library's (progress=, graceful_stop=)",
                    )

        if node_group is None:  # the remaining checks need the nodes
            problems.raise_if_any()
        group: NodeGroupTopology = node_group
        self.node_group = group
        self.accelerator = group.instance.accelerator
        self.nodes = group.node_count if nodes is None else nodes
        default_processes = group.neuron_cores or group.gpus or 1
        self.processes_per_node = default_processes if processes_per_node is None else processes_per_node
        self.neuron_devices = group.neuron_devices if neuron_devices is None else neuron_devices
        self.efa_interfaces = group.efa_interfaces if efa_interfaces is None else efa_interfaces
        self._check_topology(problems)
        if volumes is None:
            volumes = {sorted(group.shared_claims)[0]: SHARED_MOUNT} if group.shared_claims else {}
        if check_string_map(problems, "volumes", volumes):
            for claim, path in volumes.items():
                check_dns_subdomain(problems, f"volumes claim {claim!r}", claim)
                if check_absolute_path(problems, f"volumes[{claim!r}]", path):
                    for own in (SHM_MOUNT, RUN_DIRECTORY):
                        if path == own or path.startswith(own + "/") or own.startswith(path + "/"):
                            problems.add(
                                f"volumes[{claim!r}]",
                                path,
                                f"a path neither at, below nor above {own}, which the pods mount",
                            )
            missing = sorted(set(volumes) - set(group.shared_claims))
            if missing:
                have = ", ".join(sorted(group.shared_claims)) or "none"
                problems.add("volumes", missing, f"claims the node group can reach (shared volumes: {have})")
        if precompile is True and self.accelerator is not Accelerator.NEURON:
            problems.add("precompile", precompile, f"only on Neuron nodes, not {group.instance_type}")
        if precompile is True and progress is not None:
            problems.add(
                "progress",
                progress,
                "None with precompile: neuron_parallel_compile compiles every graph after the script's steps, so the "
                "watch would stop each attempt during the compilation",
            )
        if self.launcher is Launcher.COMPOSER and self.accelerator is Accelerator.NEURON:
            problems.add(
                "launcher",
                launcher,
                f"Composer on Neuron nodes ({group.instance_type}) is not supported: its Neuron device is experimental "
                "and untested upstream; use GPU or CPU nodes, or the torchrun launcher",
            )
        if self.launcher in (Launcher.COMPOSER, Launcher.DIRECT) and precompile is True:
            problems.add("precompile", precompile, f"only with the torchrun launcher, not {self.launcher.value}")
        problems.raise_if_any()

        self.name: str = name
        self.image: str = image
        self.namespace: str = namespace
        self.service_account: str = service_account
        self.entrypoint_kind, self.entrypoint = next(iter(given.items()))
        self.args: List[str] = list(args)
        self.cache_set: str = cache_set
        self.precompile: bool = precompile
        self.volumes: Dict[str, str] = dict(volumes)
        self.env: Dict[str, str] = dict(env or {})
        self.max_retries: int = max_retries
        self.resource_fraction: float = resource_fraction
        self.internet_egress: bool = internet_egress
        self.progress: Optional[ProgressWatch] = progress
        self.graceful_stop: Optional[GracefulStop] = graceful_stop
        self.cache_root = f"{SHARED_MOUNT}/neuron_cache" if SHARED_MOUNT in self.volumes.values() else LOCAL_CACHE_ROOT

    @classmethod
    def from_props(cls, problems: Problems, **props: Any) -> "DistributedWorkload":
        """A workload from keyword props given to a job chart; an unknown prop is one more problem (with the
        nearest known name, or what replaced a removed one: :data:`REMOVED_PROPS`), never a ``TypeError``."""
        known = [name for name in inspect.signature(cls.__init__).parameters if name not in ("self", "problems")]
        unknown = sorted(set(props) - set(known))
        for name in unknown:
            if name in REMOVED_PROPS:
                problems.add(name, props.pop(name), f"removed: {REMOVED_PROPS[name]}")
                continue
            hint = nearest(name, known, cutoff=0.6)
            problems.add(name, props.pop(name), f"unknown setting{hint}; known: {', '.join(sorted(known))}")
        props.setdefault("image", None)
        props.setdefault("node_group", None)
        return cls(problems=problems, **props)

    def _check_topology(self, problems: Problems) -> None:
        group = self.node_group
        if check_integer(problems, "nodes", self.nodes, minimum=1, maximum=group.max_nodes):
            accelerated = group.instance.accelerator is not Accelerator.NONE
            if self.nodes > 1 and group.efa_interfaces == 0 and accelerated:
                problems.add("nodes", self.nodes, f"1: {group.instance_type} nodes have no EFA interface")
        cores = group.neuron_cores or group.gpus or group.instance.vcpus
        unit = "NeuronCores" if group.neuron_cores else "GPUs" if group.gpus else "vCPUs"
        if not is_integer(self.processes_per_node) or not 1 <= self.processes_per_node <= cores:
            problems.add(
                "processes_per_node",
                self.processes_per_node,
                f"an integer from 1 to {cores}, the {unit} of a {group.instance_type} node",
            )
        if not is_integer(self.neuron_devices) or not 0 <= self.neuron_devices <= group.neuron_devices:
            problems.add(
                "neuron_devices",
                self.neuron_devices,
                f"an integer from 0 to {group.neuron_devices}, the Neuron devices of a {group.instance_type} node",
            )
        if not is_integer(self.efa_interfaces) or not 0 <= self.efa_interfaces <= group.efa_interfaces:
            problems.add(
                "efa_interfaces",
                self.efa_interfaces,
                f"an integer from 0 to {group.efa_interfaces}, the EFA interfaces attached to each node of the group",
            )

    @property
    def world_size(self) -> int:
        """Processes in the whole job."""
        return self.nodes * self.processes_per_node

    def environment(self, *, training: bool = True) -> List[Dict[str, str]]:
        """The container's environment (plain manifest form); per-node values are set by :meth:`launch_script`.
        Without ``training``, not the variables of the progress watch and the graceful stop (a fabric check runs no
        training steps)."""
        variables: Dict[str, str] = {}
        if self.node_group.efa_interfaces:
            variables.update(FI_PROVIDER="efa", FI_EFA_USE_DEVICE_RDMA="1", FI_EFA_FORK_SAFE="1")
        if self.accelerator is Accelerator.NEURON:
            variables.update(CCOM_SOCKET_IFNAME="eth0", NEURON_RT_RESET_CORES="1", XLA_TRANSFER_SEED_ASYNC="1")
        if self.progress is not None and training:
            variables.update(self.progress.env())
        if self.graceful_stop is not None and training:
            variables.update(self.graceful_stop.env())
        variables.update(self.env)
        return [{"name": key, "value": value} for key, value in variables.items()]

    @property
    def uses_run_directory(self) -> bool:
        """Whether the training container mounts the run directory: the progress file and the stop file are there."""
        return self.progress is not None or self.graceful_stop is not None

    def devices(self) -> Dict[str, int]:
        """Extended resources per pod: Neuron devices, EFA interfaces, GPUs."""
        devices: Dict[str, int] = {}
        if self.neuron_devices:
            devices[NEURON_DEVICE_RESOURCE] = self.neuron_devices
        if self.efa_interfaces:
            devices[EFA_RESOURCE] = self.efa_interfaces
        if self.node_group.gpus:
            devices[GPU_RESOURCE] = self.node_group.gpus
        return devices

    def resources(self) -> Dict[str, Any]:
        """Requests (devices, CPU, memory) and limits (devices) of the worker container."""
        devices = self.devices()
        requests: Dict[str, Any] = dict(devices)
        if self.resource_fraction:
            instance = self.node_group.instance
            requests["cpu"] = str(max(1, int(instance.vcpus * self.resource_fraction)))
            requests["memory"] = f"{max(1, int(instance.memory_gib * self.resource_fraction))}Gi"
        return {"requests": requests, "limits": devices} if devices else {"requests": requests}

    def volume_mounts(self) -> List[Dict[str, Any]]:
        """``/dev/shm``, the run directory of a container with :attr:`progress` or :attr:`graceful_stop`
        (:mod:`~trainium_eks.manifests.jobs.run_directory`), and the claims, as the worker container mounts them."""
        mounts = [{"name": "dshm", "mountPath": SHM_MOUNT}]
        mounts += [run_mount()] if self.uses_run_directory else []
        mounts += [
            {"name": f"claim-{n}", "mountPath": path} for n, (_, path) in enumerate(sorted(self.volumes.items()))
        ]
        return mounts

    def pod_volumes(self) -> List[Dict[str, Any]]:
        """The pod's volumes: a memory-backed ``/dev/shm``, the run directory's ``emptyDir`` (with :attr:`progress` or
        :attr:`graceful_stop`) and the claims."""
        volumes: List[Dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
        volumes += [run_volume()] if self.uses_run_directory else []
        volumes += [
            {"name": f"claim-{n}", "persistentVolumeClaim": {"claimName": claim}}
            for n, (claim, _) in enumerate(sorted(self.volumes.items()))
        ]
        return volumes

    def pod_labels(self) -> Dict[str, str]:
        """Labels of a worker pod beyond the job's own: the internet egress label with ``internet_egress``."""
        return {EGRESS_INTERNET_LABEL: "true"} if self.internet_egress else {}

    def pod_spec(self, container_name: str, contract: NodeContract) -> Dict[str, Any]:
        """The whole pod spec of a worker (plain manifest form), with the launch command of ``contract``."""
        pod: Dict[str, Any] = {
            "serviceAccountName": self.service_account,
            "automountServiceAccountToken": False,
            "restartPolicy": "Never",
            "securityContext": dict(RUNTIME_DEFAULT_SECCOMP),
            **self.node_group.pod_placement(),
            "containers": [self.container(container_name, contract)],
            "volumes": self.pod_volumes(),
        }
        pod.update(self.termination_grace())
        return pod

    def termination_grace(self) -> Dict[str, int]:
        """The pod's ``terminationGracePeriodSeconds`` with :attr:`graceful_stop`, else nothing (Kubernetes' 30 s)."""
        if self.graceful_stop is None:
            return {}
        return {"terminationGracePeriodSeconds": self.graceful_stop.grace_seconds}

    def container(self, name: str, contract: NodeContract) -> Dict[str, Any]:
        """The worker container: image, launch command, environment, ports, resources, mounts, security, and with
        :attr:`progress` the liveness probe that stops it when its steps stop."""
        container = {
            "name": name,
            "image": self.image,
            "command": ["bash", "-c", self.launch_script(contract)],
            "env": self.environment(),
            "ports": [{"name": "rendezvous", "containerPort": MASTER_PORT}],
            "resources": self.resources(),
            "securityContext": worker_security(),
            "volumeMounts": self.volume_mounts(),
        }
        if self.progress is not None:
            container["livenessProbe"] = liveness_probe()
        return container

    def launch_script(self, contract: NodeContract) -> str:
        """The bash script a worker runs: the EFA self-check when the pod requests EFA interfaces
        (:func:`efa_self_check`), per-node environment, then ``exec`` of the launcher; with :attr:`graceful_stop`, the
        stop signal's trap first and the launcher in the background (:meth:`GracefulStop.trap_lines`,
        :meth:`GracefulStop.launch_lines`)."""
        progress_file = PROGRESS_FILE_ENV if self.progress is not None else None
        lines = self.graceful_stop.trap_lines(progress_file) if self.graceful_stop is not None else []
        lines += self.progress.launch_lines() if self.progress is not None else []
        lines += efa_self_check(self.efa_interfaces) if self.efa_interfaces else []
        lines += list(contract.setup)
        if self.accelerator is Accelerator.NEURON:
            flags = f"--cache_dir={self.cache_root}/{self.cache_set}_{contract.node_index}"
            lines.append(f'export NEURON_CC_FLAGS="{flags}"')
        target = [self.entrypoint] + self.args
        if self.launcher is Launcher.DIRECT:
            python = {"script": ["python3"], "module": ["python3", "-m"], "command": []}[self.entrypoint_kind]
            return "\n".join(lines + self._launch(" ".join(_quote(w) for w in python + target)))
        if self.launcher is Launcher.COMPOSER:
            lines.append(f'export NODE_RANK="{contract.node_index}"')
            words = ["composer", "-n", str(self.processes_per_node), "--world_size", str(self.world_size)]
            shell = " ".join(_quote(w) for w in words)
            shell += f' --node_rank "{contract.node_index}" --master_addr "{contract.master_addr}"'
            shell += f" --master_port {MASTER_PORT}"
            if self.entrypoint_kind == "module":
                shell += " --module_mode"
            elif self.entrypoint_kind == "command":
                shell += " --command_mode"
            shell += " " + " ".join(_quote(w) for w in target)
        else:
            words = ["torchrun", "--nnodes", str(self.nodes), "--nproc_per_node", str(self.processes_per_node)]
            words += list(contract.torchrun_args) + ["--tee", "3"]
            words += {"script": [], "module": ["-m"], "command": ["--no-python"]}[self.entrypoint_kind] + target
            if self.precompile:
                words.insert(0, "neuron_parallel_compile")
            shell = " ".join(_quote(w) for w in words)
        return "\n".join(lines + self._launch(shell))

    def _launch(self, launcher: str) -> List[str]:
        if self.graceful_stop is None:
            return ["exec " + launcher]
        progress_file = PROGRESS_FILE_ENV if self.progress is not None else None
        return self.graceful_stop.launch_lines(launcher, progress_file)


RUNTIME_DEFAULT_SECCOMP: Dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
"""The pod security context of every training pod: the container runtime's default seccomp profile. On containerd
(2.2.4 on the EKS AL2023 AMIs of v20260714: awslabs/amazon-eks-ami CHANGELOG.md) that profile still allows
``process_vm_readv``, ``process_vm_writev`` and ``ptrace`` on kernels 4.8 and newer (containerd v2.2.7
``contrib/seccomp/seccomp_default.go``, "include by kernel version"; the same in v1.7.34 and v2.1.9), which
libfabric's shared-memory transport uses between the processes of a node (its CMA protocol); where they are refused,
it falls back to copying through shared memory (ofiwg/libfabric v2.6.0 ``prov/shm/src/smr_util.c`` ``smr_cma_check``,
``man/fi_shm.7.md``: "SHM shall default to the SAR protocol")."""


def worker_security() -> Dict[str, Any]:
    """The security context of a training container: no privilege escalation and no Linux capabilities. A worker runs
    as the image's user (root in the Neuron DLC) and needs none: the Neuron and EFA devices are granted by their
    device plugins (device files the container may open), locked memory for EFA registration is the node's limit,
    not ``CAP_IPC_LOCK`` (which the runtime's default set lacks anyway), and files on the shared volume belong to
    root."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def efa_self_check(expected: int) -> List[str]:
    """Bash lines that check the container's own EFA before anything else runs, and exit at once with
    :data:`EFA_SELF_CHECK_EXIT` and a message on stderr saying which check failed:

    1. the pod sees ``expected`` EFA devices (``/dev/infiniband/uverbs*``, :data:`UVERBS_DIR`), as many as it
       requested of ``vpc.amazonaws.com/efa`` (the EFA device plugin mounts one per interface it allocated);
    2. ``/opt/amazon/efa/bin/fi_info`` (:data:`FI_INFO`) exists, and ``fi_info -p efa`` lists the ``efa`` provider
       (a ``provider: efa`` line; without a usable EFA device libfabric answers ``fi_getinfo: -61 (No data
       available)`` and exits non-zero). The EFA installer puts libfabric in ``/opt/amazon/efa``, off the Neuron DLC's
       ``PATH``.

    No ``$(`` in the lines: the kubelet would read it as a reference to an environment variable (Kubernetes
    ``third_party/forked/golang/expansion/expand.go``)."""
    check = "EFA self-check failed:"
    return [
        f"efa_expected={expected}",
        "shopt -s nullglob",
        f"efa_devices=({UVERBS_DIR}/uverbs*)",
        "shopt -u nullglob",
        'if [ "${#efa_devices[@]}" -ne "${efa_expected}" ]; then',
        f'  echo "{check} this pod requested ${{efa_expected}} EFA devices (vpc.amazonaws.com/efa) and sees'
        f" ${{#efa_devices[@]}} ({UVERBS_DIR}/uverbs*): is the EFA device plugin running on this node, with as many"
        f' EFA interfaces attached?" >&2',
        f"  exit {EFA_SELF_CHECK_EXIT}",
        "fi",
        f"if [ ! -x {FI_INFO} ]; then",
        f'  echo "{check} {FI_INFO} is missing: the image has no EFA libfabric (the EFA installer puts it in'
        f' /opt/amazon/efa)" >&2',
        f"  exit {EFA_SELF_CHECK_EXIT}",
        "fi",
        f"if ! {FI_INFO} -p efa 2>&1 | grep -q 'provider: efa'; then",
        f'  echo "{check} {FI_INFO} -p efa lists no efa provider (libfabric finds no usable EFA device); it says:" >&2',
        f"  {FI_INFO} -p efa >&2 2>&1",
        f"  exit {EFA_SELF_CHECK_EXIT}",
        "fi",
    ]


_SHELL_EXPANSION = re.compile(r"^[A-Za-z0-9_.:/-]*\$\{[A-Z0-9_]+\}[A-Za-z0-9_.:/-]*$")


def _quote(word: str) -> str:
    """Shell-quote ``word``; a word that only adds literal text around one ``${VAR}`` is double-quoted so that the
    shell expands the variable (the rendezvous endpoints of the contracts)."""
    if _SHELL_EXPANSION.match(word):
        return f'"{word}"'
    return shlex.quote(word)
