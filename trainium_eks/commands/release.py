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
kubectl, what the release needs (the namespace's release program of this library version, the permission to
create the job's kind and to read the kinds it waits for, each job it waits for or that job's release, the NodePool),
then creates it and prints how to follow it.

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
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import yaml

from trainium_eks.commands.kubectl import KubectlError, cluster_hint, reason, run_kubectl
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
    kubelet_literal,
    release_job,
)
from trainium_eks.manifests.jobs.job_release_program import (
    API,
    DEADLINE_MARGIN_SECONDS,
    NODE_POOL_ANNOTATION,
    gang_pods,
    pod_requests,
    ref_of,
    unlabelled_pods,
)

MAX_NAME = 63 - len("-release")
"""The longest job name whose release Job's name fits a label value (the Job controller labels its pods with it)."""
MAX_TRAINJOB_NAME = 48
"""The longest TrainJob name whose JobSet the Trainer's webhook admits (its pod names must fit 63 characters)."""
DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
"""Names of the gang kinds: their pods' host names and Services (Volcano's ``svc`` plugin, JobSet's headless Service)
must be DNS-1035 labels."""
MAX_HELD_BYTES = 120_000
"""The largest held manifest: it travels as one environment string, which Linux caps at 128 KiB (``MAX_ARG_STRLEN``);
above, the release's container cannot start."""
SERVER_FIELDS = (
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
)
"""Metadata the API server sets, which a manifest exported with ``kubectl get -o yaml`` carries and a create refuses
(``resourceVersion``) or ignores; the release sets the owner."""
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
JOB_CONTROLLER_LABELS = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
)
"""The labels the Job controller puts on a batch/v1 Job's pod template and selector (an exported Job carries them,
and a new Job with them is refused unless ``manualSelector``)."""


class ReleaseError(ValueError):
    """The manifest or a setting cannot be released."""


def as_created(manifest: Dict[str, Any]) -> Dict[str, Any]:
    """``manifest`` as a create takes it: without what the API server set (:data:`SERVER_FIELDS`, ``status``, the
    last-applied annotation) and, for a batch/v1 Job without ``manualSelector``, without the Job controller's selector
    and template labels."""
    clean = json.loads(json.dumps(manifest))
    clean.pop("status", None)
    metadata = clean.setdefault("metadata", {})
    for key in SERVER_FIELDS:
        metadata.pop(key, None)
    annotations = metadata.get("annotations") or {}
    annotations.pop(LAST_APPLIED, None)
    if not annotations:
        metadata.pop("annotations", None)
    spec = clean.get("spec") or {}
    if clean.get("apiVersion") == "batch/v1" and not spec.get("manualSelector"):
        spec.pop("selector", None)
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        for label in JOB_CONTROLLER_LABELS:
            labels.pop(label, None)
    return clean


