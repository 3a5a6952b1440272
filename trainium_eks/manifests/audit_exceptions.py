"""The findings of checkov's Kubernetes checks that the library accepts, each with its reason.

They are annotations of the object concerned (``checkov.io/skip<n>: <check id>=<reason>``, which checkov reads from an
object's ``metadata.annotations``), the counterpart of the cdk-nag acknowledgements on AWS resources: ``make audit``
and the tests run checkov on every object the stacks apply and expect no other finding.
"""

from __future__ import annotations

from typing import Dict, Mapping

from aws_cdk import Token

from trainium_eks.facts import versions

FIXED_TAG_PULL = (
    "IfNotPresent: the tag is fixed, never latest (trainium_eks/facts/versions.py), so a node's cached image is the "
    "pinned one"
)
DIGEST_NOT_READ = (
    "no source the project could read publishes this tag's digest (trainium_eks/facts/versions.py DIGEST_NOT_READ); "
    "make pin-digests reads it where the registry is reachable"
)
STACK_IMAGE = (
    "the stack's own image, a CDK asset published at deploy time under a tag that is the hash of its content (so a "
    "cached image is the same image); its digest does not exist at synth"
)
PLUGIN_PROBES = (
    "a device plugin serves the kubelet over a Unix socket and listens on no port; upstream defines no probe either"
)
PLUGIN_ROOT = (
    "as upstream: it creates its socket in the kubelet's root-owned /var/lib/kubelet/device-plugins, so it runs as root"
)
PLUGIN_ROOT_FILESYSTEM = "as upstream, which does not run it with a read-only root file system"
EFA_PLUGIN_PRIVILEGED = (
    "as upstream (aws/eks-charts aws-efa-k8s-device-plugin, PR #1245): privileged to read the host's EFA and Neuron "
    "devices and hand out EFA devices aligned with a pod's Neuron devices"
)
"""Why the EFA device plugin runs privileged (and so with every capability, privilege escalation and the host
network's view, as its upstream chart does)."""
API_CLIENT_TOKEN = "it calls the Kubernetes API with this service account's token (its Role or ClusterRole)"
STAGING_AS_ROOT = (
    "it runs as its image's root user, without any capability: root owns the shared volume's root and the files the "
    "training jobs write"
)
WORKER_FILES = "the Neuron compiler, torch and the launchers may write to the image's home and temporary folders"
WORKER_ROOT = (
    "it runs as its image's user, root in the Neuron DLC and the CUDA images (a fabric check's sshd must be root: "
    "Volcano's ssh plugin mounts its keys in root's home)"
)
WORKER_LIMITS = (
    "a training pod owns its node: a CPU limit would throttle it and a memory limit kill it; its requests reserve "
    "its share"
)
WORKER_PROBES = "a batch pod runs to completion; its job's policy restarts the job when a pod fails"
SSHD_KEEPS_CAPABILITIES = (
    "its sshd runs as root and keeps the capabilities privilege separation needs (fabric_check.SSHD_CAPABILITIES)"
)


def image_skips(image: str) -> Dict[str, str]:
    """The image findings (pull policy, digest) accepted for a container of ``image``, with their reasons: a CDK
    asset's (a token at synth), or a pin of :mod:`~trainium_eks.facts.versions` whose digest could not be read. None
    for an image pinned by digest (checkov passes it), nor for any other image: yours, by tag, is a true finding."""
    if Token.is_unresolved(image):
        return {"CKV_K8S_15": STACK_IMAGE, "CKV_K8S_43": STACK_IMAGE}
    unread = {pin.image for pin in vars(versions).values() if isinstance(pin, versions.ImagePin) and not pin.digest}
    if image in unread:
        return {"CKV_K8S_15": FIXED_TAG_PULL, "CKV_K8S_43": DIGEST_NOT_READ}
    return {}


def worker_skips(image: str, *, liveness_probe: bool = False) -> Dict[str, str]:
    """The findings accepted for a pod of a training job (or of its fabric check) running ``image``, with their
    reasons; a pod with a ``liveness_probe`` (the progress watch's) accepts none about liveness."""
    liveness = {} if liveness_probe else {"CKV_K8S_8": WORKER_PROBES}
    return {
        **liveness,
        "CKV_K8S_9": WORKER_PROBES,
        "CKV_K8S_11": WORKER_LIMITS,
        "CKV_K8S_13": WORKER_LIMITS,
        "CKV_K8S_22": WORKER_FILES,
        "CKV_K8S_23": WORKER_ROOT,
        "CKV_K8S_40": WORKER_ROOT,
        **image_skips(image),
    }


def checkov_skips(reasons: Mapping[str, str]) -> Dict[str, str]:
    """The annotations that make checkov skip each check of ``reasons`` (check id -> reason) on the object, in the
    order of the check ids."""
    return {f"checkov.io/skip{n}": f"{check}={reason}" for n, (check, reason) in enumerate(sorted(reasons.items()), 1)}
