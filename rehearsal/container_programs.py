"""What the containers of the scheduling rehearsal do while they run, and when they exit.

- **Services** (the containers of Deployments and DaemonSets) run for ever.
- **The release program** (:mod:`trainium_eks.manifests.jobs.job_release_program`, recognised by its path in the
  program's ConfigMap) reads the
  status of the jobs it waits for with the program's own ``wait_states`` and ``decide``, creates the held job owned
  by its Job when they have all completed (through the webhooks of :mod:`.admission`), and exits 0; 3 when one failed or
  the API server refused the job; it leaves an existing held job alone.
- **Init containers** of the library's pods end after a tick (none of them waits); a test may give a program that
  does (:class:`WaitForJobs`, what a start gate did).
- **Fabric checks** (:mod:`trainium_eks.manifests.jobs.fabric_check`, recognised by the fabric program's ConfigMap
  mounted in their container): node 0 (``<job>-node-0``) waits for its gang as a worker does, benchmarks
  :data:`WORK_TICKS`, and exits 0, or :data:`~trainium_eks.manifests.jobs.fabric_program.BELOW_FLOOR` when the run
  puts its fabric check ``below_floor`` (or 1 on a first attempt the run makes fail); every other pod exits with node
  0's status once node 0 has ended, as the check's script has its peers do.
- **Workers** (every other container) train: a pod of a gang of N (a Volcano job's ``minAvailable`` or a TrainJob's
  ``numNodes``) first waits until all N pods of its attempt run, as torchrun's rendezvous does, and fails after
  :data:`RENDEZVOUS_TIMEOUT_TICKS` (torch's ``join_timeout``, 600 s:
  ``torch/distributed/elastic/rendezvous/dynamic_rendezvous.py``); then it works :data:`WORK_TICKS` and exits 0, or
  exits 1 after one tick on the first attempt of a job the run makes fail.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, Mapping, Optional, Sequence

from rehearsal.kubelet_expansion import expand
from trainium_eks.core.conventions import FABRIC_CHECK_LABEL
from trainium_eks.manifests.jobs.fabric_check import PROGRAM_MOUNT
from trainium_eks.manifests.jobs.fabric_program import BELOW_FLOOR
from trainium_eks.manifests.jobs.job_release import RELEASE_PROGRAM_PATH
from trainium_eks.manifests.jobs.job_release_program import NEVER, decide, owned_manifest, ref_of, state, wait_states

if TYPE_CHECKING:  # pragma: no cover
    from rehearsal.simulated_cluster import Pod, SimulatedCluster

RENDEZVOUS_TIMEOUT_TICKS = 10
WORK_TICKS = 3


@dataclass(frozen=True)
class WaitForJobs:
    """An init container that waits until the jobs ``refs`` (``vcjob/<name>``...) have completed, and fails if one
    failed: what a start gate in a job's own pod does (it holds the pod's requests while it waits)."""

    refs: Sequence[str]


Classifier = Callable[["Pod", int, Mapping[str, Any]], Optional[Any]]
"""Gives a container (pod, index among init containers then containers, container) a program, or None for the
default."""


@dataclass
class Programs:
    """Runs containers: the default programs, ``failing`` jobs' first attempts fail, ``classifier`` may override.

    :param failing: Names of jobs whose first attempt fails.
    :param classifier: Extra programs for some containers. Default: none.
    :param below_floor: Fabric checks whose benchmark measures a fabric below the floor, named by the check's job
        name or by the name of the job it guards (its ``FABRIC_CHECK_LABEL``). Default: none.
    """

    failing: FrozenSet[str] = frozenset()
    classifier: Optional[Classifier] = None
    below_floor: FrozenSet[str] = frozenset()
    _held: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The release containers' ``HELD_JOB`` as the program reads it, by its text (parsed once per run)."""

    def step(self, cluster: "SimulatedCluster", pod: "Pod") -> Optional[int]:
        """Run ``pod``'s current container one tick; its exit code when it ends, else None."""
        containers = pod.containers
        container = containers[pod.step]
        init_count = len(pod.spec.get("initContainers") or ())
        special = self.classifier(pod, pod.step, container) if self.classifier else None
        owner = cluster.workloads.get(pod.owner)
        if isinstance(special, WaitForJobs):
            action, _ = decide(
                {ref: state(ref.split("/")[0], _status(cluster, pod.namespace, ref)) for ref in special.refs}
            )
            return None if action == "wait" else (0 if action == "create" else 1)
        if pod.step < init_count:
            return 0
        if owner is not None and owner.kind in ("daemonset", "deployment"):
            return None
        if _is_release(container):
            return self._release(cluster, pod, container)
        if _is_fabric_check(container):
            return self._fabric_check(cluster, pod, owner)
        return self._work(cluster, pod, owner)

    def _fabric_check(self, cluster: "SimulatedCluster", pod: "Pod", owner: Any) -> Optional[int]:
        node_zero = f"{owner.name}-node-0"
        if pod.name != node_zero:
            zero = [p for p in cluster.pods_of(pod.owner, pod.generation) if p.name == node_zero]
            return zero[0].exit_code if zero and zero[0].finished else None
        code = self._work(cluster, pod, owner)
        labels = (owner.manifest.get("metadata") or {}).get("labels") or {}
        if code == 0 and {owner.name, labels.get(FABRIC_CHECK_LABEL)} & self.below_floor:
            cluster.say(f"pod {pod.name}: bus bandwidth below the floor")
            return BELOW_FLOOR
        return code

    def _release(self, cluster: "SimulatedCluster", pod: "Pod", container: Mapping[str, Any]) -> Optional[int]:
        release = cluster.workloads[pod.owner]
        if release.name in self.failing and release.failures == 0:
            return 1
        env = {e["name"]: e.get("value", "") for e in container.get("env") or ()}
        if env["HELD_JOB"] not in self._held:
            self._held[env["HELD_JOB"]] = json.loads(expand(env["HELD_JOB"], {}))
        held = self._held[env["HELD_JOB"]]
        namespace, waits = container["command"][2], [r for a in container["command"][4:] for r in a.split()]
        held_ref = ref_of(held)
        existing = cluster.workloads.get(f"{held_ref.split('/')[0]}/{namespace}/{held_ref.split('/')[1]}")
        if existing is not None:
            return 0 if existing.owner == pod.owner else NEVER
        action, detail = decide(wait_states(waits, lambda ref: _status(cluster, namespace, ref)))
        if action == "wait":
            return None
        if action == "fail":
            cluster.say(f"{pod.owner}: {detail} failed, {held_ref} never created")
            return NEVER
        cluster.create(owned_manifest(held, release.name, pod.owner), owner=pod.owner)
        return 0

    def _work(self, cluster: "SimulatedCluster", pod: "Pod", owner: Any) -> Optional[int]:
        size = gang_size(owner)
        if size > 1 and pod.ticks == 0:
            peers = [
                p
                for p in cluster.pods_of(pod.owner, pod.generation)
                if p.phase == "Running" and p.step >= len(p.spec.get("initContainers") or ())
            ]
            if len(peers) < size:
                pod.waited += 1
                return 1 if pod.waited > RENDEZVOUS_TIMEOUT_TICKS else None
        pod.ticks += 1
        name = owner.name if owner is not None else ""
        if name in self.failing and owner.attempt == 0 and owner.failures == 0:
            return 1
        return 0 if pod.ticks >= WORK_TICKS else None


def gang_size(owner: Any) -> int:
    """How many pods of one attempt rendezvous: a Volcano job's ``minAvailable``, a TrainJob's ``numNodes``, else 1."""
    if owner is None:
        return 1
    spec = owner.manifest.get("spec") or {}
    if owner.kind == "vcjob":
        return int(spec.get("minAvailable") or 1)
    if owner.kind == "trainjob":
        return int(spec["trainer"]["numNodes"])
    return 1


def _is_fabric_check(container: Mapping[str, Any]) -> bool:
    return any(m.get("mountPath") == PROGRAM_MOUNT for m in container.get("volumeMounts") or ())


def _is_release(container: Mapping[str, Any]) -> bool:
    command = container.get("command") or []
    return command[:2] == ["python3", RELEASE_PROGRAM_PATH]


def _status(cluster: "SimulatedCluster", namespace: str, ref: str) -> Optional[Dict[str, Any]]:
    from rehearsal.workload_controllers import status_of

    kind, name = ref.split("/")
    return status_of(cluster.workloads.get(f"{kind}/{namespace}/{name}"))
