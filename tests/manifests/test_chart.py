"""Every chart of the library rendered outside a stack: strict schema and CEL validation at each supported Kubernetes
version, and no image without a pinned tag."""

import pytest

from tests.support.charts import FSX, REGISTRY, pod_spec
from tests.support.k8s_validation import validate_objects
from trainium_eks.facts import versions
from trainium_eks.manifests.access.job_release_access import JobReleaseAccessChart, JobReleaseCreatorChart
from trainium_eks.manifests.access.training_namespace import TrainingNamespaceChart
from trainium_eks.manifests.addons.efa_device_plugin import EfaDevicePluginChart
from trainium_eks.manifests.addons.etcd import EtcdChart
from trainium_eks.manifests.addons.neuron_device_plugin import NeuronDevicePluginChart
from trainium_eks.manifests.addons.tensorboard import TensorBoardChart
from trainium_eks.manifests.addons.volcano_queue import VolcanoQueueChart
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.manifests.storage.lustre_volume import LustreVolumeChart


def charts():
    return [
        NeuronDevicePluginChart(),
        EfaDevicePluginChart(registry=REGISTRY),
        TrainingNamespaceChart(),
        LustreVolumeChart(volume=FSX),
        EtcdChart(),
        TensorBoardChart(),
        VolcanoQueueChart(),
        JobReleaseAccessChart(namespace="training"),
        *(JobReleaseCreatorChart(namespace="training", kind=kind) for kind in ("job", "vcjob", "trainjob")),
    ]


def test_every_object_of_every_chart_validates_strictly(tmp_path):
    validate_objects([o for chart in charts() for o in chart.manifests()], tmp_path)


@pytest.mark.parametrize("version", versions.KUBERNETES_VERSIONS)
def test_charts_validate_for_every_supported_kubernetes_version(version, tmp_path):
    validate_objects([o for chart in charts() for o in chart.manifests()], tmp_path, k8s_version=version)


def test_no_image_is_unpinned():
    for chart in charts():
        for o in chart.manifests():
            if o["kind"] in ("DaemonSet", "Deployment"):
                for container in pod_spec(o)["containers"]:
                    tag = container["image"].rsplit(":", 1)[-1]
                    assert tag and tag != "latest" and "/" not in tag, container["image"]


def test_a_chart_renders_each_object_as_written_in_key_order_tokens_kept_and_null_values_left_out():
    chart = LibraryChart("probe", namespace="n")
    written = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": chart.metadata("probe", annotations={"z": "1", "a": "2"}),
        "data": {"token": "${Token[TOKEN.123]}", "empty": "", "gone": None},
    }
    added = chart.add_object(written)
    (rendered,) = chart.manifests()
    assert list(rendered) == ["apiVersion", "kind", "metadata", "data"]
    assert list(rendered["metadata"]["annotations"]) == ["z", "a"]
    assert rendered["metadata"]["labels"] == {
        "app.kubernetes.io/part-of": "trainium-eks",
        "app.kubernetes.io/name": "probe",
    }
    assert rendered["data"] == {"token": "${Token[TOKEN.123]}", "empty": ""}
    assert added["data"]["gone"] is None, "add_object returns what it was given, labelled"
