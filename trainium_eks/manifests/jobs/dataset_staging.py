"""DatasetStagingChart: a Kubernetes Job that copies a dataset from S3 or HTTPS onto the shared volume, once."""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, Optional

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
from trainium_eks.manifests import audit_exceptions as audit
from trainium_eks.manifests.audit_exceptions import checkov_skips, image_skips
from trainium_eks.manifests.jobs import job_naming
from trainium_eks.manifests.jobs.job_chart import JobChart
from trainium_eks.manifests.jobs.job_deadline import HOUR, check_deadline
from trainium_eks.manifests.jobs.topology import NodeGroupTopology

DEFAULT_DEADLINE_SECONDS = 4 * HOUR
"""``activeDeadlineSeconds`` of a staging Job built without one: 4 hours for the whole Job, every retry included
(four copies of the BERT phase-1 tarball, "50+ GB" by the tutorial's README, in that time take about 14 MB/s)."""

STAGED_MARKER = ".staged"
"""File written last into a staged dataset; its presence means the copy is complete."""

_S3_URI = re.compile(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?")
_HTTPS_TARBALL = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]+)?/[^\s]*\.(tar|tar\.gz|tgz)")
_SHA256 = re.compile(r"[0-9a-f]{64}")

DOWNLOAD = r"""
import hashlib, sys, urllib.request
url, path, expected = sys.argv[1:4]
digest = hashlib.sha256()
with urllib.request.urlopen(url, timeout=120) as response, open(path, "wb") as archive:
    while True:
        chunk = response.read(1 << 20)
        if not chunk:
            break
        digest.update(chunk)
        archive.write(chunk)
if digest.hexdigest() != expected:
    sys.exit(f"sha256 of {url} is {digest.hexdigest()}, expected {expected}: not staged")
"""
"""Downloads an HTTPS tarball with Python's standard library and checks its SHA-256 before anything is unpacked."""

STAGING_SCRIPT = r"""
set -euo pipefail
dest="$1"; source="$2"; sign="$3"; checksum="${{4:-}}"
if [ -e "$dest/{marker}" ]; then echo "already staged: $dest"; exit 0; fi
work="$(dirname "$dest")/.staging-$(basename "$dest")"
rm -rf "$work"; mkdir -p "$work"
opts=(); if [ "$sign" = "unsigned" ]; then opts=(--no-sign-request); fi
case "$source" in
  http://*|https://*)
    echo "downloading $source into $work"
    python3 -c "$DOWNLOAD" "$source" "$work/.archive" "$checksum"
    tar -x --no-same-owner -C "$work" -f "$work/.archive"; rm -f "$work/.archive" ;;
  *.tar|*.tar.gz|*.tgz)
    echo "streaming $source into $work"
    aws s3 cp "${{opts[@]}}" --only-show-errors "$source" - | tar -x --no-same-owner -C "$work" ;;
  *)
    echo "syncing $source into $work"
    aws s3 sync "${{opts[@]}}" --only-show-errors "$source" "$work" ;;
esac
entries=("$work"/*)
if [ "${{#entries[@]}}" -eq 1 ] && [ -d "${{entries[0]}}" ]; then content="${{entries[0]}}"; else content="$work"; fi
rm -rf "$dest"; mv "$content" "$dest"; rm -rf "$work"
touch "$dest/{marker}"
echo "staged $source into $dest: $(find "$dest" -type f | wc -l) files, $(du -sh "$dest" | cut -f1)"
""".format(marker=STAGED_MARKER)


