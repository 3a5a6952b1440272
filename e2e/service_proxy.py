"""How the API server reaches a webhook's Service on loopback: kube-apiserver sends its traffic to the cluster (webhook
calls among it) through the egress selector's ``cluster`` connection (k8s.io/apiserver v0.36.0
``pkg/util/webhook/authentication.go``: the dialer of a webhook's rest config is the egress dialer), here an HTTP
CONNECT proxy on a Unix socket (``pkg/server/egressselector/egress_selector.go``, ``udsHTTPConnectConnector``). A
webhook that names a Service is called as in a cluster: the API server resolves the Service to its ClusterIP and
port (``cmd/kube-apiserver/app/server.go`` ``buildServiceResolver``), verifies the server's certificate for
``<service>.<namespace>.svc`` against the webhook's ``caBundle`` (``pkg/util/webhook/client.go``), and asks the proxy
for ``<ClusterIP>:<port>``; the proxy connects it to the local port where the pod's webhook server listens (set by
:class:`e2e.components.ComponentRunner` once the pod runs), as kube-proxy would route it to the pod. The webhook
configurations are left as the charts and components write them. An address with no route is refused at once (a
pod's address, which no process serves here); loopback addresses pass through.
"""

from __future__ import annotations

import shutil
import socket
import socketserver
import tempfile
import threading
from pathlib import Path
from typing import Dict, Optional, Tuple

_HEADER_LIMIT = 16384


class ServiceProxy:
    """An HTTP CONNECT proxy on a Unix socket; a context manager that stops it on exit.

    :attr:`routes`: (ClusterIP, port) -> the loopback port that answers for it.
    """

    def __init__(self) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="e2e-egress-"))  # a short path: sockets allow 107 bytes
        self.socket_path = self._folder / "cluster.sock"
        self.routes: Dict[Tuple[str, int], int] = {}
        self._lock = threading.Lock()
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._handle(self.request)

        self._server = socketserver.ThreadingUnixStreamServer(str(self.socket_path), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="service-proxy", daemon=True)
        self._thread.start()

    def __enter__(self) -> "ServiceProxy":
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving and remove the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
        shutil.rmtree(self._folder, ignore_errors=True)

    def route(self, address: str, port: int, local_port: int) -> None:
        """Send connections for ``address:port`` to ``127.0.0.1:local_port``."""
        with self._lock:
            self.routes[(address, port)] = local_port

    def egress_configuration(self) -> str:
        """The ``--egress-selector-config-file`` content: the ``cluster`` traffic through this proxy."""
        return (
            "apiVersion: apiserver.k8s.io/v1beta1\n"
            "kind: EgressSelectorConfiguration\n"
            "egressSelections:\n"
            "- name: cluster\n"
            "  connection:\n"
            "    proxyProtocol: HTTPConnect\n"
            "    transport:\n"
            f"      uds: {{udsName: {self.socket_path}}}\n"
        )

    def _target(self, authority: str) -> Optional[int]:
        host, _, port = authority.rpartition(":")
        host = host.strip("[]")
        if not port.isdigit():
            return None
        if host in ("127.0.0.1", "localhost", "::1"):
            return int(port)
        with self._lock:
            return self.routes.get((host, int(port)))

    def _handle(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < _HEADER_LIMIT:
            chunk = client.recv(4096)
            if not chunk:
                return
            head += chunk
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        local_port = self._target(request_line[1]) if len(request_line) == 3 and request_line[0] == "CONNECT" else None
        if local_port is None:
            client.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", local_port), timeout=10)
        except OSError:
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        upstream.settimeout(None)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        rest = head.split(b"\r\n\r\n", 1)[1]
        if rest:
            upstream.sendall(rest)
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join(timeout=10)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy ``source`` to ``sink`` until either closes, then close the write side of ``sink``."""
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass
