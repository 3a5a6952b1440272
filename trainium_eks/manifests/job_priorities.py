"""JobPrioritiesChart: the priority classes that let a job's prerequisites always be scheduled before it."""

from __future__ import annotations

from trainium_eks.manifests.chart import LibraryChart

MAX_STAGES = 8
"""Depth of the longest chain of jobs waiting for one another (stage 0 waits for nothing)."""

TOP_PRIORITY = 100_000
"""Priority of stage 0; each later stage is 1000 lower. Far below ``system-node-critical`` (2,000,001,000), so
device plugins and add-ons always come first."""


def stage_priority_class(stage: int) -> str:
    """Name of the priority class of ``stage``."""
    return f"trainium-eks-stage-{stage}"


class JobPrioritiesChart(LibraryChart):
    """Priority classes ``trainium-eks-stage-0`` ... ``-7``, from high to low, that never preempt.

    A job that waits for another (its start gate) runs at a later stage than the job it waits for
    (:attr:`~trainium_eks.manifests.job_chart.JobChart.stage`), so its priority is lower. Volcano orders pending jobs
    by priority before creation time, so when both are pending it always gives the nodes to the job that is waited
    for, never to the waiting one, whose pods would hold the devices in their start gate while the other job could
    not start (a deadlock): this holds whatever order the jobs were created in, and after the earlier job restarts.
    ``preemptionPolicy: Never``: a higher stage never evicts a running job, it only goes first when both wait.
    """

    def __init__(self) -> None:
        super().__init__("job-priorities")
        for stage in range(MAX_STAGES):
            self.add_object(
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": self.metadata(stage_priority_class(stage), cluster_scoped=True),
                    "value": TOP_PRIORITY - 1000 * stage,
                    "globalDefault": False,
                    "preemptionPolicy": "Never",
                    "description": f"trainium-eks jobs at stage {stage} of a chain of jobs that wait for one another",
                }
            )
