"""TrainingJobChart: a distributed PyTorch job on a node group, as the Volcano Job TorchX would generate."""

from __future__ import annotations

import re
import shlex
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from trainium_eks.catalog import Accelerator
from trainium_eks.constructs.training_pod_identity import DEFAULT_NAMESPACE, DEFAULT_SERVICE_ACCOUNT
from trainium_eks.manifests import job_naming
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.manifests.efa_device_plugin import EFA_RESOURCE
from trainium_eks.manifests.etcd import CLIENT_PORT
from trainium_eks.manifests.etcd import SERVICE_NAME as ETCD_SERVICE
from trainium_eks.manifests.fsx_volume import SHARED_MOUNT
from trainium_eks.manifests.neuron_device_plugin import NEURON_DEVICE_RESOURCE
from trainium_eks.manifests.topology import NodeGroupTopology
from trainium_eks.manifests.volcano_queue import DEFAULT_QUEUE
from trainium_eks.validation import Problems

VOLCANO_JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
LOCAL_CACHE_ROOT = "/var/cache/neuron-compile-cache"
"""Compile cache root when no shared volume is mounted at /data (node-local, lost with the node)."""
C10D_PORT = 29500
GPU_RESOURCE = "nvidia.com/gpu"
CACHE_SET = re.compile(r"^[A-Za-z0-9_-]+$")
START_GATE_SOURCE = (Path(__file__).parent / "start_gate.py").read_text()


class Rendezvous(Enum):
    """torchrun rendezvous backends.

    ``ETCD``: ``--rdzv_backend etcd --rdzv_endpoint etcd-server:2379`` (the tutorial's; needs ``EtcdChart`` in the
    namespace and python-etcd in the image). ``C10D``: the store on node 0 (``localhost:29500`` there,
    ``$VC_NODE_0_HOSTS:29500`` elsewhere, resolved through Volcano's svc plugin), as TorchX's default.
    """

    ETCD = "etcd"
    C10D = "c10d"


