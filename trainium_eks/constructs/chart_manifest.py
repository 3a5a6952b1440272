"""apply_chart: how every cdk8s chart of the library reaches the cluster."""

from __future__ import annotations

from typing import Sequence

from aws_cdk import RemovalPolicy
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

from trainium_eks.manifests.chart import LibraryChart


def apply_chart(
    scope: Construct,
    id_: str,
    *,
    cluster: eks.ICluster,
    chart: LibraryChart,
    prune: bool,
    removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
    after: Sequence[IConstruct] = (),
) -> eks.KubernetesManifest:
    """Apply ``chart`` to ``cluster`` as one manifest resource of the stack, after ``after``.

    ``overwrite`` is always on (``kubectl apply`` even on creation), so a deployment that finds the objects from an
    earlier, rolled-back attempt takes them over instead of failing. ``prune`` deletes objects dropped from the chart
    on the next deploy; ``removal_policy`` decides what happens to the objects when the chart leaves the app.
    """
    manifest = eks.KubernetesManifest(
        scope,
        id_,
        cluster=cluster,
        manifest=chart.to_json(),
        prune=prune,
        removal_policy=removal_policy,
        overwrite=True,
    )
    for dependency in after:
        manifest.node.add_dependency(dependency)
    return manifest
