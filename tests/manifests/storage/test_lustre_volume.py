"""LustreVolumeChart: a static, retained, ReadWriteMany CSI volume bound to its claim."""

from tests.support.charts import FSX, objects
from trainium_eks.manifests.storage.lustre_volume import LustreVolumeChart


def test_fsx_volume_is_a_static_retained_rwx_csi_volume_bound_to_its_claim():
    found = objects(LustreVolumeChart(volume=FSX))
    volume = found["PersistentVolume", "fsx-pv"]["spec"]
    assert volume["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": FSX.file_system_id,
        "volumeAttributes": {"dnsname": FSX.dns_name, "mountname": FSX.mount_name},
    }
    assert volume["mountOptions"] == ["flock"]
    assert volume["accessModes"] == ["ReadWriteMany"]
    assert volume["persistentVolumeReclaimPolicy"] == "Retain"
    assert volume["capacity"] == {"storage": "1200Gi"}
    assert volume["claimRef"] == {"namespace": "training", "name": "fsx-claim"}
    claim = found["PersistentVolumeClaim", "fsx-claim"]
    assert claim["metadata"]["namespace"] == "training"
    assert claim["spec"]["volumeName"] == "fsx-pv"
    assert claim["spec"]["storageClassName"] == ""
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
