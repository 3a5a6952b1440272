"""manifests.storage.efs_volume: EfsVolumeChart's checks of its settings and how its three objects fit together."""

import pytest

from trainium_eks.core.conventions import EfsVolumeSource
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.storage.efs_volume import (
    CLAIM_REQUEST,
    DEFAULT_CLAIM_NAME,
    VOLUME_CAPACITY,
    EfsVolumeChart,
)

VOLUME = EfsVolumeSource("fs-0123456789abcdef0")


def by_kind(chart):
    return {o["kind"]: o for o in chart.manifests()}


@pytest.mark.parametrize(
    "file_system_id,accepted",
    [
        ("fs-01234567", True),
        ("fs-" + "a" * 40, True),
        ("fs-0123456", False),
        ("fs-" + "a" * 41, False),
        ("fs-0123456789ABCDEF0", False),
        ("fs-0123456789abcdefg", False),
        ("fs-0123456789abcdef0\n", False),
        ("fsap-0123456789abcdef0", False),
        ("", False),
    ],
)
def test_a_file_system_id_is_fs_and_8_to_40_lowercase_hex_digits(file_system_id, accepted):
    if accepted:
        objects = by_kind(EfsVolumeChart(volume=EfsVolumeSource(file_system_id)))
        assert objects["PersistentVolume"]["spec"]["csi"]["volumeHandle"] == file_system_id
        assert objects["StorageClass"]["parameters"]["fileSystemId"] == file_system_id
    else:
        with pytest.raises(ConfigurationError) as raised:
            EfsVolumeChart(volume=EfsVolumeSource(file_system_id))
        assert raised.value.problems == [
            f"volume.file_system_id={file_system_id!r}: an EFS file system id (fs- and 8 to 40 hexadecimal digits) "
            "or a CloudFormation token"
        ]


@pytest.mark.parametrize(
    "setting,value,accepted",
    [
        ("namespace", "a" * 63, True),
        ("namespace", "a" * 64, False),
        ("namespace", "team.a", False),
        ("storage_class_name", "efs.shared-1", True),
        ("volume_name", "v" * 253, True),
        ("volume_name", "v" * 254, False),
        ("claim_name", "claims.team-a", True),
        ("claim_name", "claim.", False),
    ],
)
def test_the_namespace_is_a_dns_label_and_the_object_names_dns_subdomains(setting, value, accepted):
    if accepted:
        EfsVolumeChart(volume=VOLUME, **{setting: value})
    else:
        with pytest.raises(ConfigurationError) as raised:
            EfsVolumeChart(volume=VOLUME, **{setting: value})
        (problem,) = raised.value.problems
        assert problem.startswith(f"{setting}={value!r}: a DNS-1123"), problem


def test_the_claim_can_bind_only_to_the_static_volume_and_the_volume_is_reserved_for_it():
    chart = EfsVolumeChart(volume=VOLUME, namespace="team-a", claim_name="shared")
    objects = by_kind(chart)
    storage_class, volume, claim = (
        objects["StorageClass"],
        objects["PersistentVolume"],
        objects["PersistentVolumeClaim"],
    )
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"]
    assert volume["spec"]["claimRef"] == {
        "namespace": claim["metadata"]["namespace"],
        "name": claim["metadata"]["name"],
    }
    assert claim["spec"]["storageClassName"] == volume["spec"]["storageClassName"] == storage_class["metadata"]["name"]
    assert set(claim["spec"]["accessModes"]) <= set(volume["spec"]["accessModes"])
    assert claim["spec"]["resources"]["requests"]["storage"] == CLAIM_REQUEST == VOLUME_CAPACITY
    assert volume["spec"]["capacity"]["storage"] == VOLUME_CAPACITY, "a claim binds to a volume at least its size"
    assert volume["spec"]["volumeMode"] == "Filesystem" and storage_class["volumeBindingMode"] == "Immediate"
    assert chart.claim_name == "shared" != DEFAULT_CLAIM_NAME


def test_every_object_carries_the_components_labels_and_the_claim_request_never_follows_a_setting():
    default = by_kind(EfsVolumeChart(volume=VOLUME))
    other = by_kind(EfsVolumeChart(volume=EfsVolumeSource("fs-fedcba9876543210f"), namespace="team-b"))
    for objects in (default, other):
        for obj in objects.values():
            assert obj["metadata"]["labels"] == {
                "app.kubernetes.io/part-of": "trainium-eks",
                "app.kubernetes.io/name": "efs-volume",
            }
    for kind in ("PersistentVolume", "PersistentVolumeClaim"):
        key = "capacity" if kind == "PersistentVolume" else "resources"
        assert default[kind]["spec"][key] == other[kind]["spec"][key], "a bound claim's request cannot change"
