"""Fixtures of the preflight tests: the Lambda modules loaded by path, one moto mock for the whole run, and a session
that hands out Stubber-backed clients for the services moto does not implement (Service Quotas' EC2 quotas, capacity
reservations, EKS cluster versions, CloudFormation stacks) and moto-backed clients for the rest."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List

import pytest

from tests.support.preflight_aws import MixedSession
from trainium_eks.core.lambda_sources import module_spec

SOURCE = Path(__file__).resolve().parents[2] / "lambda" / "preflight"


def _load(name: str) -> ModuleType:
    """``lambda/preflight/<name>.py``, or the package ``lambda/preflight/<name>/``, as the module ``name`` (index.py
    imports ``preflight_checks`` by that name)."""
    spec = module_spec(name, SOURCE, name)
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == spec.origin:
        return sys.modules[name]
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def checks() -> ModuleType:
    return _load("preflight_checks")


@pytest.fixture(scope="session")
def index(checks) -> ModuleType:
    return _load("index")


@pytest.fixture(scope="package")
def aws():
    """moto's mock of every AWS API, started once for this folder's tests (moto is slow to start) and stopped after
    them; each test keeps to its own resources (its own VPC, region or metric dimensions)."""
    from moto import mock_aws

    mock = mock_aws()
    mock.start()
    yield mock
    mock.stop()


@pytest.fixture
def mixed(checks) -> MixedSession:
    return MixedSession()


class Recorder(BaseHTTPRequestHandler):
    """Keeps every PUT it receives (the CloudFormation response URL's stand-in)."""

    received: List[Dict[str, Any]] = []

    def do_PUT(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        self.received.append(
            {"path": self.path, "headers": dict(self.headers.items()), "body": json.loads(body), "raw": body}
        )
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def response_url():
    """A server on 127.0.0.1 that takes the PUT of a response: yields (url, received)."""
    Recorder.received = []
    server = HTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/response?X-Amz-Signature=abc", Recorder.received
    finally:
        server.shutdown()
        server.server_close()
