"""LustreVolumeChart: the FSx for Lustre file system as a static PersistentVolume and its claim."""

from __future__ import annotations

from trainium_eks.core.conventions import DEFAULT_NAMESPACE, LustreVolumeSource
from trainium_eks.core.validation import Problems, check_dns_label, check_dns_subdomain, check_instance
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.moved import removed_props

FSX_CSI_DRIVER = "fsx.csi.aws.com"
CLAIM_REQUEST = "1200Gi"
"""What the claim requests, whatever the file system's size: the smallest FSx for Lustre file system. A bound claim's
request cannot change (Kubernetes resizes only dynamically provisioned claims), so it must not follow
``lustreStorageGiB``; the volume states the real capacity, and a claim binds to a volume at least as large."""
DEFAULT_VOLUME_NAME = "fsx-pv"
DEFAULT_CLAIM_NAME = "fsx-claim"
"""Names of the tutorial, kept so that its commands work unchanged."""


class LustreVolumeChart(LibraryChart):
    """A static PersistentVolume on an existing FSx for Lustre file system and the claim bound to it.

    The volume uses the FSx CSI driver (``fsx.csi.aws.com``): ``volumeHandle`` is the file system id and
    ``volumeAttributes`` its DNS name and mount name (all three come from the ``LustreStorage`` construct, as
    CloudFormation tokens), mount option ``flock`` (file locks across nodes, which the Neuron compile cache and
    checkpoint writers rely on), ``ReadWriteMany``, reclaim policy ``Retain`` (deleting the volume object never
    touches the data; ``Recycle`` is not valid for CSI volumes). The claim names the volume and an empty storage
    class, so it binds to this volume only and no dynamic provisioning kicks in. Source:
    kubernetes-sigs/aws-fsx-csi-driver examples/kubernetes/static_provisioning.

    :param volume: The file system's id, DNS name, mount name and size (``LustreStorage.volume_source``, or a
        ``LustreVolumeSource`` for a file system made elsewhere); the size is the volume's capacity (the claim
        requests :data:`CLAIM_REQUEST`).
        Required.
    :param namespace: Namespace of the claim. Default: ``training``.
    :param volume_name: Default: ``fsx-pv``.
    :param claim_name: Default: ``fsx-claim``.
    """

    @removed_props(
        "LustreVolumeChart",
        {
            name: "the file system's id, DNS name, mount name and size are one prop, volume: LustreStorage's "
            "volume_source, or LustreVolumeSource(file_system_id=..., dns_name=..., mount_name=..., storage_gib=...) "
            "for a file system made elsewhere"
            for name in ("file_system_id", "dns_name", "mount_name", "storage_gib")
        },
    )
    def __init__(
        self,
        *,
        volume: LustreVolumeSource,
        namespace: str = DEFAULT_NAMESPACE,
        volume_name: str = DEFAULT_VOLUME_NAME,
        claim_name: str = DEFAULT_CLAIM_NAME,
    ) -> None:
        problems = Problems("FSx volume chart")
        check_instance(
            problems, "volume", volume, LustreVolumeSource, "a LustreVolumeSource (LustreStorage.volume_source)"
        )
        check_dns_label(problems, "namespace", namespace)
        check_dns_subdomain(problems, "volume_name", volume_name)
        check_dns_subdomain(problems, "claim_name", claim_name)
        problems.raise_if_any()
        super().__init__("fsx-volume", namespace=namespace)
        self.claim_name = claim_name
        self.add_object(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": self.metadata(volume_name, cluster_scoped=True),
                "spec": {
                    "capacity": {"storage": f"{volume.storage_gib}Gi"},
                    "accessModes": ["ReadWriteMany"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "",
                    "volumeMode": "Filesystem",
                    "mountOptions": ["flock"],
                    "csi": {
                        "driver": FSX_CSI_DRIVER,
                        "volumeHandle": volume.file_system_id,
                        "volumeAttributes": {"dnsname": volume.dns_name, "mountname": volume.mount_name},
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
                    "storageClassName": "",
                    "volumeName": volume_name,
                    "resources": {"requests": {"storage": CLAIM_REQUEST}},
                },
            }
        )
