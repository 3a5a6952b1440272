"""Pods as the API server lists them, for the commands' tests."""

from __future__ import annotations

from typing import Any, Dict, Mapping

from trainium_eks.manifests.jobs.progress_watch import PROGRESS_FILE, PROGRESS_FILE_ENV


def training_pod(
    name: str, labels: Mapping[str, str], phase: str = "Running", progress: bool = True, restarts: int = 0
) -> Dict[str, Any]:
    """A pod of namespace ``training`` with a sidecar and a ``train`` container (with the progress file's variable
    when ``progress``), in ``phase``, its ``train`` container restarted ``restarts`` times."""
    env = [{"name": PROGRESS_FILE_ENV, "value": PROGRESS_FILE}] if progress else []
    return {
        "metadata": {"name": name, "namespace": "training", "labels": dict(labels)},
        "spec": {"containers": [{"name": "sidecar"}, {"name": "train", "env": env}]},
        "status": {"phase": phase, "containerStatuses": [{"name": "train", "restartCount": restarts}]},
    }
