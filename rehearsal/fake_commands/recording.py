"""What every fake command shares: the result it records, the cluster model it changes, the files it reads."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

from rehearsal.fake_commands import CLUSTER_ENV, LOG_ENV

if TYPE_CHECKING:
    from rehearsal.cluster_model import Cluster, Outcome


class CommandError(Exception):
    """The fake refuses the command line (an argument the rehearsal does not know): exit status 2."""


@dataclass
class Result:
    """What one command did.

    :param exit_code: Its exit status.
    :param stdout: What it printed.
    :param stderr: Its error output.
    :param effects: (op, target) of every change to the cluster model.
    :param files: Files it read: path -> {"text": content, "sha256": digest, "objects": summaries}.
    :param cluster: The cluster it worked on.
    """

    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    effects: List[Tuple[str, str]] = field(default_factory=list)
    files: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    cluster: Optional[str] = None

    def take(self, outcome: "Outcome") -> "Result":
        """Fold a model outcome into this result."""
        self.effects.extend((effect.op, effect.target) for effect in outcome.effects)
        self.stdout += "".join(line + "\n" for line in outcome.output)
        self.stderr += "".join(line + "\n" for line in outcome.errors)
        self.exit_code = max(self.exit_code, outcome.exit_code)
        return self


def parse_objects(text: str) -> List[Dict[str, Any]]:
    """The objects of a manifest file: a stream of JSON documents, one after the other (what the handler writes:
    ``{ r1 }{ r2 }``), or one JSON document holding a list."""
    decoder = json.JSONDecoder()
    objects: List[Dict[str, Any]] = []
    index = 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            return objects
        value, index = decoder.raw_decode(text, index)
        objects.extend(value if isinstance(value, list) else [value])


def summarize(obj: Mapping[str, Any]) -> str:
    """``apiVersion Kind namespace/name`` of a manifest object."""
    metadata = obj.get("metadata") or {}
    where = f"{metadata['namespace']}/{metadata.get('name')}" if metadata.get("namespace") else metadata.get("name")
    return f"{obj.get('apiVersion')} {obj.get('kind')} {where}"


def read_file(path: str, result: Result) -> str:
    """Read ``path`` and record its content."""
    text = Path(path).read_text()
    entry: Dict[str, Any] = {"text": text, "sha256": hashlib.sha256(text.encode()).hexdigest()}
    try:
        entry["objects"] = [summarize(obj) for obj in parse_objects(text)]
    except ValueError:
        entry["objects"] = []
    result.files[path] = entry
    return text


def cluster_name_from_kubeconfig(path: str) -> str:
    """The EKS cluster name in a kubeconfig written by the fake ``aws eks update-kubeconfig``."""
    config = json.loads(Path(path).read_text())
    return str(config["current-context"]).rpartition("/")[2]


def cluster_exists(cluster_name: str) -> bool:
    """Whether the cluster model holds ``cluster_name`` (read without loading the model)."""
    clusters = json.loads(Path(os.environ[CLUSTER_ENV]).read_text())["clusters"]
    return any(cluster["name"] == cluster_name for cluster in clusters)


def with_cluster(cluster_name: str, result: Result, action: Callable[["Cluster"], "Outcome"]) -> Result:
    """Run ``action`` on the named cluster of the model and save the model; fail as kubectl does when the cluster
    does not exist (its API endpoint no longer resolves)."""
    from rehearsal.cluster_model import ClusterModel

    path = Path(os.environ[CLUSTER_ENV])
    model = ClusterModel.load(path)
    result.cluster = cluster_name
    cluster = model.clusters.get(cluster_name)
    if cluster is None:
        result.exit_code = 1
        result.stderr += (
            f"Unable to connect to the server: dial tcp: lookup {cluster_name}.eks.amazonaws.com: no such host\n"
        )
        return result
    result.take(action(cluster))
    model.save(path)
    return result


def run(tool: str, argv: List[str]) -> int:
    """Run the fake ``tool`` with ``argv``, print its output, append its record to the log, return its status."""
    from rehearsal.fake_commands import aws, helm, kubectl

    mains: Dict[str, Callable[[List[str]], Result]] = {"aws": aws.main, "helm": helm.main, "kubectl": kubectl.main}
    try:
        result = mains[tool](argv)
    except CommandError as error:
        result = Result(exit_code=2, stderr=f"rehearsal: {tool} {' '.join(argv)}: {error}\n")
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    record = {
        "tool": tool,
        "argv": argv,
        "cwd": os.getcwd(),
        "exit_code": result.exit_code,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "effects": result.effects,
        "files": result.files,
        "cluster": result.cluster,
    }
    with open(os.environ[LOG_ENV], "a") as log:
        log.write(json.dumps(record) + "\n")
    return result.exit_code
