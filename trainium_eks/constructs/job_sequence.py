"""JobSequence: jobs applied to the cluster by the stack, one after the other, each a hash-named object."""

from __future__ import annotations

from typing import Any, List, Sequence

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

from trainium_eks.constructs.chart_manifest import apply_chart
from trainium_eks.manifests.chart import LibraryChart


class JobSequence(Construct):
    """Applies job charts (``DatasetStagingChart``, ``TrainingJobChart``) in the order they are added.

    Each job is its own manifest resource in the stack, created after the previous job's and after
    ``prerequisites`` (device plugins, namespace, claim, etcd, the Volcano queue, the node group). Creation order is
    not start order: a job that must not start before another has finished names it in ``wait_for`` (its start gate
    waits in an init container); the order here only makes sure every job exists before the job that waits for it.

    Lifecycle: every manifest is pruned and deleted with its chart. A job's name carries a hash of its spec, so a
    changed argument creates a new job and prunes the old one (never an update of an immutable pod template), and a
    job removed from the app is deleted from the cluster.

    :param cluster: Required.
    :param prerequisites: What every job comes after. Default: nothing.
    """

    def __init__(
        self, scope: Construct, id_: str, *, cluster: eks.ICluster, prerequisites: Sequence[IConstruct] = ()
    ) -> None:
        super().__init__(scope, id_)
        self.cluster = cluster
        self.prerequisites = list(prerequisites)
        self.jobs: List[eks.KubernetesManifest] = []

    def resolve(self, value: Any) -> Any:
        """``value`` with CDK tokens in CloudFormation form: pass it to job charts as ``resolve`` so that a job's
        hash does not depend on token numbering."""
        return Stack.of(self).resolve(value)

    def add(self, id_: str, chart: LibraryChart) -> eks.KubernetesManifest:
        """Apply ``chart`` after every job added before it."""
        manifest = apply_chart(
            self, id_, cluster=self.cluster, chart=chart, prune=True, after=self.prerequisites + self.jobs[-1:]
        )
        self.jobs.append(manifest)
        return manifest