def held_release(
    manifest: Any,
    *,
    namespace: Optional[str] = None,
    wait_for: Sequence[str] = (),
    node_pool: Optional[str] = None,
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS,
) -> Dict[str, Any]:
    """The release Job of ``manifest`` (a job of :data:`API`'s kinds; :func:`as_created`), held until ``wait_for``
    have completed and, for a gang, until its nodes are held; ``namespace`` defaults to the manifest's, else
    ``training``. ConfigurationError listing every problem."""
    problems = Problems("release")
    ref = ref_of(manifest) if isinstance(manifest, dict) else None
    if ref is None:
        problems.add("manifest", _kind(manifest), "one batch/v1 Job, Volcano Job, TrainJob or PyTorchJob")
        problems.raise_if_any()
    manifest = as_created(manifest)
    kind = ref.split("/")[0]
    metadata = manifest.get("metadata") or {}
    name, own_namespace = metadata.get("name"), metadata.get("namespace")
    namespace = namespace or own_namespace or DEFAULT_NAMESPACE
    if not name and metadata.get("generateName"):
        problems.add("metadata.generateName", metadata["generateName"], "a fixed metadata.name (the release names it)")
    elif check_dns_subdomain(problems, "metadata.name", name):
        if len(name) > MAX_NAME:
            problems.add("metadata.name", name, f"at most {MAX_NAME} characters (its release Job is <name>-release)")
        if kind != "job" and not DNS_1035_LABEL.fullmatch(name):
            problems.add(
                "metadata.name",
                name,
                "a DNS-1035 label (a letter, then letters, digits and '-'): its pods' host names and Services carry it",
            )
        if kind == "trainjob" and len(name) > MAX_TRAINJOB_NAME:
            problems.add(
                "metadata.name", name, f"at most {MAX_TRAINJOB_NAME} characters (the Trainer's JobSet webhook)"
            )
    check_dns_label(problems, "namespace", namespace)
    if own_namespace and own_namespace != namespace:
        problems.add("namespace", namespace, f"the manifest's own namespace, {own_namespace}")
    waits = list(wait_for)
    if check_references(problems, "wait_for", waits) and f"{kind}/{name}" in waits:
        problems.add("wait_for", f"{kind}/{name}", "other jobs than this one (it would wait for itself)")
    if node_pool is not None:
        check_dns_label(problems, "node_pool", node_pool)
    check_integer(
        problems, "timeout_seconds", timeout_seconds, minimum=DEADLINE_MARGIN_SECONDS + 60, maximum=MAX_TIMEOUT_SECONDS
    )
    problems.raise_if_any()
    _check_gang(problems, kind, manifest, waits)
    held = json.loads(json.dumps(manifest))
    held_metadata = held.setdefault("metadata", {})
    held_metadata["namespace"] = namespace
    held_metadata["annotations"] = {
        **(held_metadata.get("annotations") or {}),
        **held_annotations(waits),
        **({NODE_POOL_ANNOTATION: node_pool} if node_pool else {}),
    }
    held_text = json.dumps(held, sort_keys=True)
    if len(kubelet_literal(held_text).encode()) > MAX_HELD_BYTES:
        problems.add(
            "manifest",
            f"{len(held_text)} bytes",
            f"at most {MAX_HELD_BYTES} bytes as JSON (one environment "
            "string of the release's container): move large scripts or data into a ConfigMap",
        )
        problems.raise_if_any()
    return release_job(namespace, held_name=name, held_text=held_text, wait_for=waits, timeout_seconds=timeout_seconds)


def _check_gang(problems: Problems, kind: str, manifest: Dict[str, Any], waits: Sequence[str]) -> None:
    """The job is one a release can hold: a TrainJob says its size; a gang's pods request what its nodes hold; a job
    of one pod waits for something."""
    trainer = (manifest.get("spec") or {}).get("trainer") or {}
    if kind == "trainjob" and not isinstance(trainer.get("numNodes"), int):
        problems.add(
            "spec.trainer.numNodes",
            trainer.get("numNodes"),
            "the TrainJob's node count (its release holds that many nodes; the runtime's count is not in the manifest)",
        )
        problems.raise_if_any()
    if unlabelled_pods(manifest):
        problems.add(
            "spec.runtimePatches",
            "no pod template of the 'node' replicated job",
            "that pod template (its release labels it for the job's peers policy, without which the pods admit no "
            "connection, each other's neither; its placement is that of the capacity pods too)",
        )
        problems.raise_if_any()
    try:
        shapes = gang_pods(manifest)
    except (TypeError, ValueError) as error:
        problems.add("manifest", ref_of(manifest), f"replicas that are whole numbers ({error})")
        problems.raise_if_any()
    if any(not pod_requests(pod) for _, pod in shapes):
        where = "spec.trainer.resourcesPerNode" if kind == "trainjob" else "each task's container resources"
        problems.add(
            where,
            "none",
            "what each pod needs of its node (its capacity pods request the same, so that they "
            "hold nodes the gang fits)",
        )
    if not shapes and not waits:
        problems.add(
            "manifest",
            ref_of(manifest),
            "a gang of two pods or more, or a job that waits for others (--wait-for): a job of one pod that waits for "
            "nothing needs no release, apply it with kubectl",
        )
    problems.raise_if_any()


def _kind(manifest: Any) -> str:
    if isinstance(manifest, dict):
        return f"{manifest.get('apiVersion', '?')} {manifest.get('kind', '?')}"
    return type(manifest).__name__


class _NoTimestamps(yaml.SafeLoader):
    """YAML as kubectl reads it into JSON: a date stays a string (``value: 2024-01-01``)."""


