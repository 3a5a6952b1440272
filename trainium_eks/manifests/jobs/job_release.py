"""JobReleaseChart: a job that waits for others is held, and a small release Job creates it once they have completed."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence

from trainium_eks.core.conventions import EGRESS_KUBERNETES_API_LABEL, HELD_JOB_LABEL, SYSTEM_NODE_LABELS
from trainium_eks.core.validation import Problems, check_dns_label, check_dns_subdomain, check_integer, check_strings
from trainium_eks.facts import versions
from trainium_eks.manifests import audit_exceptions as audit
from trainium_eks.manifests.audit_exceptions import checkov_skips
from trainium_eks.manifests.chart import PART_OF, LibraryChart, locked_down_container, unprivileged_pod
from trainium_eks.manifests.jobs.job_deadline import MAX_DEADLINE_SECONDS
from trainium_eks.manifests.jobs.job_release_program import DEADLINE_MARGIN_SECONDS, NEVER, gang_pods, ref_of
from trainium_eks.manifests.jobs.mounted_program import MountedProgram, MountedProgramChart, program_source

RELEASE_PROGRAM = MountedProgram(
    name="release-program",
    file="job_release_program.py",
    mount="/opt/trainium-eks/release",
    source=program_source(Path(__file__).parent / "job_release_program.py"),
)
"""The release program (:mod:`~trainium_eks.manifests.jobs.job_release_program`, code only: :func:`program_source`),
which the release Jobs run from their namespace's ConfigMap (:class:`ReleaseProgramChart`): each release carries its
held job already, and the program would add 11 KB to the template per release."""

RELEASE_PROGRAM_SOURCE = RELEASE_PROGRAM.source
RELEASE_PROGRAM_CONFIG_MAP = RELEASE_PROGRAM.config_map
RELEASE_PROGRAM_MOUNT = RELEASE_PROGRAM.mount
RELEASE_PROGRAM_PATH = RELEASE_PROGRAM.path

RELEASE_IMAGE = versions.JOB_RELEASE_IMAGE.image

RELEASE_COMPONENT = "job-release"
"""The ``app.kubernetes.io/name`` of the release Jobs (:class:`JobReleaseChart`'s component)."""

RELEASE_SERVICE_ACCOUNT = "job-release"
"""Service account of release Jobs, which may read jobs and create the held kinds in their namespace
(:mod:`~trainium_eks.manifests.access.job_release_access`)."""

WAIT_FOR_ANNOTATION = "trainium-eks/wait-for"
"""Annotation of a held job: the jobs it was created after (``vcjob/<name> job/<name>``)."""
RELEASE_ANNOTATION = "trainium-eks/release"
"""Annotation of a held job: :data:`RELEASE_DIGEST`."""

DEFAULT_TIMEOUT_SECONDS = 14 * 24 * 3600
"""How long a release waits for the jobs it waits for, by default: 14 days, longer than the seed runs by far."""
MAX_TIMEOUT_SECONDS = MAX_DEADLINE_SECONDS

JOB_REFERENCE = re.compile(r"(job|vcjob|trainjob|pytorchjob)/[a-z0-9]([a-z0-9.-]*[a-z0-9])?")
"""A reference to a job of the namespace: ``job/<name>`` (batch/v1), ``vcjob/<name>`` (Volcano), ``trainjob/<name>``,
``pytorchjob/<name>``."""

_KUBELET_REFERENCE = re.compile(r"\$(?=[$(])")


def kubelet_literal(text: str) -> str:
    """``text`` escaped so that the kubelet's expansion of ``$(VAR)`` references in environment values and
    commands gives ``text`` back: every ``$`` followed by ``$`` or ``(`` doubled (Kubernetes
    ``third_party/forked/golang/expansion/expand.go``: ``$$`` gives ``$``, ``$(NAME)`` a variable, any other ``$x``
    itself). CDK tokens (``${Token[...]}``) are left as they are."""
    return _KUBELET_REFERENCE.sub("$$", text)


def check_references(problems: Problems, setting: str, refs: Any) -> bool:
    """``refs`` is a list of job references (:data:`JOB_REFERENCE`)."""
    if not check_strings(problems, setting, refs):
        return False
    bad = [ref for ref in refs if not JOB_REFERENCE.fullmatch(ref)]
    if bad:
        problems.add(setting, bad, "job charts, or references like job/<name>, vcjob/<name> or trainjob/<name>")
    return not bad


def is_held(job: Mapping[str, Any], wait_for: Sequence[str]) -> bool:
    """Whether the job ``job`` (a manifest) is created by a release rather than applied: when it waits for others, and
    when it is a gang of two pods or more, whose release holds all its nodes first and watches it until it ends
    (:func:`~trainium_eks.manifests.jobs.job_release_program.gang_pods`)."""
    return bool(wait_for) or bool(gang_pods(dict(job)))


def held_annotations(wait_for: Sequence[str]) -> Dict[str, str]:
    """The annotations of a job held until ``wait_for`` have completed (part of its hashed spec)."""
    return {WAIT_FOR_ANNOTATION: " ".join(wait_for), RELEASE_ANNOTATION: RELEASE_DIGEST}


class JobReleaseChart(LibraryChart):
    """The release Job of a held job: a batch/v1 Job on the system nodes that creates the held job once every job it
    waits for has completed.

    Why: a job that waits inside its own pods (an init container that polls) holds the devices, CPU and memory its
    pods request, on the very nodes the job it waits for needs; whichever job the scheduler admits first, the other
    can then never start. Until it is released, the held job does not exist in the cluster, so it holds nothing: no
    pod, no Volcano PodGroup, nothing reserved in a queue, in every order of arrival and after any restart of the jobs
    it waits for (a restarted job is still not complete). The release program
    (:mod:`~trainium_eks.manifests.jobs.job_release_program`) polls the jobs' status with the service account
    ``job-release``, then, for a gang of two pods or more, holds every node the gang needs with capacity Jobs of its
    pods' shape (:class:`~trainium_eks.manifests.jobs.job_release_program.Capacity`: a gang placed in part on nodes
    already up would otherwise never get the rest from Karpenter), then creates the held job with the release Job as
    its owner, and watches a gang until it ends, to hold its nodes again when a restart stalls
    (:class:`~trainium_eks.manifests.jobs.job_release_program.GangWatch`): when CloudFormation deletes the release
    Job (the held job changed, or left the app), Kubernetes' garbage collector deletes the held job (and any capacity
    Job) with it. A gang that waits for nothing has a release too (:func:`is_held`), for its nodes.

    The release Job, named ``<held job>-release``: the program, from the namespace's ConfigMap
    (:class:`ReleaseProgramChart`, applied before it), on Python's standard library in a pinned slim Python image
    (:data:`trainium_eks.facts.versions.JOB_RELEASE_IMAGE`), 10m CPU and 32 MiB (at most 200m and 64 MiB), on the system
    node group, as ``nobody`` with a read-only root and no capabilities, the only pods of the namespace that mount a
    service-account token and may reach the Kubernetes API (label
    :data:`~trainium_eks.core.conventions.EGRESS_KUBERNETES_API_LABEL`); ``activeDeadlineSeconds`` of
    ``timeout_seconds`` (the program reads it and gives up ten minutes before, naming the job it waited for, or
    stops watching a gang, which runs on); a pod
    failure policy that fails the Job at once when the held job can never be created (a job it waits for failed, the
    wait timed out, the API server refused the held job: exit status 3) and retries anything else (``backoffLimit`` 6; a
    pod disrupted by a node drain does not count). Its pod template is a function of the held job's name (whose hash
    covers the waits, the program and the image: :func:`held_annotations`), so it never has to change in place. It is
    kept when it finishes: it owns the held job.

    :param job: The held job's manifest (a job chart's :attr:`~trainium_eks.manifests.jobs.job_chart.JobChart.manifest`,
        with :func:`held_annotations`). Required.
    :param wait_for: The jobs to wait for (``vcjob/<name>``, ...); empty only for a gang. Required.
    :param timeout_seconds: How long to wait for them, from 11 minutes to 90 days. Default: 14 days.
    """

    def __init__(
        self, *, job: Mapping[str, Any], wait_for: Sequence[str], timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    ) -> None:
        problems = Problems("job release chart")
        held_ref = ref_of(job) if isinstance(job, Mapping) else None
        metadata = (job.get("metadata") or {}) if held_ref else {}
        annotations = metadata.get("annotations") or {}
        if not held_ref:
            problems.add("job", job, "the manifest of a batch/v1 Job, Volcano Job, TrainJob or PyTorchJob")
        else:
            check_dns_subdomain(problems, "job.metadata.name", metadata.get("name"))
            check_dns_label(problems, "job.metadata.namespace", metadata.get("namespace"))
            if annotations.get(RELEASE_ANNOTATION) != RELEASE_DIGEST:
                problems.add("job", held_ref, "a job whose spec carries held_annotations(wait_for) (JobChart does it)")
        if check_references(problems, "wait_for", wait_for):
            if held_ref and not is_held(job, wait_for):
                problems.add(
                    "wait_for",
                    wait_for,
                    "at least one job (a job of one pod that waits for nothing needs no release; a gang has one)",
                )
            elif (
                held_ref
                and annotations.get(RELEASE_ANNOTATION) == RELEASE_DIGEST
                and (annotations.get(WAIT_FOR_ANNOTATION) != held_annotations(wait_for)[WAIT_FOR_ANNOTATION])
            ):
                problems.add(
                    "job",
                    held_ref,
                    f"a job held until {' '.join(wait_for)} (its {WAIT_FOR_ANNOTATION} annotation names "
                    f"{annotations.get(WAIT_FOR_ANNOTATION)!r}: its name would not cover what the release waits for)",
                )
        check_integer(
            problems,
            "timeout_seconds",
            timeout_seconds,
            minimum=DEADLINE_MARGIN_SECONDS + 60,
            maximum=MAX_TIMEOUT_SECONDS,
        )
        problems.raise_if_any()
        metadata = job["metadata"]
        super().__init__(RELEASE_COMPONENT, namespace=metadata.get("namespace"))
        self.held_job: Dict[str, Any] = json.loads(json.dumps(job))
        """The held job's manifest."""
        self.held_ref: str = held_ref
        """``<kind>/<name>`` of the held job."""
        self.wait_for: List[str] = list(wait_for)
        """The jobs the release waits for (``<kind>/<name>``)."""
        self.job_name = f"{metadata['name']}-release"
        """The release Job's name."""
        self.add_object(
            release_job(
                self.namespace_name,
                held_name=metadata["name"],
                held_text=json.dumps(job, sort_keys=True),
                wait_for=self.wait_for,
                timeout_seconds=timeout_seconds,
            )
        )


def release_job(
    namespace: str, *, held_name: str, held_text: str, wait_for: Sequence[str], timeout_seconds: int
) -> Dict[str, Any]:
    """The release Job of the held job ``held_name`` (its manifest ``held_text``) in ``namespace``, as the chart of
    component :data:`RELEASE_COMPONENT` labels it (a plain dict: no chart is built, so the digest needs no jsii
    call). The hybrid workflow renders it too, with the run's TrainJob
    (:func:`~trainium_eks.constructs.private.release_template.release_template`)."""
    job_name = f"{held_name}-release"
    labels = {
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/name": RELEASE_COMPONENT,
        HELD_JOB_LABEL: held_name,
    }
    container = {
        "name": "release",
        "image": RELEASE_IMAGE,
        "command": ["python3", RELEASE_PROGRAM_PATH, namespace, job_name, *wait_for],
        "env": [{"name": "HELD_JOB", "value": kubelet_literal(held_text)}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}},
        "securityContext": locked_down_container(),
        "volumeMounts": [{"name": "program", "mountPath": RELEASE_PROGRAM_MOUNT, "readOnly": True}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name,
            "labels": labels,
            "annotations": checkov_skips({"CKV_K8S_38": audit.API_CLIENT_TOKEN}),
            "namespace": namespace,
        },
        "spec": {
            "backoffLimit": 6,
            "activeDeadlineSeconds": timeout_seconds,
            "podFailurePolicy": {"rules": pod_failure_rules("release", [2, NEVER])},
            "template": {
                "metadata": {"labels": {**labels, EGRESS_KUBERNETES_API_LABEL: "true"}},
                "spec": {
                    "serviceAccountName": RELEASE_SERVICE_ACCOUNT,
                    "restartPolicy": "Never",
                    "nodeSelector": dict(SYSTEM_NODE_LABELS),
                    "securityContext": unprivileged_pod(),
                    "containers": [container],
                    "volumes": [{"name": "program", "configMap": {"name": RELEASE_PROGRAM_CONFIG_MAP}}],
                },
            },
        },
    }


