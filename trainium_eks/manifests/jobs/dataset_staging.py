"""DatasetStagingChart: a Kubernetes Job that copies a dataset from S3 or HTTPS onto the shared volume, once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from aws_cdk import Token

from trainium_eks.core.conventions import (
    DEFAULT_NAMESPACE,
    DEFAULT_SERVICE_ACCOUNT,
    EGRESS_INTERNET_LABEL,
    INGRESS_POLICY_LABEL,
    NO_INGRESS_POLICY,
    SHARED_MOUNT,
)
from trainium_eks.core.validation import (
    Problems,
    check_bool,
    check_dns_label,
    check_dns_subdomain,
    check_image_reference,
    check_integer,
    check_pattern,
)
from trainium_eks.facts import versions
from trainium_eks.manifests import audit_exceptions as audit
from trainium_eks.manifests.audit_exceptions import checkov_skips, image_skips
from trainium_eks.manifests.jobs import job_naming
from trainium_eks.manifests.jobs.job_chart import JobChart
from trainium_eks.manifests.jobs.job_deadline import HOUR, check_deadline
from trainium_eks.manifests.jobs.job_release import pod_failure_rules
from trainium_eks.manifests.jobs.mounted_program import MountedProgram, MountedProgramChart, program_source
from trainium_eks.manifests.jobs.topology import NodeGroupTopology

DEFAULT_DEADLINE_SECONDS = 4 * HOUR
"""``activeDeadlineSeconds`` of a staging Job built without one: 4 hours for the whole Job, every retry included
(four copies of the BERT phase-1 tarball, "50+ GB" by the tutorial's README, in that time take about 14 MB/s)."""

STAGING_PROGRAM = MountedProgram(
    name="staging-program",
    file="dataset_staging_program.py",
    mount="/opt/trainium-eks/staging",
    source=program_source(Path(__file__).parent / "dataset_staging_program.py"),
)
"""The staging program (:mod:`~trainium_eks.manifests.jobs.dataset_staging_program`, code only), which every staging
Job runs from its namespace's ConfigMap (:class:`StagingProgramChart`)."""

STAGING_IMAGE = versions.JOB_RELEASE_IMAGE.image
"""The staging Jobs' image: the release Jobs' Python (Docker's official ``python`` slim image, by digest), which
holds no package beyond Python's standard library and Debian's base."""

_S3_URI = re.compile(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?")
_HTTPS_TARBALL = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]+)?/[^\s]*\.(tar|tar\.gz|tgz)")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]")


