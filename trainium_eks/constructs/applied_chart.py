"""AppliedChart: how every chart of the library reaches the cluster, one CloudFormation resource per object."""

from __future__ import annotations

import re
from typing import Any, Dict, FrozenSet, List, Mapping, Sequence

import cdk8s
from aws_cdk import RemovalPolicy, Token
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

from trainium_eks.core.validation import Problems, check_cluster, check_instance, implements

RETAINED_KINDS: FrozenSet[str] = frozenset({"Namespace", "PersistentVolume", "PersistentVolumeClaim"})
"""Kinds that CloudFormation never deletes from the cluster (removal policy RETAIN): deleting a namespace deletes
every job and claim in it, and a claim in use cannot be deleted (its protection finalizer would hold ``kubectl
delete`` until the Lambda times out); the data lives on the retained file system either way."""

WORKLOAD_KINDS: FrozenSet[str] = frozenset(
    {"Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob", "Pod", "TrainJob", "PyTorchJob"}
)
"""Kinds that run pods: applied after the other objects of their chart (service accounts, roles, services, claims),
so that their pods never start before what they use exists."""

_ID_UNSAFE = re.compile(r"[^A-Za-z0-9.-]")


def object_identity(manifest: Mapping[str, Any]) -> str:
    """``<Kind>.<namespace>.<name>`` (``_`` for a cluster-scoped object): what names one Kubernetes object.

    Raises ValueError when the name or namespace is a CloudFormation token: the identity decides the resource's
    logical ID, which must be known at synth.
    """
    metadata = manifest.get("metadata") or {}
    name, namespace = metadata.get("name"), metadata.get("namespace") or "_"
    if not isinstance(name, str) or not name or _is_token(name) or _is_token(namespace):
        raise ValueError(f"a {manifest.get('kind')} needs a literal metadata.name (and namespace), got {metadata!r}")
    return _ID_UNSAFE.sub("-", f"{manifest['kind']}.{namespace}.{name}")


def _is_token(value: Any) -> bool:
    """Whether the string ``value`` holds a CDK token (encoded as ``${Token[...]}``; checked in jsii only then)."""
    return isinstance(value, str) and "${Token[" in value and Token.is_unresolved(value)


def apply_tier(kind: str) -> int:
    """0 for a Namespace, 2 for kinds that run pods (:data:`WORKLOAD_KINDS`), 1 for the rest."""
    if kind == "Namespace":
        return 0
    return 2 if kind in WORKLOAD_KINDS else 1


class AppliedChart(Construct):
    """Applies a cdk8s chart (the library's, or one of yours) to a cluster as one ``KubernetesManifest`` (custom
    resource) per Kubernetes object of the chart's ``to_json``.

    Why one resource per object: the construct id of each resource is the object's identity
    (:func:`object_identity`: kind, namespace, name), so

    - an object whose content changes keeps its logical ID, and the kubectl handler of aws-eks-v2 updates it in place
      with ``kubectl apply``;
    - an object that is renamed, or removed from the chart, leaves the template: CloudFormation creates the new
      resource first, then deletes the old one, and the handler runs ``kubectl delete -f`` on the old object only;
    - nothing relies on ``kubectl apply --prune``: the handler prunes with kubectl's default allow-list, which leaves
      out custom resources (Volcano Jobs and Queues), NetworkPolicies, ServiceAccounts and RBAC objects, so a
      renamed object of those kinds would otherwise linger. Prune stays off (no prune label is injected).

    This is why the library does not apply charts with the cluster's ``add_cdk8s_chart``: that makes one resource of
    a whole chart (aws-eks-v2 ``Cluster.addCdk8sChart``), so a renamed or removed object is left in the cluster
    unless prune catches it, a changed object re-applies every object of its chart, and switching an existing
    stack to it would replace each object's resource: CloudFormation would create the chart's resource, then delete
    the old ones, whose handler runs ``kubectl delete`` on the objects just applied.

    Every resource uses ``overwrite`` (``kubectl apply`` even on creation), so a deployment that finds an object
    left by an earlier, rolled-back attempt takes it over instead of failing on ``kubectl create``. Objects of
    :data:`RETAINED_KINDS` are never deleted by CloudFormation. Inside the chart, each object is applied after the
    objects of lower :func:`apply_tier` (the namespace first, workloads last); the whole chart comes after ``after``.

    :param cluster: Required.
    :param chart: A ``cdk8s.Chart`` (every chart of the library is one). Required.
    :param removal_policy: Removal policy of the resources, except objects of ``retained_kinds``.
        Default: ``RemovalPolicy.DESTROY`` (the objects are deleted with the chart).
    :param retained_kinds: Kinds always RETAINed. Default: :data:`RETAINED_KINDS`.
    :param after: What every object of the chart is applied after. Default: nothing.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster: eks.ICluster,
        chart: cdk8s.Chart,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
        retained_kinds: FrozenSet[str] = RETAINED_KINDS,
        after: Sequence[IConstruct] = (),
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        check_cluster(problems, "cluster", cluster, "kubectl_provider")
        check_instance(problems, "chart", chart, cdk8s.Chart, "a cdk8s.Chart")
        check_instance(problems, "removal_policy", removal_policy, RemovalPolicy, "a RemovalPolicy")
        if not isinstance(after, (list, tuple)) or not all(implements(item, IConstruct) for item in after):
            problems.add("after", after, "a list of constructs")
        problems.raise_if_any()
        objects: Dict[str, Mapping[str, Any]] = {}
        for manifest in chart.to_json():
            try:
                identity = object_identity(manifest)
            except ValueError as error:
                problems.add("chart", chart.node.id, f"objects with literal names: {error}")
                continue
            if identity in objects:
                problems.add("chart", chart.node.id, f"each object once: it holds {identity} twice")
            objects[identity] = manifest
        problems.raise_if_any()
        self.chart = chart
        self.manifests: Dict[str, eks.KubernetesManifest] = {}
        """Object identity -> the resource that applies it."""
        tiers: Dict[str, int] = {}
        for identity, manifest in objects.items():
            kind = manifest["kind"]
            self.manifests[identity] = eks.KubernetesManifest(
                self,
                identity,
                cluster=cluster,
                manifest=[manifest],
                prune=False,
                overwrite=True,
                removal_policy=RemovalPolicy.RETAIN if kind in retained_kinds else removal_policy,
            )
            tiers[identity] = apply_tier(kind)
        for identity, resource in self.manifests.items():
            lower = [self.manifests[other] for other, tier in tiers.items() if tier < tiers[identity]]
            if lower or after:
                resource.node.add_dependency(*lower, *after)

    def of_kind(self, kind: str) -> List[eks.KubernetesManifest]:
        """The resources that apply the chart's objects of ``kind``."""
        return [resource for identity, resource in self.manifests.items() if identity.split(".", 1)[0] == kind]