def pod_failure_rules(container: str, exit_codes: Sequence[int]) -> List[Dict[str, Any]]:
    """The rules of a library Job's pod failure policy: fail the Job at once when ``container`` exits with one of
    ``exit_codes`` (its program says no retry can mend it: the held job will never be created, the dataset never
    staged, or it was misused); ignore pods that a node drain or preemption disrupted; retry the rest (Kubernetes:
    Job pod failure policy)."""
    return [
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": container, "operator": "In", "values": list(exit_codes)},
        },
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]


def _release_digest() -> str:
    """A hash of the release Job as the library renders it for a stand-in held job, less what may change in place
    (``activeDeadlineSeconds``, which the program reads from the Job)."""
    job = release_job("namespace", held_name="held", held_text="{}", wait_for=["job/awaited"], timeout_seconds=0)
    del job["spec"]["activeDeadlineSeconds"]
    return hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()[:12]


RELEASE_DIGEST = _release_digest()
"""What a held job's name also depends on: the whole release Job as the library renders it (the program, its image,
the pod template, the failure policy, the labels), except ``activeDeadlineSeconds``. The release Job's name is the
held job's plus ``-release``, so whatever would change in the release Job's immutable pod template or pod failure
policy changes both names: CloudFormation creates a new release Job (and so a new held job) and deletes the old one,
never updating a release Job in place, which Kubernetes would refuse."""


class ReleaseProgramChart(MountedProgramChart):
    """The ConfigMap :data:`RELEASE_PROGRAM_CONFIG_MAP` holding the release program, which every release Job of the
    namespace runs from :data:`RELEASE_PROGRAM_PATH`. :class:`~trainium_eks.constructs.job_sequence.JobSequence`
    applies it once per namespace, before the releases; apply it yourself with a release of your own.

    :param namespace: The releases' namespace. Required.
    """

    def __init__(self, *, namespace: str) -> None:
        super().__init__(RELEASE_PROGRAM, component=RELEASE_COMPONENT, namespace=namespace)
