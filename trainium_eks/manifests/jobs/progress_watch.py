"""ProgressWatch: a training container that stops making steps is killed by its kubelet, and its job restarts.

A hung run (a collective that never returns because one node's fabric or device broke, a rendezvous that never
forms) looks healthy to every controller: its pods are Running and its containers alive. Only the training process
knows it is making steps, so it says so: after every optimizer step, the local rank 0 of each container replaces
the file :data:`PROGRESS_FILE_ENV` names with one line, ``<step> <unix time>`` (the seed images' scripts do; any
script may: write a temporary file, then rename it over the progress file). The container's launch script writes
``start <unix time>`` there first. The kubelet runs :data:`LIVENESS_SCRIPT` in the container every
:data:`PROBE_PERIOD_SECONDS`; it fails when that line is older than its bound: the startup bound before the first
step (loading, rendezvous, the first graph's compilation), the stall bound after it. Two failures in a row (a probe
that times out counts as one: kubernetes v1.36.3 ``pkg/probe/exec/exec.go``) make the kubelet kill the container
(``pkg/kubelet/kuberuntime/kuberuntime_manager.go`` ``computePodActions``: "failed liveness probe") and record a
``Warning`` event ``Unhealthy`` on the pod whose message is ``Liveness probe failed: `` and the probe's output
(``pkg/kubelet/prober/prober.go``), which names the last step and its age. With ``restartPolicy: Never`` (Volcano
jobs, TrainJobs) the pod fails, provided the killed process does not exit 0 (the seed scripts do not catch
``SIGTERM``), and the job's failure policy restarts the whole gang, counted against its retries. A PyTorchJob's
container (``OnFailure``) is restarted in place, and each of its stalled peers in turn; the operator counts every
container's restarts against ``backoffLimit`` (kubeflow/trainer v1.9.4 ``pkg/controller.v1/common/job.go``
``PastBackoffLimit``), so one stall of a PyTorchJob of ``max_retries`` nodes or more fails it. A job with a graceful
stop (:mod:`~trainium_eks.manifests.jobs.graceful_stop`) keeps its launch script as the container's process 1, which
the kill reaches first; it exits non-zero, or the kubelet's SIGKILL ends it after :data:`PROBE_GRACE_SECONDS`.

The probe's output and the bounds travel in the container's environment (:meth:`ProgressWatch.env`), which a
probe's command sees (the kubelet runs it in the container, as ``kubectl exec`` runs a command), so one probe serves
every job: the Trainer's runtime carries it for every TrainJob (a TrainJob's patches cannot add a probe), and a
container without :data:`PROGRESS_FILE_ENV` passes it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Dict, List

from trainium_eks.core.validation import Problems, check_integer, check_optional_settings
from trainium_eks.manifests.jobs.run_directory import RUN_DIRECTORY

PROGRESS_FILE_ENV = "TRAINIUM_EKS_PROGRESS_FILE"
"""The environment variable that names the progress file; a training script writes there when it is set."""
STARTUP_ENV = "TRAINIUM_EKS_STARTUP_SECONDS"
STALL_ENV = "TRAINIUM_EKS_STALL_SECONDS"
PROGRESS_FILE = f"{RUN_DIRECTORY}/progress"
"""Where the progress file is: in the pod's run directory (:mod:`~trainium_eks.manifests.jobs.run_directory`), where
a restarted container's launch script writes ``start`` again before anything else."""

PROBE_PERIOD_SECONDS = 60
"""How often the kubelet runs the probe; a stall is found within this much of its bound."""
PROBE_TIMEOUT_SECONDS = 10
FAILURE_THRESHOLD = 2
"""Failures in a row that stop the container: a stall is acted on up to two periods after its bound."""
PROBE_GRACE_SECONDS = 30
"""The grace of a container the probe stops, whatever the pod's (the probe's own ``terminationGracePeriodSeconds``,
which the kubelet uses for a liveness kill: kubernetes v1.36.3 ``pkg/kubelet/kuberuntime/kuberuntime_container.go``
``setTerminationGracePeriod``): a stalled run makes no step, so a longer grace for a checkpoint
(:mod:`~trainium_eks.manifests.jobs.graceful_stop`) would only be waited out."""
MAX_SECONDS = 24 * 3600
"""The longest bound: 24 hours."""

