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
