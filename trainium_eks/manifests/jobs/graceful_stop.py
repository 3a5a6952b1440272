"""GracefulStop: a training container told to stop saves a checkpoint at its next step and exits, within its grace.

A node that will end drains its pods first, and each pod is deleted with its own grace: Karpenter evicts them through
the Eviction API with no grace of its own (kubernetes-sigs/karpenter v1.14.1
``pkg/controllers/node/termination/terminator/eviction.go``) on a Spot interruption warning, an interruptible
Capacity Reservation's warning, scheduled maintenance (aws/karpenter-provider-aws v1.14.1
``pkg/controllers/interruption/utils.go``: ``CordonAndDrain``) and 40 minutes before a Capacity Block ends
(``pkg/controllers/capacityreservation/expiration/controller.go``); a managed node group of a Capacity Block is scaled
to zero 40 minutes before its end, and EC2 terminates the block's instances from 30 minutes before it (EKS user
guide, "Capacity Blocks for ML" with managed node groups). The kubelet then sends the image's stop signal (SIGTERM) to
the container's process 1 only, and SIGKILL once the pod's ``terminationGracePeriodSeconds`` has passed (kubernetes
v1.36.3 ``pkg/kubelet/kuberuntime/kuberuntime_container.go`` ``killContainer``).

Process 1 used to be the launcher, which cannot spend that grace on a checkpoint: torchrun passes the signal to its
workers and kills them 30 seconds later, a bound torch 2.9 (the Neuron image's) does not let one change
(torch/distributed/elastic/agent/server/local_elastic_agent.py ``_shutdown``: ``PContext.close(timeout=30)``), and
Composer's launcher installs no handler, so as the namespace's process 1 it never receives the signal at all
(pid_namespaces(7)). With a graceful stop the launch script stays process 1 (:meth:`GracefulStop.trap_lines`,
:meth:`GracefulStop.launch_lines`): its first line traps SIGTERM, it starts the launcher in the background, and on the
signal writes the time into the file :data:`STOP_FILE_ENV` names and goes on waiting; the launcher and its workers get
no signal. The training script checks that file at every optimizer step, its ranks agree (any rank asked stops them all:
the save is collective), rank 0 writes the same atomic checkpoint as its periodic ones, and every rank exits with
:data:`STOPPED_EXIT` (the seed images' scripts do; any script may). A non-zero exit fails the pod, which a Volcano job's
``PodFailed -> RestartJob`` and a TrainJob's JobSet turn into a restart of the whole gang, counted against its retries;
it resumes from that checkpoint on new nodes. The launch script exits with the launcher's status. A PyTorchJob cannot
take one: its containers restart in place (``restartPolicy: OnFailure``), every node's counted against its
``backoffLimit``, so one node's end would spend a retry per node.

A gang that makes no step after the signal is not worth its grace: a collective whose peer is gone, for instance,
when the gang is restarted because one of its pods failed. When the job has a progress watch
(:mod:`~trainium_eks.manifests.jobs.progress_watch`), the launch script exits with :data:`STOPPED_EXIT` once
:attr:`GracefulStop.step_seconds` have passed since the signal with no step reported, and the kernel kills the rest of
the container's processes with it (process 1 of a PID namespace exiting ends the namespace), and at once when the
container had made no step by the signal (loading, the rendezvous, a first compilation: nothing to save, and a gang
restarted while it forms is not held up by its grace). "A step after the signal" is a step number other than the one
the progress file held when the signal came. A container stopped by its liveness probe gets the probe's own grace
(:data:`~trainium_eks.manifests.jobs.progress_watch.PROBE_GRACE_SECONDS`), not the pod's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from trainium_eks.core.validation import Problems, check_integer, check_optional_settings
from trainium_eks.manifests.jobs.run_directory import RUN_DIRECTORY

STOP_FILE_ENV = "TRAINIUM_EKS_STOP_FILE"
"""The environment variable that names the stop file; a training script stops at its next step once it exists."""
STOP_FILE = f"{RUN_DIRECTORY}/stop"
"""Where the stop file is: in the pod's run directory (:mod:`~trainium_eks.manifests.jobs.run_directory`), from which
a restarted container's launch script removes it first."""
STOPPED_EXIT = 143
"""The exit status of a training script stopped this way, and of a container the launch script ends after the signal:
128 + SIGTERM, as a shell reports a process the signal ended (torchrun reports its workers' failure as 1, Composer's
launcher as the first failed rank's status). Not 0: Volcano treats a pod that exits 0 as succeeded, not as one to
restart the job for (volcano-sh/volcano v1.15.1 ``pkg/controllers/job/job_controller_handler.go`` ``updatePod``)."""

MIN_GRACE_SECONDS = 30
MAX_GRACE_SECONDS = 3600