LIVENESS_SCRIPT = f"""F="${{{PROGRESS_FILE_ENV}:-}}"
[ -n "$F" ] || exit 0
if ! {{ read -r step at || [ -n "$at" ]; }} 2>/dev/null < "$F"; then
  echo "no progress file $F: the launch script writes it first"; exit 1
fi
case "$at" in ''|*[!0-9]*) echo "$F does not read <step> <unix time>: $step $at"; exit 1;; esac
age=$(( $(date +%s) - at ))
if [ "$step" = start ]; then limit="${STARTUP_ENV}" what="no first training step"
else limit="${STALL_ENV}" what="no training step after step $step"; fi
[ "$age" -le "$limit" ] && exit 0
echo "$what for $age s (bound $limit s): the container is stopped, its job restarts"
exit 1"""
"""The liveness probe's shell script: passes without :data:`PROGRESS_FILE_ENV` or within the bound; otherwise prints
what it found (the event's message) and fails."""


@dataclass(frozen=True)
class ProgressWatch:
    """How long a training container may go without a step before its kubelet stops it (see the module). Give it to
    a job chart as ``progress``; the training script must write the progress file (the seed images' scripts do).

    :param startup_seconds: From the container's start to its first completed step: loading, the rendezvous of every
        node, the first graph's compilation on Neuron (unless the compile cache has it). From 300 s to 24 h.
        Default: 3600.
    :param stall_seconds: Between two steps after the first, an evaluation pass, a checkpoint save or a later graph
        compiled for the first time included (a stall bound shorter than a compilation kills every attempt at the
        same point). From 300 s to 24 h. Default: 1800.
    """

    startup_seconds: int = 3600
    stall_seconds: int = 1800

    def check(self, problems: Problems, setting: str) -> bool:
        """Every field is an integer in its range; each wrong one is a problem named ``<setting>.<field>``."""
        good = True
        for field in fields(self):
            value = getattr(self, field.name)
            good &= check_integer(problems, f"{setting}.{field.name}", value, minimum=300, maximum=MAX_SECONDS)
        return good

    def env(self) -> Dict[str, str]:
        """The container's variables: the progress file and both bounds."""
        return {
            PROGRESS_FILE_ENV: PROGRESS_FILE,
            STARTUP_ENV: str(self.startup_seconds),
            STALL_ENV: str(self.stall_seconds),
        }

    def launch_lines(self) -> List[str]:
        """The launch script's first line: the container's start, from which the startup bound counts."""
        return [f'echo "start $(date +%s)" > "${PROGRESS_FILE_ENV}"']


def liveness_probe() -> Dict[str, Any]:
    """The training container's liveness probe (:data:`LIVENESS_SCRIPT`), run by ``sh`` every
    :data:`PROBE_PERIOD_SECONDS`; two failures in a row stop the container, with :data:`PROBE_GRACE_SECONDS` of grace
    (the script's own bounds are the tolerance of a stall; the second failure keeps one slow probe on a busy node,
    which the kubelet counts as a failure, from stopping a run)."""
    return {
        "exec": {"command": ["sh", "-c", LIVENESS_SCRIPT]},
        "periodSeconds": PROBE_PERIOD_SECONDS,
        "timeoutSeconds": PROBE_TIMEOUT_SECONDS,
        "failureThreshold": FAILURE_THRESHOLD,
        "terminationGracePeriodSeconds": PROBE_GRACE_SECONDS,
    }


def check_progress(problems: Problems, setting: str, value: object) -> bool:
    """``value`` is None or a :class:`ProgressWatch` whose fields are in range."""
    return check_optional_settings(problems, setting, value, ProgressWatch, "None or a ProgressWatch")
