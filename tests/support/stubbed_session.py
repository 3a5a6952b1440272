"""A boto3 session for the commands' tests: real clients (fake credentials, no network) under botocore's Stubber."""

from __future__ import annotations

from typing import Any, Sequence

import boto3
from botocore.stub import Stubber


class StubbedSession:
    """A session whose clients of ``services`` answer only what the test added to :attr:`stubs`.

    :param services: The services of the clients, e.g. ``("sts", "iam")``.
    :param region: The session's region.
    """

    def __init__(self, services: Sequence[str], region: str) -> None:
        session = boto3.Session(aws_access_key_id="x", aws_secret_access_key="y", region_name=region)
        self.region_name = region
        self.clients = {name: session.client(name) for name in services}
        self.stubs = {name: Stubber(client) for name, client in self.clients.items()}
        for stub in self.stubs.values():
            stub.activate()

    def client(self, name: str) -> Any:
        return self.clients[name]

    def verify(self) -> None:
        """Every response the test added was asked for."""
        for stub in self.stubs.values():
            stub.assert_no_pending_responses()
