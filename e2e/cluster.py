"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
kwok, built from their Go modules (:mod:`e2e.build`).

Every server binds 127.0.0.1 on a port of the test process's own block (:func:`free_port`); the test run is in a
network namespace with only loopback up (``make e2e``), so a pod or service address (10.x) that a component dials
fails at once. Authentication: a static admin token (group ``system:masters``) for the harness, the control plane
and kwok; service-account tokens (TokenRequest, signed by the cluster's key) for the components that run as pods, so
that their RBAC is the real check. kwok plays kubelet for every node annotated ``kwok.x-k8s.io/node: fake`` (the
nodes the harness adds and the nodes Karpenter's kwok provider launches), with the stages of :mod:`e2e.kwok_stages`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

import requests

from e2e.api import Api
from e2e.csi import CsiRegistrations
from e2e.kwok_stages import write_stages
from e2e.pki import CertificateAuthority, service_account_keys
from e2e.processes import HarnessError, ProcessGroup, wait_for
from e2e.service_proxy import ServiceProxy

KWOK_NODE_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
"""The annotation of every node kwok manages (Karpenter's kwok provider sets it on the nodes it launches)."""

SERVICE_CIDR = "10.96.0.0/16"
STARTUP_TIMEOUT = 120.0
"""Seconds a control-plane server gets to answer its health check."""


PORTS_PER_WORKER = 2000
"""How many ports each test process hands out before it starts again at the first of its block."""

MAX_WORKERS = 10
"""How many test processes get a block (12000-31999)."""

PORT_BLOCKS_BASE = 12000
"""The first port of worker ``gw0``'s block. Blocks lie below Linux's default ephemeral range (32768-60999,
``net.ipv4.ip_local_port_range``), so no outgoing connection's source port and no server bound to port 0 takes one."""


def worker_port_block(worker: str) -> range:
    """The ports the test process ``worker`` (pytest-xdist's ``PYTEST_XDIST_WORKER``: ``gw0``, ``gw1`` ...; anything
    else is one process alone) hands out: a block of its own, so that two workers never hand out the same port.

    A port the operating system picks (binding port 0) is free when it is picked, not when the server that is given
    the number binds it: all the workers share one network namespace, and another worker's probe could be given the
    same number in between (an etcd failed with ``bind: address already in use`` that way)."""
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    if index >= MAX_WORKERS:
        raise HarnessError(f"worker {worker}: at most {MAX_WORKERS} workers have port blocks of their own")
    first = PORT_BLOCKS_BASE + index * PORTS_PER_WORKER
    return range(first, first + PORTS_PER_WORKER)


class PortAllocator:
    """Hands out the ports of one block in turn, skipping any that cannot be bound now (a server still on it, or a
    connection of its in TIME_WAIT)."""

    def __init__(self, block: Sequence[int]) -> None:
        self._block = block
        self._next = 0

    def take(self) -> int:
        """The next port of the block that 127.0.0.1 can bind now (:class:`HarnessError` if a whole turn finds none)."""
        for _ in range(len(self._block)):
            port = self._block[self._next]
            self._next = (self._next + 1) % len(self._block)
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
        raise HarnessError(f"no port of {self._block!r} can be bound on 127.0.0.1")


_PORTS = PortAllocator(worker_port_block(os.environ.get("PYTEST_XDIST_WORKER", "")))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now and that no other test process hands out
    (:func:`worker_port_block`)."""
    return _PORTS.take()


def write_kubeconfig(path: Path, server: str, ca_file: Path, token: str) -> Path:
    """A kubeconfig for ``server`` as the holder of ``token``."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": "e2e", "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}],
        "current-context": "e2e",
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


class TestCluster:
    """The control plane and kwok, in a scratch folder; a context manager that stops everything on exit.

    :param binaries: Binary name -> path (:func:`e2e.build.binaries`).
    :param workdir: Where data, certificates and logs go (default: a new temporary folder, removed on exit unless
        the run failed).
    :param job_seconds: How long a job's pod runs on a kwok node before it succeeds (:mod:`e2e.kwok_stages`).
        Default: 0 (it succeeds once running).
    """

    __test__ = False  # not a pytest class

    def __init__(self, binaries: Mapping[str, Path], workdir: Optional[Path] = None, job_seconds: float = 0) -> None:
        self.binaries = dict(binaries)
        self.job_seconds = job_seconds
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="trainium-eks-e2e-"))
        self.processes = ProcessGroup(self.workdir / "logs")
        self.pki = CertificateAuthority(self.workdir / "pki")
        self.admin_token = secrets.token_hex(16)
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.api = Api(self.server, self.admin_token, str(self.pki.pair.cert))
        self.csi = CsiRegistrations()
        self.service_proxy: Optional[ServiceProxy] = None
        """How the API server reaches Services (webhooks), from :meth:`start` on (:mod:`e2e.service_proxy`)."""

    # --- lifecycle ---------------------------------------------------------------------------------------------

    def __enter__(self) -> "TestCluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        self.stop(keep=kind is not None)

    def start(self) -> None:
        """Start etcd, the API server (waiting until it is ready), the controller manager, the scheduler and kwok."""
        etcd_url = self._start_etcd()
        self._start_apiserver(etcd_url)
        write_kubeconfig(self.kubeconfig, self.server, self.pki.pair.cert, self.admin_token)
        self._start_controller_manager()
        self._start_scheduler()
        self._start_kwok()
        wait_for(
            "the default service account",
            lambda: self.api.get("v1", "ServiceAccount", "default", "default"),
            timeout=STARTUP_TIMEOUT,
            check=self.processes.check,
        )

    def stop(self, keep: bool = False) -> None:
        """Stop every process by its id, then the service proxy; remove the scratch folder unless ``keep`` (a failed
        run keeps its logs)."""
        self.processes.stop()
        if self.service_proxy is not None:
            self.service_proxy.stop()
            self.service_proxy = None
        if self._own_workdir and not keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _start_etcd(self) -> str:
        client, peer = free_port(), free_port()
        client_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        self.processes.start(
            "etcd",
            [
                str(self.binaries["etcd"]),
                "--name=e2e",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=e2e={peer_url}",
                "--listen-metrics-urls=",
                # A test cluster's data need not survive a power cut: no fsync (etcd's own flag for tests).
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        wait_for(
            "etcd",
            lambda: requests.get(f"{client_url}/health", timeout=2).json().get("health") == "true",
            timeout=STARTUP_TIMEOUT,
            check=self.processes.check,
        )
        return client_url

    def _start_apiserver(self, etcd_url: str) -> None:
        serving = self.pki.serving("kube-apiserver", ["kubernetes", "kubernetes.default", "kubernetes.default.svc"])
        sa_key, sa_pub = service_account_keys(self.pki.directory)
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f'{self.admin_token},e2e-admin,e2e-admin,"system:masters"\n')
        self.service_account_key = sa_key
        self.service_proxy = ServiceProxy()
        egress = self.workdir / "egress-selector.yaml"
        egress.write_text(self.service_proxy.egress_configuration())
        self.processes.start(
            "kube-apiserver",
            [
                str(self.binaries["kube-apiserver"]),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={self.pki.pair.cert}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-key-file={sa_pub}",
                f"--service-account-signing-key-file={sa_key}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--egress-selector-config-file={egress}",
                "--allow-privileged=true",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                "--v=1",
            ],
        )
        wait_for(
            "the API server",
            self.api.ready,
            timeout=STARTUP_TIMEOUT,
            check=self.processes.check,
        )

    def _start_controller_manager(self) -> None:
        self.processes.start(
            "kube-controller-manager",
            [
                str(self.binaries["kube-controller-manager"]),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--leader-elect=false",
                f"--root-ca-file={self.pki.pair.cert}",
                f"--service-account-private-key-file={self.service_account_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--use-service-account-credentials=true",
                f"--cert-dir={self.workdir / 'controller-manager-certs'}",
            ],
        )

    def _start_scheduler(self) -> None:
        self.processes.start(
            "kube-scheduler",
            [
                str(self.binaries["kube-scheduler"]),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--leader-elect=false",
                f"--cert-dir={self.workdir / 'scheduler-certs'}",
            ],
        )

    def _start_kwok(self) -> None:
        selector = ",".join(f"{k}={v}" for k, v in KWOK_NODE_ANNOTATION.items())
        self.processes.start(
            "kwok",
            [
                str(self.binaries["kwok"]),
                f"--kubeconfig={self.kubeconfig}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={selector}",
                "--node-ip=127.0.0.1",
                f"--server-address=127.0.0.1:{free_port()}",
                "--cidr=10.0.0.1/16",
                "--node-lease-duration-seconds=40",
                f"--config={write_stages(self.workdir / 'kwok-stages.yaml', self.job_seconds)}",
            ],
        )

    # --- nodes -------------------------------------------------------------------------------------------------

    def add_node(
        self,
        name: str,
        *,
        labels: Mapping[str, str],
        capacity: Mapping[str, str],
        taints: Sequence[Mapping[str, str]] = (),
    ) -> Dict[str, Any]:
        """A node kwok runs (Ready once kwok sees it), with ``labels``, ``capacity`` (also allocatable) and
        ``taints``."""
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels), "annotations": dict(KWOK_NODE_ANNOTATION)},
            "spec": {"taints": [dict(t) for t in taints]},
        }
        self.api.create(node)
        self.api.patch(
            "v1",
            "Node",
            name,
            {"status": {"capacity": dict(capacity), "allocatable": dict(capacity)}},
            subresource="status",
        )
        wait_for(
            f"node {name} Ready",
            lambda: _condition(self.api.get("v1", "Node", name), "Ready") == "True",
            timeout=STARTUP_TIMEOUT,
            check=self.processes.check,
        )
        return self.api.get("v1", "Node", name) or {}

    # --- what a failing test prints ----------------------------------------------------------------------------

    def describe(self) -> str:
        """Nodes, pods and recent events (for a failure message)."""
        lines: List[str] = []
        try:
            for node in self.api.list("v1", "Node"):
                labels = node["metadata"].get("labels", {})
                lines.append(f"node {node['metadata']['name']} {labels.get('node.kubernetes.io/instance-type', '')}")
            for pod in self.api.list("v1", "Pod"):
                meta, status = pod["metadata"], pod.get("status", {})
                where = pod["spec"].get("nodeName")
                if not where:
                    scheduled = [c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"]
                    where = "(not scheduled" + "".join(f": {c.get('message')}" for c in scheduled) + ")"
                lines.append(f"pod {meta['namespace']}/{meta['name']} {status.get('phase')} on {where}")
            for event in self.api.list("v1", "Event")[-60:]:
                obj = event["involvedObject"]
                lines.append(f"event {obj.get('kind')}/{obj.get('name')} {event.get('reason')}: {event.get('message')}")
        except Exception as error:  # noqa: BLE001 - a description must not hide the failure it describes
            lines.append(f"(the cluster could not be described: {error})")
        return "\n".join(lines)

    def check(self) -> None:
        """Raise if a control-plane process has ended."""
        self.processes.check()


def _condition(obj: Optional[Mapping[str, Any]], kind: str) -> Optional[str]:
    for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition.get("status")
    return None


__all__ = ["HarnessError", "TestCluster", "write_kubeconfig", "free_port"]