@dataclass(frozen=True)
class GracefulStop:
    """A training container's stop signal becomes a checkpoint at the next step (see the module). Give it to a job
    chart as ``graceful_stop``; the training script must read the stop file (the seed images' scripts do).

    :param grace_seconds: The pod's ``terminationGracePeriodSeconds``: the step in progress, the agreement, the
        checkpoint's save, and the exit. What AWS leaves: about 100 s after a Spot or interruptible Capacity
        Reservation warning (two minutes, less the warning's way to Karpenter and the eviction), about 9 minutes at a
        Capacity Block's end (drained 40 minutes before it, terminated from 30 minutes before it). From 30 s to 1 h.
        Default: 300.
    :param step_seconds: With a progress watch, how long after the signal the gang may go without a step before the
        container stops without a checkpoint. At most ``grace_seconds``. From 30 s to 1 h. Default: 120.
    """

    grace_seconds: int = 300
    step_seconds: int = 120

    def check(self, problems: Problems, setting: str) -> bool:
        """Both fields are integers in range, and the step bound is within the grace."""
        good = True
        for name in ("grace_seconds", "step_seconds"):
            good &= check_integer(
                problems,
                f"{setting}.{name}",
                getattr(self, name),
                minimum=MIN_GRACE_SECONDS,
                maximum=MAX_GRACE_SECONDS,
            )
        if good and self.step_seconds > self.grace_seconds:
            problems.add(f"{setting}.step_seconds", self.step_seconds, f"at most grace_seconds ({self.grace_seconds})")
            good = False
        return good

    def env(self) -> Dict[str, str]:
        """The container's variable: the stop file."""
        return {STOP_FILE_ENV: STOP_FILE}

    def trap_lines(self, progress_file_env: Optional[str]) -> List[str]:
        """The launch script's first lines: SIGTERM writes the signal's time to the stop file (and, with
        ``progress_file_env``, the progress watch's variable, notes the step reported by then). First, so that no
        signal finds process 1 without a handler: it would be dropped (pid_namespaces(7))."""
        stop = f'"${STOP_FILE_ENV}"'
        record = ""
        if progress_file_env is not None:
            record = f'signal_step=; {{ read -r signal_step _ < "${progress_file_env}"; }} 2>/dev/null; '
        message = "trainium-eks: stop signal; the training stops at its next step, with a checkpoint"
        return [
            f'rm -f {stop} "${STOP_FILE_ENV}.status"',
            f'trap \'{record}stopped=$(date +%s); echo "$stopped" > {stop}; echo "{message}"\' TERM',
        ]

    def launch_lines(self, launcher: str, progress_file_env: Optional[str]) -> List[str]:
        """The launch script's last lines: the shell command ``launcher`` runs in the background, its status
        written next to the stop file when it ends, while the script, process 1, waits and exits with that status.
        After the signal, with ``progress_file_env``, a launcher that had reported no step is stopped at once, and
        one that reports no step after the one it had within :attr:`step_seconds`, then; the container's end ends it
        (process 1 exiting ends the PID namespace). Needs :meth:`trap_lines` first; nothing in either needs more than
        bash 4."""
        stop = f'"${STOP_FILE_ENV}"'
        status = f'"${STOP_FILE_ENV}.status"'
        lines = [
            f"[ -e {stop} ] && exit {STOPPED_EXIT}",
            f"( {launcher}",
            f"  echo $? > {status} ) &",
            "launcher=$!",
            'while kill -0 "$launcher" 2>/dev/null; do',
            f'  if [ ! -e {stop} ]; then wait "$launcher"; continue; fi',
        ]
        if progress_file_env is not None:
            lines += [
                "  step=",
                f'  {{ read -r step _ < "${progress_file_env}"; }} 2>/dev/null',
                '  case "$signal_step" in',
                "    ''|start)",
                '      echo "trainium-eks: stop signal before the first training step; nothing to save"',
                f"      exit {STOPPED_EXIT};;",
                "  esac",
                f'  if [ "$step" = "$signal_step" ] && [ $(( $(date +%s) - stopped )) -ge {self.step_seconds} ]; then',
                f'    echo "trainium-eks: no training step within {self.step_seconds} s of the stop signal; '
                'stopped without a checkpoint"',
                f"    exit {STOPPED_EXIT}",
                "  fi",
            ]
        lines += [
            "  sleep 1",
            "done",
            "status=1",
            f"read -r status 2>/dev/null < {status}",
            'exit "$status"',
        ]
        return lines


def check_graceful_stop(problems: Problems, setting: str, value: object) -> bool:
    """``value`` is None or a :class:`GracefulStop` whose fields are in range."""
    return check_optional_settings(problems, setting, value, GracefulStop, "None or a GracefulStop")
