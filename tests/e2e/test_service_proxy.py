"""The API server's way to a Service on loopback (:mod:`e2e.service_proxy`): a CONNECT to a routed address reaches its
local port, both ways; one with no route is refused at once."""

from __future__ import annotations

import socket
import socketserver
import threading

from e2e.service_proxy import ServiceProxy


class Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data.upper())


def connect(proxy: ServiceProxy, authority: str) -> tuple:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(10)
    client.connect(str(proxy.socket_path))
    client.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    return client, client.recv(4096).decode()


def test_a_routed_service_address_reaches_its_port_and_another_is_refused():
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo) as echo, ServiceProxy() as proxy:
        threading.Thread(target=echo.serve_forever, daemon=True).start()
        proxy.route("10.96.0.10", 443, echo.server_address[1])
        client, answer = connect(proxy, "10.96.0.10:443")
        assert answer.startswith("HTTP/1.1 200")
        client.sendall(b"admission review")
        assert client.recv(4096) == b"ADMISSION REVIEW"
        client.close()
        refused, answer = connect(proxy, "10.96.0.11:443")
        assert answer.startswith("HTTP/1.1 503")
        refused.close()
        assert "udsName: " + str(proxy.socket_path) in proxy.egress_configuration()
        echo.shutdown()
    assert not proxy.socket_path.exists()
