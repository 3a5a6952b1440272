"""The run directory: where a training container's launch script, liveness probe and training script exchange files.

The progress file (:mod:`~trainium_eks.manifests.jobs.progress_watch`) and the stop file
(:mod:`~trainium_eks.manifests.jobs.graceful_stop`) live in :data:`RUN_DIRECTORY`, an ``emptyDir`` volume of the pod
mounted in its training container, not in the image's own file system: the library then owns the directory whatever
the image puts at ``/tmp`` (a ``tmpfs``, a cleaner, a read-only root), and no file of an image or a user's claim is in
the way. An ``emptyDir`` lives as long as the pod, not the container: "a container crashing does not remove a Pod from
a node. The data in an emptyDir volume is safe across container crashes" (Kubernetes documentation, Volumes,
emptyDir). A container restarted in place (a PyTorchJob's ``OnFailure``) therefore finds the last files of the one
before it; its launch script removes the stop file and writes ``start`` to the progress file before anything else
(:meth:`~trainium_eks.manifests.jobs.graceful_stop.GracefulStop.trap_lines`,
:meth:`~trainium_eks.manifests.jobs.progress_watch.ProgressWatch.launch_lines`), so it starts as a new one would.
"""

from __future__ import annotations

from typing import Any, Dict

RUN_DIRECTORY = "/run/trainium-eks"
"""The mount path of the run directory in a training container."""
RUN_VOLUME = "trainium-eks-run"
"""The name of the pod's ``emptyDir`` volume mounted at :data:`RUN_DIRECTORY`."""


def run_volume() -> Dict[str, Any]:
    """The pod's volume of the run directory: an ``emptyDir`` on the node's disk (a few bytes)."""
    return {"name": RUN_VOLUME, "emptyDir": {}}


def run_mount() -> Dict[str, Any]:
    """The training container's mount of :func:`run_volume` at :data:`RUN_DIRECTORY`."""
    return {"name": RUN_VOLUME, "mountPath": RUN_DIRECTORY}
