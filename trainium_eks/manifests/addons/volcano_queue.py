"""VolcanoQueueChart: the Volcano queue that training jobs are submitted to."""

from __future__ import annotations

from trainium_eks.core.validation import Problems, check_dns_label, check_integer
from trainium_eks.manifests.chart import LibraryChart

DEFAULT_QUEUE = "training"
QUEUE_API_VERSION = "scheduling.volcano.sh/v1beta1"


class VolcanoQueueChart(LibraryChart):
    """A Volcano ``Queue`` (cluster-scoped) for training jobs: weight 1, not reclaimable (jobs of other queues never
    take its resources back while it runs), no capability cap (the tutorial's ``cpu: 2`` cap only worked because
    TorchX pods request no CPU).

    It must be applied after the Volcano chart is installed and its admission webhook serves requests (the tutorial
    hits "no endpoints available for service volcano-admission-service" otherwise); ``ClusterAddons`` orders it so.

    :param name: Default: ``training``.
    :param weight: Share of the cluster against other queues. Default: 1.
    """

    def __init__(self, *, name: str = DEFAULT_QUEUE, weight: int = 1) -> None:
        problems = Problems("Volcano queue chart")
        check_dns_label(problems, "name", name)
        check_integer(problems, "weight", weight, minimum=1, maximum=65535)
        problems.raise_if_any()
        super().__init__("volcano-queue")
        self.queue_name = name
        self.add_object(
            {
                "apiVersion": QUEUE_API_VERSION,
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": weight, "reclaimable": False},
            },
        )