class DatasetStagingChart(JobChart):
    """A batch/v1 Job that copies a dataset from S3 to ``<shared volume>/<directory>``, idempotently.

    - A tarball (``.tar``, ``.tar.gz``, ``.tgz``) is streamed from S3 and unpacked without a second copy on disk; any
      other S3 URI (a prefix) is synced. An HTTPS tarball (the CIFAR-10 archive, say) is downloaded with Python's
      standard library and unpacked only when its SHA-256 is the one given. A tarball with one top-level folder (as
      the tutorial's) becomes the folder.
    - The data lands in a work folder next to the destination and is moved into place at the end, then the marker
      ``.staged`` is written: a job that finds the marker skips everything, and a half-finished copy is never
      taken for a dataset.
    - ``unsigned=True`` reads a public bucket (``--no-sign-request``, as the tutorial's dataset); otherwise the pod's
      service account reads with its EKS Pod Identity role.
    - The image needs bash and tar, plus the AWS CLI for S3 sources (the Neuron training DLC has it) or Python 3 for
      HTTPS sources. It runs on the node group given
      (tolerating its taints, requesting no accelerator), up to ``backoff_limit`` + 1 times, with no capabilities,
      no privilege escalation, the runtime's default seccomp profile (tar keeps no archive ownership) and no
      service-account token (the AWS CLI's credentials come from EKS Pod Identity, whose token EKS mounts apart). Its
      pods may open HTTPS connections outside the VPC
      (label :data:`~trainium_eks.core.conventions.EGRESS_INTERNET_LABEL`, admitted by the training namespace's
      NetworkPolicies) and accept no connection from any pod (label
      :data:`~trainium_eks.core.conventions.INGRESS_POLICY_LABEL` =
      :data:`~trainium_eks.core.conventions.NO_INGRESS_POLICY`): a pod of the namespace cannot use one as its way
      out. It is not deleted when it finishes: the release Jobs of later jobs read its status.
    - ``activeDeadlineSeconds`` = ``deadline_seconds`` bounds the whole Job, its retries included: once past, the Job
      controller deletes its pod and the Job fails with the reason ``DeadlineExceeded``
      (:mod:`~trainium_eks.manifests.jobs.job_deadline` cites the controller's source); a copy cut short has no marker,
      so it is never taken for the dataset.

    The job's name carries a hash of its spec (:attr:`job_name`); :attr:`ref` is how later jobs wait for it
    (``job/<name>``).

    :param name: Base name (DNS label, at most 28 characters). Required.
    :param source: ``s3://bucket/key.tar``, ``s3://bucket/prefix/`` or ``https://host/path/archive.tar.gz``.
        Required.
    :param sha256: The SHA-256 of an HTTPS tarball (required for one; not used for S3). Default: none.
    :param directory: Destination folder on the shared volume (a relative path). Required.
    :param image: Required.
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

    def __init__(
        self,
        *,
        name: str,
        source: str,
        directory: str,
        image: str,
        node_group: NodeGroupTopology,
        claim: Optional[str] = None,
        sha256: Optional[str] = None,
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
                        "bash",
                        "-c",
                        STAGING_SCRIPT,
                        "stage-dataset",
                        self.destination,
                        source,
                        "unsigned" if unsigned else "signed",
                        *([sha256] if https else []),
                    ],
                    **({"env": [{"name": "DOWNLOAD", "value": DOWNLOAD}]} if https else {}),
                    "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}},
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                    "volumeMounts": [{"name": "shared", "mountPath": SHARED_MOUNT}],
                }
            ],
            "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": claim}}],
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
                        "CKV_K8S_22": audit.STAGING_AS_ROOT,
                        "CKV_K8S_23": audit.STAGING_AS_ROOT,
                        "CKV_K8S_40": audit.STAGING_AS_ROOT,
                        **image_skips(image),
                    }
                ),
            },
            "spec": {
                "backoffLimit": backoff_limit,
                "activeDeadlineSeconds": deadline_seconds,
                "template": {
                    "metadata": {
                        "labels": {**labels, EGRESS_INTERNET_LABEL: "true", INGRESS_POLICY_LABEL: NO_INGRESS_POLICY}
                    },
                    "spec": pod,
                },
            },
        }
        self.add_job(manifest, resolve)
