"""``python -m trainium_eks release``: a gang or a waiting job of your own manifest, created by a release.

A gang (a Volcano Job, TrainJob or PyTorchJob of two pods or more) applied with ``kubectl`` is scheduled by Volcano
as soon as part of it fits, and Karpenter then launches too few nodes; a job that should wait for another starts at
once. The library's job charts are created by release Jobs that hold every node first and wait
(:class:`~trainium_eks.manifests.jobs.job_release.JobReleaseChart`); this command gives a manifest of your own the
same release:

    python -m trainium_eks release -f job.yaml [--wait-for vcjob/<name> ...] [--node-pool <NodePool>] [--apply]

It reads one job (YAML or JSON), marks it held (the annotations a release reads, which also make the namespace's
admission policy refuse it to anyone but its release: :mod:`~trainium_eks.manifests.access.held_job_admission`),
and prints the release Job that creates it, for ``kubectl create -f -``. With ``--apply`` it first checks, through
kubectl, what the release needs in the namespace (the release program of this library version, the permission to
create the job's kind), then creates it and prints how to follow it.

- ``--wait-for``: jobs it waits for (``job/<name>``, ``vcjob/<name>``, ``trainjob/<name>``, ``pytorchjob/<name>``).
- ``--node-pool``: the Karpenter NodePool of a gang's nodes (``TrainingNodePool.pool_name``), so that its release waits
  while other jobs hold the pool at its limit instead of counting attempts.
- ``--timeout-seconds``: the release Job's deadline (default 14 days).
- Capacity settings are the job's own annotations (``trainium-eks/capacity-attempts``, ...:
  :data:`~trainium_eks.manifests.jobs.job_release_program.CAPACITY_SETTINGS`).

Exit status: 0 when printed (or created); 2 when the manifest or a setting is refused, or kubectl cannot do it; each
refusal is one line that says what to change.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import yaml

from trainium_eks.commands.kubectl import KubectlError, kubectl
from trainium_eks.core.conventions import DEFAULT_NAMESPACE
from trainium_eks.core.validation import (
    ConfigurationError,
    Problems,
    check_dns_label,
    check_dns_subdomain,
    check_integer,
)
from trainium_eks.manifests.jobs.job_release import (
    DEFAULT_TIMEOUT_SECONDS,
    MAX_TIMEOUT_SECONDS,
    RELEASE_PROGRAM_CONFIG_MAP,
    RELEASE_SERVICE_ACCOUNT,
    check_references,
    held_annotations,
    is_held,
    release_job,
)
from trainium_eks.manifests.jobs.job_release_program import API, DEADLINE_MARGIN_SECONDS, NODE_POOL_ANNOTATION, ref_of

MAX_NAME = 63 - len("-release")
"""The longest job name whose release Job's name fits a label value (the Job controller labels its pods with it)."""


class ReleaseError(ValueError):
    """The manifest or a setting cannot be released."""


def held_release(
    manifest: Any,
    *,
    namespace: Optional[str] = None,
    wait_for: Sequence[str] = (),
    node_pool: Optional[str] = None,
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS,
) -> Dict[str, Any]:
    """The release Job of ``manifest`` (a job of :data:`API`'s kinds), held until ``wait_for`` have completed and, for a
    gang, until its nodes are held; ``namespace`` defaults to the manifest's, else ``training``. ConfigurationError
    listing every problem."""
    problems = Problems("release")
    ref = ref_of(manifest) if isinstance(manifest, dict) else None
    if ref is None:
        problems.add("manifest", _kind(manifest), "one batch/v1 Job, Volcano Job, TrainJob or PyTorchJob")
        problems.raise_if_any()
    metadata = manifest.get("metadata") or {}
    name, own_namespace = metadata.get("name"), metadata.get("namespace")
    namespace = namespace or own_namespace or DEFAULT_NAMESPACE
    if check_dns_subdomain(problems, "metadata.name", name) and len(name) > MAX_NAME:
        problems.add("metadata.name", name, f"at most {MAX_NAME} characters (its release Job is <name>-release)")
    if metadata.get("generateName") and not name:
        problems.add("metadata.generateName", metadata["generateName"], "a fixed metadata.name (the release names it)")
    check_dns_label(problems, "namespace", namespace)
    if own_namespace and own_namespace != namespace:
        problems.add("namespace", namespace, f"the manifest's own namespace, {own_namespace}")
    waits = list(wait_for)
    check_references(problems, "wait_for", waits)
    if node_pool is not None:
        check_dns_label(problems, "node_pool", node_pool)
    check_integer(
        problems, "timeout_seconds", timeout_seconds, minimum=DEADLINE_MARGIN_SECONDS + 60, maximum=MAX_TIMEOUT_SECONDS
    )
    problems.raise_if_any()
    if not is_held(manifest, waits):
        problems.add(
            "manifest",
            ref,
            "a gang of two pods or more, or a job that waits for others (--wait-for): a job of one pod that waits for "
            "nothing needs no release, apply it with kubectl",
        )
        problems.raise_if_any()
    held = json.loads(json.dumps(manifest))
    held_metadata = held.setdefault("metadata", {})
    held_metadata["namespace"] = namespace
    held_metadata["annotations"] = {
        **(held_metadata.get("annotations") or {}),
        **held_annotations(waits),
        **({NODE_POOL_ANNOTATION: node_pool} if node_pool else {}),
    }
    return release_job(
        namespace,
        held_name=name,
        held_text=json.dumps(held, sort_keys=True),
        wait_for=waits,
        timeout_seconds=timeout_seconds,
    )