class TrainingJobChart(LibraryChart):
    """A distributed PyTorch job: one Volcano Job, one task per node, ``torchrun`` in every pod.

    It renders the ``batch.volcano.sh/v1alpha1`` Job that TorchX's Kubernetes scheduler generates for the
    tutorial, plus what TorchX cannot express:

    - ``schedulerName: volcano``, the queue, one task per node (``node-0`` ... ``node-<N-1>``, one replica each),
      ``minAvailable`` = nodes (gang scheduling), ``maxRetry`` with ``PodEvicted``/``PodFailed`` -> ``RestartJob``,
      the svc plugin (``--publish-not-ready-addresses``) and the env plugin;
    - ``torchrun --nnodes N --nproc_per_node P --rdzv_backend ... --rdzv_endpoint ... --rdzv_id <job name>``, wrapped
      in ``neuron_parallel_compile`` in precompile mode;
    - the environment contract: ``FI_PROVIDER=efa``, ``FI_EFA_USE_DEVICE_RDMA=1``, ``FI_EFA_FORK_SAFE=1`` (EFA nodes),
      ``CCOM_SOCKET_IFNAME=eth0``, ``NEURON_RT_RESET_CORES=1``, ``XLA_TRANSFER_SEED_ASYNC=1``,
      ``NEURON_CC_FLAGS=--cache_dir=<cache root>/<cache set>_<node index>`` (Neuron nodes), ``XLA_DOWNCAST_BF16=1``
      when bf16;
    - requests and limits of ``aws.amazon.com/neuron`` and ``vpc.amazonaws.com/efa`` equal to the node's devices
      and attached interfaces (``nvidia.com/gpu`` on GPU nodes), and CPU and memory requests of
      ``resource_fraction`` of the node (TorchX requests none, which makes the pods the first to be evicted);
    - a memory-backed ``/dev/shm``; the shared claim at ``/data``; tolerations of the node group's taints (TorchX
      cannot express them: with the Neuron taint its pods stay Pending); a node selector on the instance type;
    - the pods run as the ``training`` service account (EKS Pod Identity);
    - optionally a start gate: an init container that waits until the jobs named in ``wait_for`` have completed
      (and fails if one failed), with the job's own image and Python's standard library only.

    The job's name is ``<name>-<hash of the rendered spec>`` (:attr:`job_name`): changing any setting yields a new
    job, never an update of an immutable pod template.

    :param name: Base name, a DNS label of at most 28 characters. Required.
    :param image: Container image. Required.
    :param node_group: The nodes (``AcceleratedNodeGroup.topology``). Required.
    :param script: Python script to run under torchrun. One of ``script``, ``module`` and ``command`` is required.
    :param module: Python module to run (``torchrun -m``).
    :param command: Executable to run per process (``torchrun --no-python``).
    :param args: Arguments of the script, module or command. Default: none.
    :param nodes: Default: the node group's node count.
    :param processes_per_node: Default: NeuronCores per node (Neuron), GPUs per node (GPU), else 1.
    :param neuron_devices: Neuron devices per pod. Default: all of the node's.
    :param efa_interfaces: EFA interfaces per pod. Default: all attached to the node.
    :param rendezvous: Default: ``Rendezvous.ETCD``.
    :param bf16: Default: false.
    :param cache_set: Name of the Neuron compile cache set, ``[A-Za-z0-9_-]+``. Default: ``default``.
    :param precompile: Run under ``neuron_parallel_compile`` (graphs are compiled into the cache set). Default: false.
    :param volumes: PersistentVolumeClaim name -> mount path. Default: the node group's shared claim at ``/data``.
    :param env: Extra environment variables. Default: none.
    :param wait_for: Jobs to wait for, as ``job/<name>`` (batch/v1) or ``vcjob/<name>`` (Volcano). Default: none.
    :param namespace: Default: ``training``.
    :param queue: Volcano queue. Default: ``training``.
    :param service_account: Default: ``training``.
    :param max_retries: Job restarts after a pod failure or eviction. Default: 3.
    :param resource_fraction: Share of the node's vCPUs and memory requested per pod. Default: 0.5.
    :param resolve: Turns CDK tokens into their CloudFormation form before hashing (``Stack.resolve``). Default:
        none (values are hashed as they are).
    """

    def __init__(
        self,
        *,
        name: str,
        image: str,
        node_group: NodeGroupTopology,
        script: Optional[str] = None,
        module: Optional[str] = None,
        command: Optional[str] = None,
        args: Sequence[str] = (),
        nodes: Optional[int] = None,
        processes_per_node: Optional[int] = None,
        neuron_devices: Optional[int] = None,
        efa_interfaces: Optional[int] = None,
        rendezvous: Rendezvous = Rendezvous.ETCD,
        bf16: bool = False,
        cache_set: str = "default",
        precompile: bool = False,
        volumes: Optional[Mapping[str, str]] = None,
        env: Optional[Mapping[str, str]] = None,
        wait_for: Sequence[str] = (),
        namespace: str = DEFAULT_NAMESPACE,
        queue: str = DEFAULT_QUEUE,
        service_account: str = DEFAULT_SERVICE_ACCOUNT,
        max_retries: int = 3,
        resource_fraction: float = 0.5,
        resolve: Optional[Callable[[Any], Any]] = None,
    ) -> None:
        super().__init__(name, namespace=namespace)
        accelerator = node_group.instance.accelerator
        self.node_group = node_group
        self.nodes = node_group.node_count if nodes is None else nodes
        self.processes_per_node = processes_per_node or _default_processes(node_group)
        self.neuron_devices = node_group.neuron_devices if neuron_devices is None else neuron_devices
        self.efa_interfaces = node_group.efa_interfaces if efa_interfaces is None else efa_interfaces
        if volumes is None:
            volumes = {sorted(node_group.shared_claims)[0]: SHARED_MOUNT} if node_group.shared_claims else {}
        self.volumes = dict(volumes)
        entrypoints = {"script": script, "module": module, "command": command}

        problems = Problems(f"training job {name!r}")
        self._check(problems, name, entrypoints, cache_set, precompile, wait_for, max_retries, resource_fraction)
        problems.raise_if_any()

        self.cache_root = f"{SHARED_MOUNT}/neuron_cache" if SHARED_MOUNT in self.volumes.values() else LOCAL_CACHE_ROOT
        kind, target = next((k, v) for k, v in entrypoints.items() if v)
        spec = {
            "schedulerName": "volcano",
            "queue": queue,
            "minAvailable": self.nodes,
            "maxRetry": max_retries,
            "plugins": {"svc": ["--publish-not-ready-addresses"], "env": []},
            "tasks": [
                self._task(
                    index,
                    image,
                    kind,
                    target,
                    list(args),
                    rendezvous,
                    bf16,
                    cache_set,
                    precompile,
                    dict(env or {}),
                    list(wait_for),
                    namespace,
                    service_account,
                    max_retries,
                    resource_fraction,
                    accelerator,
                )
                for index in range(self.nodes)
            ],
        }
        manifest = {
            "apiVersion": VOLCANO_JOB_API_VERSION,
            "kind": "Job",
            "metadata": {
                "name": job_naming.PLACEHOLDER,
                "namespace": namespace,
                "labels": {**self.selector_labels(), "app.kubernetes.io/instance": job_naming.PLACEHOLDER},
            },
            "spec": spec,
        }
        self.job_name = job_naming.hashed_name(name, manifest, resolve)
        """The job's name in the cluster: ``<name>-<hash>``."""
        self.ref = f"vcjob/{self.job_name}"
        """How a start gate refers to this job (``wait_for=[job.ref]``)."""
        self.add_object("Job", job_naming.with_name(manifest, self.job_name))

    def _check(
        self,
        problems: Problems,
        name: str,
        entrypoints: Mapping[str, Optional[str]],
        cache_set: str,
        precompile: bool,
        wait_for: Sequence[str],
        max_retries: int,
        resource_fraction: float,
    ) -> None:
        group = self.node_group
        if not job_naming.BASE_NAME.match(name):
            problems.add("name", name, "a lowercase DNS label of at most 28 characters, starting with a letter")
        if sum(1 for value in entrypoints.values() if value) != 1:
            problems.add(
                "script/module/command",
                {k: v for k, v in entrypoints.items() if v},
                "exactly one of script, module or command",
            )
        if not 1 <= self.nodes <= group.max_nodes:
            problems.add("nodes", self.nodes, f"1 to {group.max_nodes}, the maximum size of the node group")
        elif self.nodes > 1 and group.efa_interfaces == 0:
            problems.add("nodes", self.nodes, f"1: {group.instance_type} nodes have no EFA interface")
        cores = group.neuron_cores or group.gpus or group.instance.vcpus
        if not 1 <= self.processes_per_node <= cores:
            unit = "NeuronCores" if group.neuron_cores else "GPUs" if group.gpus else "vCPUs"
            problems.add(
                "processes_per_node",
                self.processes_per_node,
                f"1 to {cores}, the {unit} of a {group.instance_type} node",
            )
        if not 0 <= self.neuron_devices <= group.neuron_devices:
            problems.add(
                "neuron_devices",
                self.neuron_devices,
                f"0 to {group.neuron_devices}, the Neuron devices of a {group.instance_type} node",
            )
        if not 0 <= self.efa_interfaces <= group.efa_interfaces:
            problems.add(
                "efa_interfaces",
                self.efa_interfaces,
                f"0 to {group.efa_interfaces}, the EFA interfaces attached to each node of the group",
            )
        missing = sorted(set(self.volumes) - set(group.shared_claims))
        if missing:
            have = ", ".join(sorted(group.shared_claims)) or "none"
            problems.add("volumes", missing, f"claims the node group can reach (shared volumes: {have})")
        if not CACHE_SET.match(cache_set or ""):
            problems.add("cache_set", cache_set, "letters, digits, '_' and '-' only ([A-Za-z0-9_-]+)")
        if precompile and group.instance.accelerator is not Accelerator.NEURON:
            problems.add("precompile", precompile, f"only on Neuron nodes, not {group.instance_type}")
        bad_refs = [ref for ref in wait_for if not re.match(r"^(job|vcjob)/[a-z0-9]([a-z0-9.-]*[a-z0-9])?$", ref)]
        if bad_refs:
            problems.add("wait_for", bad_refs, "references like job/<name> or vcjob/<name>")
        if max_retries < 0:
            problems.add("max_retries", max_retries, "0 or more")
        if not 0 <= resource_fraction < 1:
            problems.add("resource_fraction", resource_fraction, "at least 0 and below 1 (DaemonSets need room too)")

    def _task(
        self,
        index: int,
        image: str,
        kind: str,
        target: str,
        args: List[str],
        rendezvous: Rendezvous,
        bf16: bool,
        cache_set: str,
        precompile: bool,
        env: Dict[str, str],
        wait_for: List[str],
        namespace: str,
        service_account: str,
        max_retries: int,
        resource_fraction: float,
        accelerator: Accelerator,
    ) -> Dict[str, Any]:
        group = self.node_group
        torchrun = [
            "torchrun",
            "--nnodes",
            str(self.nodes),
            "--nproc_per_node",
            str(self.processes_per_node),
            "--rdzv_backend",
            rendezvous.value,
            "--rdzv_endpoint",
            _rendezvous_endpoint(rendezvous, index),
            "--rdzv_id",
            job_naming.PLACEHOLDER,
            "--tee",
            "3",
        ]
        torchrun += {"script": [], "module": ["-m"], "command": ["--no-python"]}[kind] + [target] + args
        if precompile:
            torchrun.insert(0, "neuron_parallel_compile")
        shell = "exec " + " ".join(_quote(word) for word in torchrun)

        variables: Dict[str, str] = {}
        if group.efa_interfaces:
            variables.update(FI_PROVIDER="efa", FI_EFA_USE_DEVICE_RDMA="1", FI_EFA_FORK_SAFE="1")
        if accelerator is Accelerator.NEURON:
            variables.update(
                CCOM_SOCKET_IFNAME="eth0",
                NEURON_RT_RESET_CORES="1",
                XLA_TRANSFER_SEED_ASYNC="1",
                NEURON_CC_FLAGS=f"--cache_dir={self.cache_root}/{cache_set}_{index}",
            )
            if bf16:
                variables["XLA_DOWNCAST_BF16"] = "1"
        variables.update(env)

        devices: Dict[str, Any] = {}
        if self.neuron_devices:
            devices[NEURON_DEVICE_RESOURCE] = self.neuron_devices
        if self.efa_interfaces:
            devices[EFA_RESOURCE] = self.efa_interfaces
        if group.gpus:
            devices[GPU_RESOURCE] = group.gpus
        requests = dict(devices)
        if resource_fraction:
            requests["cpu"] = str(max(1, int(group.instance.vcpus * resource_fraction)))
            requests["memory"] = f"{max(1, int(group.instance.memory_gib * resource_fraction))}Gi"

        mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
        pod_volumes: List[Dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
        for number, (claim, path) in enumerate(sorted(self.volumes.items())):
            mounts.append({"name": f"claim-{number}", "mountPath": path})
            pod_volumes.append({"name": f"claim-{number}", "persistentVolumeClaim": {"claimName": claim}})

        pod: Dict[str, Any] = {
            "serviceAccountName": service_account,
            "restartPolicy": "Never",
            **group.pod_placement(),
            "containers": [
                {
                    "name": "worker",
                    "image": image,
                    "command": ["bash", "-c", shell],
                    "env": [{"name": k, "value": v} for k, v in variables.items()],
                    "ports": [{"name": "c10d", "containerPort": C10D_PORT}],
                    "resources": {"requests": requests, "limits": devices} if devices else {"requests": requests},
                    "volumeMounts": mounts,
                }
            ],
            "volumes": pod_volumes,
        }
        if wait_for:
            pod["initContainers"] = [
                {
                    "name": "start-gate",
                    "image": image,
                    "command": ["python3", "-c", START_GATE_SOURCE, namespace, *wait_for],
                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
                }
            ]
        return {
            "name": f"node-{index}",
            "replicas": 1,
            "maxRetry": max_retries,
            "policies": [
                {"event": "PodEvicted", "action": "RestartJob"},
                {"event": "PodFailed", "action": "RestartJob"},
            ],
            "template": {
                "metadata": {
                    "labels": {
                        **self.selector_labels(),
                        "app.kubernetes.io/instance": job_naming.PLACEHOLDER,
                        "trainium-eks/node-index": str(index),
                    },
                    "annotations": {"sidecar.istio.io/inject": "false"},
                },
                "spec": pod,
            },
        }


def _default_processes(group: NodeGroupTopology) -> int:
    return group.neuron_cores or group.gpus or 1


def _rendezvous_endpoint(rendezvous: Rendezvous, index: int) -> str:
    if rendezvous is Rendezvous.ETCD:
        return f"{ETCD_SERVICE}:{CLIENT_PORT}"
    return f"localhost:{C10D_PORT}" if index == 0 else f"$VC_NODE_0_HOSTS:{C10D_PORT}"


def _quote(word: str) -> str:
    """Shell-quote ``word``, leaving ``$VC_...`` variables of the rendezvous endpoint to the shell."""
    if re.match(r"^\$VC_[A-Z0-9_]+:\d+$", word):
        return f'"{word}"'
    return shlex.quote(word)
