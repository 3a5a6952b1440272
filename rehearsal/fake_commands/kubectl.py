"""The fake ``kubectl``: ``apply``, ``create`` and ``delete`` with ``-f``, and ``get <type> <name> -o=jsonpath=...``
(what aws-eks-v2's ``KubernetesObjectValue`` handler runs), on the cluster model."""

from __future__ import annotations

from typing import Dict, List, Optional

from rehearsal.fake_commands.recording import (
    CommandError,
    Result,
    cluster_name_from_kubeconfig,
    parse_objects,
    read_file,
    with_cluster,
)

VALUE_OPTIONS = {"--kubeconfig": "kubeconfig", "-f": "filename", "--filename": "filename", "-l": "selector"}
VALUE_OPTIONS["--selector"] = "selector"
FLAG_OPTIONS = {"--prune": "prune", "--save-config": "save_config"}


def parse(argv: List[str]) -> Dict[str, Optional[str]]:
    """The verb and options of a kubectl command line; CommandError on anything the rehearsal does not model."""
    if not argv or argv[0] not in ("apply", "create", "delete"):
        raise CommandError("only apply, create and delete are modelled")
    options: Dict[str, Optional[str]] = {"verb": argv[0]}
    args = iter(argv[1:])
    for arg in args:
        name, has_value, value = arg.partition("=")
        if name in VALUE_OPTIONS:
            options[VALUE_OPTIONS[name]] = value if has_value else next(args, None)
        elif arg in FLAG_OPTIONS:
            options[FLAG_OPTIONS[arg]] = "true"
        elif name == "--validate" and value in ("false", "true", "strict", "warn", "ignore"):
            options["validate"] = value
        else:
            raise CommandError(f"unknown argument {arg!r}")
    if not options.get("kubeconfig") or not options.get("filename"):
        raise CommandError("--kubeconfig and -f are required")
    if options.get("prune") and options["verb"] != "apply":
        raise CommandError("--prune is an option of apply")
    if options.get("prune") and not options.get("selector"):
        raise CommandError("error: all resources selected for prune without explicitly passing --all")
    return options


def parse_get(argv: List[str]) -> Dict[str, str]:
    """``--kubeconfig K get -n NS TYPE NAME -o=jsonpath='{PATH}'`` (the get handler's command line)."""
    options: Dict[str, str] = {}
    words: List[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--kubeconfig":
            options["kubeconfig"] = next(args, "")
        elif arg == "-n":
            options["namespace"] = next(args, "")
        elif arg.startswith("-o=jsonpath="):
            options["jsonpath"] = arg[len("-o=jsonpath=") :]
        elif arg.startswith("-"):
            raise CommandError(f"unknown argument {arg!r}")
        else:
            words.append(arg)
    if words[:1] != ["get"] or len(words) != 3 or "jsonpath" not in options or "kubeconfig" not in options:
        raise CommandError("only get <type> <name> -o=jsonpath=... is modelled")
    options["type"], options["name"] = words[1], words[2]
    return options


def main(argv: List[str]) -> Result:
    """Run ``kubectl <argv>`` against the cluster model."""
    if "get" in argv:
        get = parse_get(argv)
        cluster_name = cluster_name_from_kubeconfig(get["kubeconfig"])
        return with_cluster(
            cluster_name,
            Result(),
            lambda c: c.get(get["type"], get["name"], get.get("namespace", ""), get["jsonpath"]),
        )
    options = parse(argv)
    result = Result()
    file_name = str(options["filename"])
    objects = parse_objects(read_file(file_name, result))
    cluster_name = cluster_name_from_kubeconfig(str(options["kubeconfig"]))
    verb = options["verb"]
    if verb == "create":
        return with_cluster(
            cluster_name,
            result,
            lambda c: c.create(objects, save_config=bool(options.get("save_config")), file_name=file_name),
        )
    if verb == "apply":
        selector = options.get("selector") if options.get("prune") else None
        return with_cluster(cluster_name, result, lambda c: c.apply(objects, selector=selector, file_name=file_name))
    return with_cluster(cluster_name, result, lambda c: c.delete(objects, file_name=file_name))
