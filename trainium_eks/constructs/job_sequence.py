"""JobSequence: jobs applied to the cluster by the stack, each a hash-named object and its own resource."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

from trainium_eks.constructs.applied_chart import AppliedChart
from trainium_eks.manifests.job_chart import JobChart
from trainium_eks.validation import Problems, check_cluster, check_instance, implements


class JobSequence(Construct):
    """Applies job charts (``DatasetStagingChart``, ``TrainingJobChart``, ...) to a cluster.

    A job's name carries a hash of its spec, and each job is an :class:`AppliedChart`, whose resource is keyed by
    that name. So a changed job (an argument, the node count, the image) is a new CloudFormation resource: the next
    deploy creates the new job, then deletes the old one with ``kubectl delete`` (a running old job is stopped); a
    job removed from the app is deleted from the cluster. No job is ever updated in place (a pod template is
    immutable) and nothing relies on ``kubectl apply --prune`` (it never prunes Volcano Jobs).

    Every job is created after ``prerequisites`` (namespace, claim, etcd, the Volcano queue, the jobs' priority
    classes): creation is not start, and the jobs are created side by side. A job that must not start before another
    has finished waits in its start gate, and runs at a lower priority than the job it waits for
    (:attr:`JobChart.stage`), so the scheduler never gives the nodes to the waiting job first; a job whose pods carry
    no priority class (:attr:`JobChart.scheduled_by_priority`) is created after the jobs it waits for instead.

    :param cluster: Required.
    :param prerequisites: What every job comes after. Default: nothing.
    """

    def __init__(
        self, scope: Construct, id_: str, *, cluster: eks.ICluster, prerequisites: Sequence[IConstruct] = ()
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        check_cluster(problems, "cluster", cluster, "kubectl_provider")
        if not isinstance(prerequisites, (list, tuple)) or not all(
            implements(item, IConstruct) for item in prerequisites
        ):
            problems.add("prerequisites", prerequisites, "a list of constructs")
        problems.raise_if_any()
        self.cluster = cluster
        self.prerequisites = list(prerequisites)
        self.jobs: List[AppliedChart] = []
        self._by_ref: Dict[str, AppliedChart] = {}

    def resolve(self, value: Any) -> Any:
        """``value`` with CDK tokens in CloudFormation form: pass it to job charts as ``resolve`` so that a job's
        hash does not depend on token numbering."""
        return Stack.of(self).resolve(value)

    def add(self, id_: str, chart: JobChart) -> AppliedChart:
        """Apply ``chart`` after the prerequisites (and, when its pods carry no priority class, after the jobs of this
        sequence it waits for)."""
        problems = Problems(f"{self.node.path}/{id_}")
        check_instance(problems, "chart", chart, JobChart, "a job chart (TrainingJobChart, DatasetStagingChart...)")
        problems.raise_if_any()
        after = list(self.prerequisites)
        if not chart.scheduled_by_priority:
            after += [self._by_ref[ref] for ref in chart.wait_for if ref in self._by_ref]
        applied = AppliedChart(self, id_, cluster=self.cluster, chart=chart, after=after)
        self.jobs.append(applied)
        self._by_ref[chart.ref] = applied
        return applied
