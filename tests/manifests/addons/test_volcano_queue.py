"""VolcanoQueueChart: the training queue."""

from tests.support.charts import objects
from trainium_eks.manifests.addons.volcano_queue import VolcanoQueueChart


def test_volcano_queue():
    queue = objects(VolcanoQueueChart())["Queue", "training"]
    assert queue["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert queue["spec"] == {"weight": 1, "reclaimable": False}
    assert "namespace" not in queue["metadata"]
    assert objects(VolcanoQueueChart(name="research"))["Queue", "research"]