_NoTimestamps.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_manifest(path: Path) -> Any:
    """The one object of ``path`` (JSON or YAML; ``-``: standard input)."""
    text = sys.stdin.read() if str(path) == "-" else path.read_text()
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        documents = [doc for doc in yaml.load_all(text, Loader=_NoTimestamps) if doc is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ReleaseError(f"{path}: not YAML or JSON{where} ({getattr(error, 'problem', None) or error})") from error
    if len(documents) != 1:
        raise ReleaseError(f"{path}: {len(documents)} objects; give one job per release")
    return documents[0]


NODE_POOL_RESOURCE = "nodepools.karpenter.sh"


def resource_of(kind: str) -> str:
    """kubectl's fully qualified resource of a job kind of :data:`API` (``vcjob`` -> ``jobs.batch.volcano.sh``)."""
    api_version, _, collection = API[kind]
    group = api_version.rpartition("/")[0]
    return collection.rsplit("/", 1)[1] + (f".{group}" if group else "")


def existing(namespace: Optional[str], names: Sequence[str], stack: str, what: str) -> List[str]:
    """Which of ``names`` (``<resource>/<name>``) exist, in ``namespace`` (None: cluster-scoped), through one
    ``kubectl get --ignore-not-found``; a resource the cluster does not serve is a :class:`ReleaseError` naming
    ``what`` needs it."""
    where = ["-n", namespace] if namespace else []
    done = run_kubectl([*where, "get", *names, "--ignore-not-found", "-o", "name"], stack, "get")
    if "doesn't have a resource type" in done.stderr:
        raise ReleaseError(f"{what} needs a kind the cluster does not serve ({reason(done.stderr, done.returncode)})")
    if done.returncode != 0:
        raise KubectlError(f"kubectl get failed ({reason(done.stderr, done.returncode)}): {cluster_hint(stack)}")
    return [line.split("/", 1)[1] for line in done.stdout.split()]


def release_may(verb: str, resource: str, namespace: str, stack: str) -> bool:
    """Whether the namespace's release account may ``verb`` the ``resource`` there (``kubectl auth can-i --as``); a
    resource the cluster does not serve is a :class:`ReleaseError`."""
    account = f"system:serviceaccount:{namespace}:{RELEASE_SERVICE_ACCOUNT}"
    done = run_kubectl(["auth", "can-i", verb, resource, "-n", namespace, f"--as={account}"], stack, "auth can-i")
    answer = done.stdout.strip()
    if "doesn't have a resource type" in done.stderr:
        raise ReleaseError(f"the cluster does not serve {resource}: install its controller and CRDs first")
    if done.returncode == 1 and answer.startswith("no"):
        return False
    if done.returncode != 0 or answer != "yes":
        raise KubectlError(f"kubectl auth can-i failed ({reason(done.stderr, done.returncode)}): {cluster_hint(stack)}")
    return True


def check_waits(namespace: str, waits: Sequence[str], timeout_seconds: int, stack: str) -> None:
    """Refuse a job waited for that neither exists in ``namespace`` nor has a release Job to create it: the release
    would wait for it until its deadline (a job's release that has failed fails the wait:
    ``job_release_program.wait_states``)."""
    for ref in waits:
        kind, name = ref.split("/", 1)
        found = existing(namespace, [f"{resource_of(kind)}/{name}", f"jobs.batch/{name}-release"], stack, ref)
        if not found:
            raise ReleaseError(
                f"{ref} is not in {namespace}, and no release there creates it (job/{name}-release): the release "
                f"would wait for it for {timeout_seconds} s; create it or its release first, or drop --wait-for {ref}"
            )


def check_node_pool(node_pool: str, stack: str) -> None:
    """Refuse a NodePool the cluster does not have: the gang's capacity pods would wait for a pool that cannot
    launch their nodes."""
    if not existing(None, [f"{NODE_POOL_RESOURCE}/{node_pool}"], stack, f"--node-pool {node_pool}"):
        raise ReleaseError(
            f"the cluster has no NodePool {node_pool} (kubectl get {NODE_POOL_RESOURCE}): name the pool of the "
            "gang's nodes (TrainingNodePool.pool_name)"
        )


def apply(
    release: Dict[str, Any],
    held_ref: str,
    stack: str,
    *,
    waits: Sequence[str] = (),
    node_pool: Optional[str] = None,
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS,
) -> List[str]:
    """Check what the release of ``held_ref`` (``<kind>/<name>``) needs through kubectl (the namespace's release
    program of this version and release account, the right to create the kind, which the cluster serves, the jobs it
    waits for, its NodePool), then create it; the lines to print."""
    namespace = release["metadata"]["namespace"]
    kind = held_ref.split("/")[0]
    resource = resource_of(kind)
    needs = (
        (
            "configmap",
            RELEASE_PROGRAM_CONFIG_MAP,
            f"ReleaseProgramChart(namespace={namespace!r})",
            "release program of this library version",
        ),
        (
            "serviceaccount",
            RELEASE_SERVICE_ACCOUNT,
            f"JobReleaseAccessChart(namespace={namespace!r})",
            "release service account",
        ),
    )
    for what, name, chart, meaning in needs:
        done = run_kubectl(["-n", namespace, "get", what, name, "-o", "name"], stack, f"get {what}")
        if done.returncode != 0 and "NotFound" in done.stderr:
            raise ReleaseError(
                f"namespace {namespace} has no {meaning} ({what}/{name}): deploy a stack of this version whose "
                f"JobSequence has a job there, or apply {chart}"
            )
        if done.returncode != 0:
            raise KubectlError(
                f"kubectl get {what} failed ({reason(done.stderr, done.returncode)}): {cluster_hint(stack)}"
            )
    account = f"system:serviceaccount:{namespace}:{RELEASE_SERVICE_ACCOUNT}"
    if not release_may("create", resource, namespace, stack):
        raise ReleaseError(
            f"releases in {namespace} may not create {resource} ({account}): apply "
            f"JobReleaseCreatorChart(namespace={namespace!r}, kind={kind!r}), or JobSequence.release_prerequisites"
        )
    if not release_may("create", "networkpolicies", namespace, stack):
        raise ReleaseError(
            f"releases in {namespace} may not create NetworkPolicies ({account}), so cannot give {held_ref} its peers "
            f"policy: apply JobReleaseAccessChart(namespace={namespace!r}) and PeersPolicyAdmissionChart("
            f"namespace={namespace!r}) of this library version, or JobSequence.release_prerequisites"
        )
    for ref in waits:
        if not release_may("get", resource_of(ref.split("/")[0]), namespace, stack):
            raise ReleaseError(
                f"releases in {namespace} may not read {resource_of(ref.split('/')[0])} ({account}), so cannot wait "
                f"for {ref}: apply JobReleaseAccessChart(namespace={namespace!r}) of this library version"
            )
    check_waits(namespace, waits, timeout_seconds, stack)
    if node_pool:
        check_node_pool(node_pool, stack)
    name = release["metadata"]["name"]
    done = run_kubectl(["create", "-f", "-", "-o", "name"], stack, "create", stdin=json.dumps(release))
    if done.returncode != 0 and "AlreadyExists" in done.stderr:
        raise ReleaseError(
            f"job/{name} exists in {namespace}: delete it (kubectl -n {namespace} delete job/{name}, which deletes "
            f"{held_ref} too) or rename the job"
        )
    if done.returncode != 0:
        raise KubectlError(f"kubectl create failed ({reason(done.stderr, done.returncode)})")
    return [
        f"created {done.stdout.strip()} in {namespace}: it creates {held_ref} once its waits have completed and its "
        "nodes are held",
        f"follow it: kubectl -n {namespace} logs -f job/{name}; its events: kubectl -n {namespace} get events "
        f"--field-selector involvedObject.name={name}",
    ]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainium_eks release", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "-f", "--filename", type=Path, required=True, help="the job's manifest (YAML or JSON; -: stdin)"
    )
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
        applied = apply(
            release,
            ref_of(manifest),
            options.stack,
            waits=options.wait_for,
            node_pool=options.node_pool,
            timeout_seconds=options.timeout_seconds,
        )
        for line in applied:
            print(line)
    except (ConfigurationError, ReleaseError, KubectlError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
