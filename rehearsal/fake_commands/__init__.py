"""Recording stand-ins for the ``aws``, ``kubectl`` and ``helm`` commands the kubectl handler of aws-eks-v2 runs.

:func:`install` writes one shell shim per command into a directory that goes first (and alone) on the handler's
``PATH``; each shim runs ``python -m rehearsal.fake_commands <command> <args>`` with the Python that
runs the rehearsal. Every run appends one JSON line to the file named by :data:`LOG_ENV` (the arguments, the files
it read, its output, its errors and what it changed) and applies its effect to the cluster model stored in the file
named by :data:`CLUSTER_ENV` (:class:`~rehearsal.cluster_model.ClusterModel`). Nothing reaches a
cluster, a registry or AWS.
"""

from __future__ import annotations

import shlex
import stat
from pathlib import Path

CLUSTER_ENV = "TRAINIUM_EKS_REHEARSAL_CLUSTER"
"""Environment variable: path of the cluster model's JSON file."""

LOG_ENV = "TRAINIUM_EKS_REHEARSAL_LOG"
"""Environment variable: path of the command log (one JSON object per line)."""

COMMANDS = ("aws", "helm", "kubectl")
"""The commands the handler runs."""


def install(bin_dir: Path, *, python: str, import_root: Path) -> None:
    """Write the shims of :data:`COMMANDS` into ``bin_dir``.

    :param python: The interpreter that runs the fakes (``sys.executable``).
    :param import_root: The directory that holds the ``rehearsal`` and ``trainium_eks`` packages.
    """
    bin_dir.mkdir(parents=True, exist_ok=True)
    for command in COMMANDS:
        shim = bin_dir / command
        shim.write_text(
            "#!/bin/sh\n"
            f"PYTHONPATH={shlex.quote(str(import_root))} exec {shlex.quote(python)} -S "
            f'-m rehearsal.fake_commands {command} "$@"\n'
        )
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