def _kind(manifest: Any) -> str:
    if isinstance(manifest, dict):
        return f"{manifest.get('apiVersion', '?')} {manifest.get('kind', '?')}"
    return type(manifest).__name__


def read_manifest(path: Path) -> Any:
    """The one object of ``path`` (YAML or JSON)."""
    try:
        documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    except yaml.YAMLError as error:
        raise ReleaseError(f"{path}: not YAML or JSON ({error})") from error
    if len(documents) != 1:
        raise ReleaseError(f"{path}: {len(documents)} objects; give one job per release")
    return documents[0]


def apply(release: Dict[str, Any], held_ref: str, stack: str) -> List[str]:
    """Check what the release of ``held_ref`` (``<kind>/<name>``) needs in its namespace through kubectl, then create
    it; the lines to print."""
    namespace = release["metadata"]["namespace"]
    kind = held_ref.split("/")[0]
    api_version, _, collection = API[kind]
    group = api_version.rpartition("/")[0]
    resource = collection.rsplit("/", 1)[1] + (f".{group}" if group else "")
    try:
        kubectl(["-n", namespace, "get", "configmap", RELEASE_PROGRAM_CONFIG_MAP, "-o", "name"], stack, "get configmap")
    except KubectlError as error:
        raise ReleaseError(
            f"namespace {namespace} has no release program of this library version ({RELEASE_PROGRAM_CONFIG_MAP}): "
            "deploy a stack of this version whose JobSequence has a job there, or apply "
            f"ReleaseProgramChart(namespace={namespace!r}) ({error})"
        ) from error
    account = f"system:serviceaccount:{namespace}:{RELEASE_SERVICE_ACCOUNT}"
    allowed = kubectl(
        ["auth", "can-i", "create", resource, "-n", namespace, f"--as={account}"], stack, "auth can-i", ok_codes=(0, 1)
    ).strip()
    if allowed != "yes":
        raise ReleaseError(
            f"releases in {namespace} may not create {resource} ({account}: {allowed or 'no answer'}): apply "
            f"JobReleaseCreatorChart(namespace={namespace!r}, kind={kind!r}), or JobSequence.release_prerequisites"
        )
    created = kubectl(["create", "-f", "-", "-o", "name"], stack, "create", stdin=json.dumps(release)).strip()
    name = release["metadata"]["name"]
    return [
        f"created {created} in {namespace}: it creates {held_ref} once its waits have completed and its nodes are held",
        f"follow it: kubectl -n {namespace} logs -f job/{name}; its events: kubectl -n {namespace} get events "
        f"--field-selector involvedObject.name={name}",
    ]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainium_eks release", description=__doc__.split("\n\n")[0])
    parser.add_argument("-f", "--filename", type=Path, required=True, help="the job's manifest (YAML or JSON)")
    parser.add_argument("--namespace", help="default: the manifest's, else training")
    parser.add_argument("--wait-for", action="append", default=[], metavar="KIND/NAME", help="a job it waits for")
    parser.add_argument("--node-pool", help="the Karpenter NodePool of a gang's nodes")
    parser.add_argument("--timeout-seconds", type=int, default=DEFAULT_TIMEOUT_SECONDS, help="the release's deadline")
    parser.add_argument("--apply", action="store_true", help="check the namespace and create it with kubectl")
    parser.add_argument("--stack", default="TrainiumEks", help="the stack whose cluster kubectl points at (hints)")
    options = parser.parse_args(argv)
    try:
        manifest = read_manifest(options.filename)
        release = held_release(
            manifest,
            namespace=options.namespace,
            wait_for=options.wait_for,
            node_pool=options.node_pool,
            timeout_seconds=options.timeout_seconds,
        )
        if not options.apply:
            print(yaml.safe_dump(release, sort_keys=False), end="")
            return 0
        for line in apply(release, ref_of(manifest), options.stack):
            print(line)
    except (ConfigurationError, ReleaseError, KubectlError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
