"""What a deployed stack has on the test cluster, read from the API server: which of its objects exist (and with
which uid: an object deleted and created again has a new one), every job in its namespaces, and the revision of each
of its Helm releases (Helm's storage, the Secrets ``sh.helm.release.v1.<release>.v<revision>`` labelled
``owner=helm``: an upgrade adds a revision, an uninstall and install starts again at 1)."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from e2e.api import Api, ApiError
from e2e.deploy import LiveStack
from e2e.seed_runs import JobRef
from rehearsal.handler import HANDLER_TYPES
from rehearsal.intrinsics import Resolver
from trainium_eks.manifests.jobs.job_release_program import API


def object_key(obj: Mapping[str, Any]) -> str:
    """``<Kind> <namespace>/<name>`` of a manifest or object."""
    meta = obj["metadata"]
    return f"{obj['kind']} {meta.get('namespace', '')}/{meta['name']}"


def uids(api: Api, objects: Iterable[Mapping[str, Any]]) -> Dict[str, str]:
    """:func:`object_key` -> uid of each of ``objects`` that exists on the cluster."""
    found = {}
    for obj in objects:
        meta = obj["metadata"]
        live = api.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace", "default"))
        if live is not None:
            found[object_key(obj)] = live["metadata"]["uid"]
    return found


def present(api: Api, objects: Iterable[Mapping[str, Any]]) -> List[str]:
    """:func:`object_key` of each of ``objects`` that exists on the cluster, in their order."""
    found = uids(api, objects)
    return [object_key(obj) for obj in objects if object_key(obj) in found]


def jobs_in(api: Api, namespaces: Iterable[str]) -> Set[JobRef]:
    """Every job of the kinds releases run (batch, Volcano, Trainer, training operator) in ``namespaces``, as
    (namespace, ``<kind>/<name>``), except the Jobs of a JobSet (a TrainJob's: part of it); a kind whose CRD is not
    installed has none."""
    found: Set[JobRef] = set()
    for namespace in sorted(set(namespaces)):
        for kind, (api_version, object_kind, _) in API.items():
            try:
                items = api.list(api_version, object_kind, namespace)
            except ApiError as error:
                if error.status != 404:
                    raise
                continue
            found.update(
                (namespace, f"{kind}/{item['metadata']['name']}")
                for item in items
                if not any(owner.get("kind") == "JobSet" for owner in item["metadata"].get("ownerReferences") or ())
            )
    return found


def releases(live: LiveStack) -> List[Tuple[str, str]]:
    """(namespace, release) of every Helm release of the stack's deployed template."""
    template = live.deployment.template
    resolver = Resolver(template, live.deployment.resources, live.identity)
    found = []
    for resource in (template.get("Resources") or {}).values():
        if resource["Type"] == HANDLER_TYPES[1]:
            properties = resolver.resolve(resource["Properties"])
            found.append((properties.get("Namespace") or "default", properties["Release"]))
    return found


def helm_revision(api: Api, namespace: str, release: str) -> Optional[int]:
    """The newest revision Helm stores of ``release`` (None: not installed)."""
    secrets = api.list("v1", "Secret", namespace, selector=f"owner=helm,name={release}")
    return max((int(secret["metadata"]["labels"]["version"]) for secret in secrets), default=None)
