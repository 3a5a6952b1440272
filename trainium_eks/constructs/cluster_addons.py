"""ClusterAddons: everything in-cluster a distributed training job needs, applied by the stack in the right order."""

from __future__ import annotations

from typing import List, Sequence

from aws_cdk import CfnMapping, Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

from trainium_eks import versions
from trainium_eks.constructs.chart_manifest import apply_chart
from trainium_eks.constructs.cluster import SYSTEM_NODE_LABELS
from trainium_eks.constructs.lustre_storage import LustreVolumeSource
from trainium_eks.constructs.training_pod_identity import DEFAULT_NAMESPACE, DEFAULT_SERVICE_ACCOUNT
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.manifests.efa_device_plugin import EfaDevicePluginChart
from trainium_eks.manifests.etcd import EtcdChart
from trainium_eks.manifests.fsx_volume import FsxVolumeChart
from trainium_eks.manifests.neuron_device_plugin import NeuronDevicePluginChart
from trainium_eks.manifests.tensorboard import TensorBoardChart
from trainium_eks.manifests.training_namespace import TrainingNamespaceChart
from trainium_eks.manifests.volcano_queue import DEFAULT_QUEUE, VolcanoQueueChart
from trainium_eks.regions import EKS_REGISTRY_ACCOUNTS, eks_registry

VOLCANO_NAMESPACE = "volcano-system"
VOLCANO_RELEASE = "volcano"
"""Release name: the admission Service is ``<release>-admission-service``, as in Volcano's docs."""


class ClusterAddons(Construct):
    """The in-cluster half of the seed system, as cdk8s charts (and Volcano's Helm chart) applied by the stack.

    Charts and their lifecycle (``prune``: objects dropped from a chart are deleted on the next deploy;
    removal policy: what happens to the objects when the chart leaves the app):

    ============================ ========= ======== =====================================================
    chart                        prune     removal  why
    ============================ ========= ======== =====================================================
    Neuron device plugin         yes       destroy  stateless; a renamed object must not linger
    EFA device plugin            yes       destroy  same
    training namespace           no        retain   deleting a namespace deletes every job and claim in it
    FSx volume and claim         no        retain   a claim in use cannot be deleted (the update would
                                                    hang on its protection finalizer); the data is on the
                                                    retained file system either way
    etcd, TensorBoard            yes       destroy  stateless services
    Volcano (Helm)               n/a       destroy  uninstalled with the stack
    Volcano queue                yes       destroy  Volcano refuses to delete a queue that still has jobs
    ============================ ========= ======== =====================================================

    Order, as stack dependencies: the namespace before the claim, etcd and TensorBoard; the claim before
    TensorBoard; the system nodes before Volcano (its Helm release waits until its pods, the admission webhook
    among them, are ready); Volcano (which installs its CRDs) before the queue. Jobs depend on
    :attr:`job_prerequisites`.

    :param cluster: Required.
    :param volume: The shared file system (``LustreStorage.volume_source``). Required.
    :param system_nodes: What must exist before Volcano can become ready (the system node group). Required.
    :param namespace: Default: ``training``.
    :param service_account: Default: ``training``.
    :param queue: Name of the Volcano queue. Default: ``training``.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster: eks.ICluster,
        volume: LustreVolumeSource,
        system_nodes: IConstruct,
        namespace: str = DEFAULT_NAMESPACE,
        service_account: str = DEFAULT_SERVICE_ACCOUNT,
        queue: str = DEFAULT_QUEUE,
    ) -> None:
        super().__init__(scope, id_)
        self.cluster = cluster
        self.namespace = namespace
        self.service_account = service_account
        self.queue = queue

        self.neuron_device_plugin = self._apply("NeuronDevicePlugin", NeuronDevicePluginChart(), prune=True)
        self.efa_device_plugin = self._apply(
            "EfaDevicePlugin", EfaDevicePluginChart(registry=self._eks_registry()), prune=True
        )
        self.training_namespace = self._apply(
            "TrainingNamespace",
            TrainingNamespaceChart(namespace=namespace, service_account=service_account),
            prune=False,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.volume_chart = FsxVolumeChart(volume=volume, namespace=namespace)
        self.shared_volume = self._apply(
            "SharedVolume",
            self.volume_chart,
            prune=False,
            removal_policy=RemovalPolicy.RETAIN,
            after=[self.training_namespace],
        )
        self.etcd = self._apply("Etcd", EtcdChart(namespace=namespace), prune=True, after=[self.training_namespace])
        self.tensorboard = self._apply(
            "TensorBoard",
            TensorBoardChart(namespace=namespace, claim_name=self.volume_chart.claim_name),
            prune=True,
            after=[self.training_namespace, self.shared_volume],
        )

        self.volcano = eks.HelmChart(
            self,
            "Volcano",
            cluster=cluster,
            repository=versions.VOLCANO.repository,
            chart=versions.VOLCANO.chart,
            version=versions.VOLCANO.version,
            release=VOLCANO_RELEASE,
            namespace=VOLCANO_NAMESPACE,
            create_namespace=True,
            wait=True,
            timeout=Duration.minutes(15),
            values={"custom": {"default_ns": dict(SYSTEM_NODE_LABELS)}},
        )
        self.volcano.node.add_dependency(system_nodes)
        self.volcano_queue = self._apply(
            "VolcanoQueue", VolcanoQueueChart(name=queue), prune=True, after=[self.volcano]
        )

        self.job_prerequisites: List[IConstruct] = [
            self.neuron_device_plugin,
            self.efa_device_plugin,
            self.training_namespace,
            self.shared_volume,
            self.etcd,
            self.volcano_queue,
        ]
        """What every training job must come after: device plugins, namespace, claim, etcd, the Volcano queue."""

    def _apply(
        self,
        id_: str,
        chart: LibraryChart,
        *,
        prune: bool,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
        after: Sequence[IConstruct] = (),
    ) -> eks.KubernetesManifest:
        return apply_chart(
            self, id_, cluster=self.cluster, chart=chart, prune=prune, removal_policy=removal_policy, after=after
        )

    def _eks_registry(self) -> str:
        """The EKS image registry of the stack's region; a CloudFormation mapping when the region is a token."""
        stack = Stack.of(self)
        if not Token.is_unresolved(stack.region):
            return eks_registry(stack.region)
        mapping = CfnMapping(
            self,
            "EksRegistryAccounts",
            mapping={region: {"account": account} for region, account in sorted(EKS_REGISTRY_ACCOUNTS.items())},
        )
        return f"{mapping.find_in_map(stack.region, 'account')}.dkr.ecr.{stack.region}.{stack.url_suffix}"
