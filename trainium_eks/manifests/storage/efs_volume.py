"""EfsVolumeChart: an Amazon EFS file system as a StorageClass, a static PersistentVolume and its claim."""

from __future__ import annotations

import re

from trainium_eks.core.conventions import DEFAULT_NAMESPACE, EfsVolumeSource
from trainium_eks.core.validation import (
    Problems,
    check_dns_label,
    check_dns_subdomain,
    check_instance,
    check_pattern,
    is_concrete,
)
from trainium_eks.manifests.chart import LibraryChart

EFS_CSI_DRIVER = "efs.csi.aws.com"
"""Name of the Amazon EFS CSI driver (managed add-on ``aws-efs-csi-driver``). Source: EKS user guide, "Amazon EFS CSI
driver" (https://docs.aws.amazon.com/eks/latest/userguide/add-ons-aws-efs-csi-driver.html)."""

VOLUME_CAPACITY = "5Gi"
CLAIM_REQUEST = VOLUME_CAPACITY
"""The volume's capacity and what the claim requests. EFS has no size (it grows and shrinks with its files), and the
EFS CSI driver ignores both values, but Kubernetes requires them and binds a claim only to a volume at least as large
as its request. Both are constants: a bound claim's request cannot change (Kubernetes resizes only dynamically
provisioned claims), so nothing may make it follow a setting. 5Gi is the upstream static provisioning example's
value (kubernetes-sigs/aws-efs-csi-driver examples/kubernetes/static_provisioning)."""

DIRECTORY_PERMS = "700"
"""Permissions of the root directory of each access point the driver creates for a dynamically provisioned claim:
only its owner (the access point's POSIX user, which the driver enforces for every client of the claim)."""

DEFAULT_STORAGE_CLASS_NAME = "efs-sc"
DEFAULT_VOLUME_NAME = "efs-pv"
DEFAULT_CLAIM_NAME = "efs-sc-claim"
"""Names of the workshop's storage (aws-do-eks, deployment/csi/efs), kept so that its commands work unchanged."""

FILE_SYSTEM_ID = re.compile(r"fs-[0-9a-f]{8,40}")
"""An EFS file system id. Source: Amazon EFS API reference, FileSystemDescription ``FileSystemId`` pattern."""


class EfsVolumeChart(LibraryChart):
    """A StorageClass for dynamically provisioned EFS volumes, a static PersistentVolume on the whole file system,
    and the claim bound to that volume.

    - StorageClass (``efs-sc``): provisioner ``efs.csi.aws.com``, ``provisioningMode: efs-ap`` (one EFS access
      point per claim, its root directory created with :data:`DIRECTORY_PERMS`), ``fileSystemId``, reclaim policy
      ``Retain``: deleting a dynamically provisioned claim keeps its volume and access point, so its data survives
      whatever the driver's ``delete-access-point-root-dir`` setting (with ``Delete`` and that setting on, the
      driver deletes the directory's files). Source: kubernetes-sigs/aws-efs-csi-driver docs/parameters.md and
      examples/kubernetes/dynamic_provisioning.
    - PersistentVolume (``efs-pv``): the file system's root, ``volumeHandle`` the file system id, ``ReadWriteMany``,
      reclaim policy ``Retain`` (deleting the volume object never touches the data; ``Recycle`` is not valid for CSI
      volumes), ``encryptInTransit: "true"`` (TLS, the driver's default, stated because ``EfsStorage`` admits TLS
      clients only), storage class ``efs-sc``, reserved for the claim by ``claimRef``. Source:
      kubernetes-sigs/aws-efs-csi-driver examples/kubernetes/static_provisioning.
    - PersistentVolumeClaim (``efs-sc-claim``) in the training namespace: storage class ``efs-sc`` and
      ``volumeName: efs-pv``, so it binds to the static volume (no access point is created for it); requests
      :data:`CLAIM_REQUEST`.

    :param volume: The file system's id (``EfsStorage.volume_source``, or an ``EfsVolumeSource`` for a file system
        made elsewhere). Required.
    :param namespace: Namespace of the claim. Default: ``training``.
    :param storage_class_name: Default: ``efs-sc``.
    :param volume_name: Default: ``efs-pv``.
    :param claim_name: Default: ``efs-sc-claim``.
    """

    def __init__(
        self,
        *,
        volume: EfsVolumeSource,
        namespace: str = DEFAULT_NAMESPACE,
        storage_class_name: str = DEFAULT_STORAGE_CLASS_NAME,
        volume_name: str = DEFAULT_VOLUME_NAME,
        claim_name: str = DEFAULT_CLAIM_NAME,
    ) -> None:
        problems = Problems("EFS volume chart")
        if check_instance(
            problems, "volume", volume, EfsVolumeSource, "an EfsVolumeSource (EfsStorage.volume_source)"
        ) and is_concrete(volume.file_system_id):
            check_pattern(
                problems,
                "volume.file_system_id",
                volume.file_system_id,
                FILE_SYSTEM_ID,
                "an EFS file system id (fs- and 8 to 40 hexadecimal digits) or a CloudFormation token",
            )
        check_dns_label(problems, "namespace", namespace)
        check_dns_subdomain(problems, "storage_class_name", storage_class_name)
        check_dns_subdomain(problems, "volume_name", volume_name)
        check_dns_subdomain(problems, "claim_name", claim_name)
        problems.raise_if_any()
        super().__init__("efs-volume", namespace=namespace)
        self.claim_name = claim_name
        self.add_object(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": self.metadata(storage_class_name, cluster_scoped=True),
                "provisioner": EFS_CSI_DRIVER,
                "parameters": {
                    "provisioningMode": "efs-ap",
                    "fileSystemId": volume.file_system_id,
                    "directoryPerms": DIRECTORY_PERMS,
                },
                "reclaimPolicy": "Retain",
                "volumeBindingMode": "Immediate",
            }
        )
        self.add_object(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": self.metadata(volume_name, cluster_scoped=True),
                "spec": {
                    "capacity": {"storage": VOLUME_CAPACITY},
                    "accessModes": ["ReadWriteMany"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": storage_class_name,
                    "volumeMode": "Filesystem",
                    "csi": {
                        "driver": EFS_CSI_DRIVER,
                        "volumeHandle": volume.file_system_id,
                        "volumeAttributes": {"encryptInTransit": "true"},
                    },
                    "claimRef": {"namespace": namespace, "name": claim_name},
                },
            }
        )
        self.add_object(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": self.metadata(claim_name),
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": storage_class_name,
                    "volumeName": volume_name,
                    "resources": {"requests": {"storage": CLAIM_REQUEST}},
                },
            }
        )