class DatasetStagingChart(JobChart):
    """A batch/v1 Job that copies a dataset from S3 or HTTPS to ``<shared volume>/<directory>``, idempotently.

    - It runs the staging program (:mod:`~trainium_eks.manifests.jobs.dataset_staging_program`: Python's standard
      library only) in the staging image (:data:`STAGING_IMAGE`, the release Jobs' Python) in isolated mode
      (``python3 -I -B``: no user site, no ``PYTHON*`` variable, no bytecode written), from the namespace's ConfigMap
      (:class:`StagingProgramChart`, which :class:`~trainium_eks.constructs.job_sequence.JobSequence` applies before
      the Job). No package of the training image runs beside the pod's credentials and its internet egress.
    - A tarball (``.tar``, ``.tar.gz``, ``.tgz``) is streamed from S3 and unpacked as it arrives, resuming a read
      cut short where it broke (only while the object is unchanged); any other S3 URI is a folder whose objects are
      copied. An HTTPS tarball (the CIFAR-10 archive, say) is downloaded and unpacked only when its SHA-256 is the one
      given. Archives are unpacked with ``tarfile``'s ``data`` filter. A tarball with one top-level folder (as
      the tutorial's) becomes the folder.
    - The data lands in a work folder next to the destination and is moved into place at the end, then the marker
      ``.staged`` is written: a job that finds the marker skips everything, and a half-finished copy is never
      taken for a dataset.
    - ``unsigned=True`` reads a public bucket without credentials (as the tutorial's dataset); otherwise the program
      signs with the credentials EKS Pod Identity gives the pod's service account. S3 is reached in ``region``, or in
      the region S3 names when the bucket is elsewhere.
    - It runs on the node group given (tolerating its taints, requesting no accelerator), up to ``backoff_limit`` + 1
      times, as the image's user (root: the shared volume's root and the files the training jobs write are root's),
      with a read-only root file system, no capabilities (so root is held to the files' permission bits like any
      user; the ``data`` filter keeps no archive ownership), no privilege escalation, the runtime's default seccomp
      profile and no service-account token (Pod Identity's token is mounted apart). Its pods may open HTTPS
      connections outside the VPC (label :data:`~trainium_eks.core.conventions.EGRESS_INTERNET_LABEL`, admitted by the
      training namespace's NetworkPolicies) and accept no connection from any pod (no policy of the namespace
      admits one, and the label :data:`~trainium_eks.core.conventions.INGRESS_POLICY_LABEL` =
      :data:`~trainium_eks.core.conventions.NO_INGRESS_POLICY` keeps a release from giving it a peers policy when it
      is held): a pod of the namespace cannot use one as its way out. It is not deleted when it finishes: the
      release Jobs of later jobs read its status.
    - ``activeDeadlineSeconds`` = ``deadline_seconds`` bounds the whole Job, its retries included: once past, the Job
      controller deletes its pod and the Job fails with the reason ``DeadlineExceeded``
      (:mod:`~trainium_eks.manifests.jobs.job_deadline` cites the controller's source); a copy cut short has no marker,
      so it is never taken for the dataset. A failure that no retry mends (a wrong SHA-256, S3's 400 or 404, an
      archive member outside the destination; exit status 3) or a usage error (2) fails the Job at once, and a pod
      that a node drain or preemption disrupted is not counted (the Job's pod failure policy).

    The job's name carries a hash of its spec (:attr:`job_name`); :attr:`ref` is how later jobs wait for it
    (``job/<name>``).

    :param name: Base name (DNS label, at most 28 characters). Required.
    :param source: ``s3://bucket/key.tar``, ``s3://bucket/prefix/`` or ``https://host/path/archive.tar.gz``.
        Required.
    :param sha256: The SHA-256 of an HTTPS tarball (required for one; not used for S3). Default: none.
    :param region: The S3 bucket's region (a region name or the stack's region token; not used for HTTPS). Default:
        the pod's ``AWS_REGION`` if set, else us-east-1; either way the region S3 names when the bucket is elsewhere
        (one request more).
    :param directory: Destination folder on the shared volume (a relative path). Required.
    :param image: An image with ``python3`` that has ``tarfile``'s extraction filters (3.12, or 3.11.4 and the
        other releases they were backported to) and CA certificates. Default:
        :data:`STAGING_IMAGE`.
    :param node_group: Where to run (``TrainingNodeGroup.topology``); it must reach ``claim``. Required.
    :param claim: The shared claim. Default: the node group's only (or first) shared claim.
    :param unsigned: Read a public bucket without credentials. Default: false.
    :param namespace: Default: ``training``.
    :param service_account: Default: ``training``.
    :param backoff_limit: Default: 3.
    :param deadline_seconds: ``activeDeadlineSeconds`` of the Job, from 60 seconds to 90 days. Default:
        :data:`DEFAULT_DEADLINE_SECONDS` (4 hours).
    :param resolve: Turns CDK tokens into CloudFormation before hashing. Default: none.
    """

    needs_staging_program = True
    """The Job mounts :data:`STAGING_PROGRAM`'s ConfigMap: :class:`~trainium_eks.constructs.job_sequence.JobSequence`
    applies :class:`StagingProgramChart` before it."""

    def __init__(
        self,
        *,
        name: str,
        source: str,
        directory: str,
        node_group: NodeGroupTopology,
        image: str = STAGING_IMAGE,
        claim: Optional[str] = None,
        sha256: Optional[str] = None,
        region: Optional[str] = None,
        unsigned: bool = False,
        namespace: str = DEFAULT_NAMESPACE,
        service_account: str = DEFAULT_SERVICE_ACCOUNT,
        backoff_limit: int = 3,
        deadline_seconds: int = DEFAULT_DEADLINE_SECONDS,
        resolve: Optional[Callable[[Any], Any]] = None,
    ) -> None:
        problems = Problems(f"dataset staging job {name!r}")
        job_naming.check_base_name(problems, name)
        https = isinstance(source, str) and source.startswith("https://")
        if https:
            check_pattern(problems, "source", source, _HTTPS_TARBALL, "an HTTPS URL of a .tar, .tar.gz or .tgz file")
            check_pattern(problems, "sha256", sha256, _SHA256, "the 64 hex digits of the archive's SHA-256")
        else:
            check_pattern(
                problems, "source", source, _S3_URI, "an S3 URI such as s3://bucket/dataset.tar, or an HTTPS tarball"
            )
            if region is not None and not (isinstance(region, str) and Token.is_unresolved(region)):
                check_pattern(problems, "region", region, _REGION, "the bucket's region, such as us-west-2")
        if not isinstance(directory, str) or not directory or directory.startswith("/") or ".." in directory.split("/"):
            problems.add("directory", directory, "a relative path on the shared volume, such as datasets/bert")
        check_image_reference(problems, "image", image)
        check_bool(problems, "unsigned", unsigned)
        check_dns_label(problems, "namespace", namespace)
        check_dns_subdomain(problems, "service_account", service_account)
        check_integer(problems, "backoff_limit", backoff_limit, minimum=0, maximum=100)
        check_deadline(problems, "deadline_seconds", deadline_seconds)
        if not isinstance(node_group, NodeGroupTopology):
            problems.add("node_group", node_group, "a NodeGroupTopology (TrainingNodeGroup.topology)")
            problems.raise_if_any()
        claim = claim or (sorted(node_group.shared_claims)[0] if node_group.shared_claims else None)
        if not isinstance(claim, str) or claim not in node_group.shared_claims:
            have = ", ".join(sorted(node_group.shared_claims)) or "none"
            problems.add("claim", claim, f"a shared claim the node group can reach (it has: {have})")
        problems.raise_if_any()
        super().__init__(name, namespace=namespace)

        self.destination = f"{SHARED_MOUNT}/{directory.strip('/')}"
        self.deadline_seconds: int = deadline_seconds
        """``activeDeadlineSeconds``: the bound of the whole Job."""
        labels = {**self.selector_labels(), "app.kubernetes.io/instance": job_naming.PLACEHOLDER}
        pod: Dict[str, Any] = {
            "serviceAccountName": service_account,
            "automountServiceAccountToken": False,
            "restartPolicy": "Never",
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            **node_group.pod_placement(),
            "containers": [
                {
                    "name": "stage",
                    "image": image,
                    "command": [
                        "python3",
                        "-I",
                        "-B",
                        STAGING_PROGRAM.path,
                        self.destination,
                        source,
                        "unsigned" if unsigned else "signed",
                        sha256 if https else "-",
                        "-" if https or region is None else region,
                    ],
                    "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}},
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "volumeMounts": [
                        {"name": "shared", "mountPath": SHARED_MOUNT},
                        {"name": "staging-program", "mountPath": STAGING_PROGRAM.mount, "readOnly": True},
                    ],
                }
            ],
            "volumes": [
                {"name": "shared", "persistentVolumeClaim": {"claimName": claim}},
                {"name": "staging-program", "configMap": {"name": STAGING_PROGRAM.config_map}},
            ],
        }
        manifest = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": job_naming.PLACEHOLDER,
                "namespace": namespace,
                "labels": labels,
                "annotations": checkov_skips(
                    {
                        "CKV_K8S_23": audit.STAGING_AS_ROOT,
                        "CKV_K8S_40": audit.STAGING_AS_ROOT,
                        **image_skips(image),
                    }
                ),
            },
            "spec": {
                "backoffLimit": backoff_limit,
                "activeDeadlineSeconds": deadline_seconds,
                "podFailurePolicy": {"rules": pod_failure_rules("stage", [2, 3])},
                "template": {
                    "metadata": {
                        "labels": {**labels, EGRESS_INTERNET_LABEL: "true", INGRESS_POLICY_LABEL: NO_INGRESS_POLICY}
                    },
                    "spec": pod,
                },
            },
        }
        self.add_job(manifest, resolve)


class StagingProgramChart(MountedProgramChart):
    """The ConfigMap of :data:`STAGING_PROGRAM`, which every staging Job of the namespace mounts.
    :class:`~trainium_eks.constructs.job_sequence.JobSequence` applies it once per namespace, before the staging Jobs;
    apply it yourself with a staging Job of your own.

    :param namespace: The staging Jobs' namespace. Required.
    """

    def __init__(self, *, namespace: str) -> None:
        super().__init__(STAGING_PROGRAM, component="staging-program", namespace=namespace)
