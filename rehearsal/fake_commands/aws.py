"""The fake ``aws``: ``eks update-kubeconfig`` and the registry passwords the Helm handler asks for."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import List

from rehearsal.fake_commands.recording import CommandError, Result, cluster_exists

PASSWORD = "rehearsal-registry-password"
"""What ``get-login-password`` prints."""


def _option(argv: List[str], name: str) -> str:
    if name not in argv or argv.index(name) + 1 >= len(argv):
        raise CommandError(f"{name} is required")
    return argv[argv.index(name) + 1]


def update_kubeconfig(argv: List[str]) -> Result:
    """``aws eks update-kubeconfig --name N --kubeconfig P``: write a kubeconfig for cluster N, or fail as the CLI
    does when EKS has no such cluster."""
    name, path = _option(argv, "--name"), _option(argv, "--kubeconfig")
    region = os.environ.get("AWS_REGION", "us-east-1")
    result = Result(cluster=name)
    if not cluster_exists(name):
        result.exit_code = 254
        result.stderr = (
            "An error occurred (ResourceNotFoundException) when calling the DescribeCluster operation: "
            f"No cluster found for name: {name}.\n"
        )
        return result
    arn = f"arn:aws:eks:{region}:123456789012:cluster/{name}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": arn, "cluster": {"server": f"https://{name}.eks.rehearsal.invalid"}}],
        "contexts": [{"name": arn, "context": {"cluster": arn, "user": arn}}],
        "current-context": arn,
        "users": [{"name": arn, "user": {}}],
    }
    Path(path).write_text(json.dumps(config))
    result.stdout = f"Added new context {arn} to {path}\n"
    return result


def main(argv: List[str]) -> Result:
    """Run ``aws <argv>``."""
    if argv[:2] == ["eks", "update-kubeconfig"]:
        return update_kubeconfig(argv[2:])
    if argv[:2] in (["ecr", "get-login-password"], ["ecr-public", "get-login-password"]):
        return Result(stdout=PASSWORD)
    raise CommandError("not modelled (chart assets from S3 are not rehearsed)")
