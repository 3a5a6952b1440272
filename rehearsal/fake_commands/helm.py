"""The fake ``helm``: ``upgrade --install``, ``uninstall``, ``pull --untar`` and ``registry login``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List, Optional

from rehearsal.fake_commands.recording import (
    CommandError,
    Result,
    cluster_name_from_kubeconfig,
    read_file,
    with_cluster,
)

VALUE_OPTIONS = ("--repo", "--values", "--version", "--namespace", "--timeout", "--kubeconfig", "--username")
FLAG_OPTIONS = ("--install", "--create-namespace", "--wait", "--skip-crds", "--atomic", "--untar", "--password-stdin")


def parse(argv: List[str]) -> Dict[str, Optional[str]]:
    """Positional arguments (``arg0``, ``arg1``, ...) and options of a Helm command line."""
    options: Dict[str, Optional[str]] = {}
    positional = 0
    args = iter(argv)
    for arg in args:
        name, has_value, value = arg.partition("=")
        if name in VALUE_OPTIONS:
            options[name] = value if has_value else next(args, None)
        elif arg in FLAG_OPTIONS:
            options[arg] = "true"
        elif arg.startswith("-"):
            raise CommandError(f"unknown argument {arg!r}")
        else:
            options[f"arg{positional}"] = arg
            positional += 1
    return options


def chart_of(reference: str, repository: Optional[str], version: Optional[str]) -> tuple:
    """(chart name, version) of a chart reference: a local directory made by ``helm pull --untar`` (its
    Chart.yaml), or a chart name in ``repository``."""
    directory = Path(reference)
    if directory.is_dir() and (directory / "Chart.yaml").is_file():
        fields = dict(
            line.split(": ", 1) for line in (directory / "Chart.yaml").read_text().splitlines() if ": " in line
        )
        return fields["name"], fields["version"]
    if repository is None or version is None:
        raise CommandError(f"chart {reference!r} is neither a pulled chart nor in a --repo at a --version")
    return reference, version


def main(argv: List[str]) -> Result:
    """Run ``helm <argv>``."""
    if not argv:
        raise CommandError("a subcommand is required")
    command, options = argv[0], parse(argv[1:])
    result = Result()
    if command == "registry" and options.get("arg0") == "login":
        result.files["<stdin>"] = {"text": "<password>" if sys.stdin.read() else "", "sha256": "", "objects": []}
        result.stdout = "Login Succeeded\n"
        return result
    if command == "pull":
        repository, version = options.get("arg0"), options.get("--version")
        if not repository or not version or not options.get("--untar"):
            raise CommandError("pull needs a chart reference, --version and --untar")
        name = repository.rpartition("/")[2]
        Path(name).mkdir(exist_ok=True)
        Path(name, "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: {version}\n")
        result.stdout = f"Pulled: {repository}:{version}\n"
        return result
    kubeconfig = options.get("--kubeconfig")
    release, namespace = options.get("arg0"), options.get("--namespace") or "default"
    if not kubeconfig or not release:
        raise CommandError("a release and --kubeconfig are required")
    cluster_name = cluster_name_from_kubeconfig(kubeconfig)
    if command == "upgrade":
        if not options.get("--install") or not options.get("arg1"):
            raise CommandError("only 'upgrade <release> <chart> --install' is modelled")
        chart, version = chart_of(str(options["arg1"]), options.get("--repo"), options.get("--version"))
        values = json.dumps(json.loads(read_file(str(options["--values"]), result))) if options.get("--values") else ""
        return with_cluster(
            cluster_name,
            result,
            lambda c: c.helm_upgrade_install(
                str(release),
                namespace=namespace,
                chart=chart,
                version=version,
                values=values,
                create_namespace=bool(options.get("--create-namespace")),
            ),
        )
    if command == "uninstall":
        return with_cluster(cluster_name, result, lambda c: c.helm_uninstall(str(release), namespace=namespace))
    raise CommandError(f"helm {command} is not modelled")
