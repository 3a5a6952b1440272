"""ClusterAddons: everything in-cluster a distributed training job needs, applied by the stack in the right order."""

from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional, Sequence, Union

import cdk8s
import yaml
from aws_cdk import CfnMapping, Duration, Stack, Token
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

from trainium_eks.constructs.applied_chart import AppliedChart
from trainium_eks.constructs.cluster_node_groups import ClusterNodeGroups
from trainium_eks.core.conventions import (
    DEFAULT_NAMESPACE,
    DEFAULT_SERVICE_ACCOUNT,
    SYSTEM_NODE_LABELS,
    EfsVolumeSource,
    LustreVolumeSource,
)
from trainium_eks.core.validation import (
    Problems,
    check_bool,
    check_cluster,
    check_dns_label,
    check_dns_subdomain,
    check_instance,
    check_strings,
    implements,
)
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import Accelerator, instance_facts
from trainium_eks.facts.regions import EKS_REGISTRY_ACCOUNTS, eks_registry
from trainium_eks.manifests.access.system_network_policy import SystemNetworkPolicyChart
from trainium_eks.manifests.access.training_namespace import TrainingNamespaceChart
from trainium_eks.manifests.access.training_network_policy import (
    EKS_KUBERNETES_SERVICE_IPS,
    TrainingNetworkPolicyChart,
)
from trainium_eks.manifests.addons.efa_device_plugin import EfaDevicePluginChart
from trainium_eks.manifests.addons.neuron_device_plugin import NeuronDevicePluginChart
from trainium_eks.manifests.addons.nvidia_device_plugin import NvidiaDevicePluginChart
from trainium_eks.manifests.addons.tensorboard import TensorBoardChart
from trainium_eks.manifests.addons.volcano_queue import DEFAULT_QUEUE, VolcanoQueueChart
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.storage.efs_volume import EfsVolumeChart
from trainium_eks.manifests.storage.lustre_volume import LustreVolumeChart
from trainium_eks.moved import removed_props

VOLCANO_NAMESPACE = "volcano-system"
VOLCANO_RELEASE = "volcano"
"""Release name: the admission Service is ``<release>-admission-service``, as in Volcano's docs."""

KUBECTL_HANDLER_TIMEOUT = Duration.minutes(15)
"""Timeout of the kubectl handler Lambda of aws-eks-v2, which runs every ``helm`` and ``kubectl`` command of the
stack (aws-cdk ``packages/aws-cdk-lib/aws-eks-v2/lib/kubectl-provider.ts``: ``timeout: Duration.minutes(15)``; no
isComplete step, so a command must end within one invocation)."""

VOLCANO_BASIC_VALUES = {"image_pull_policy": "IfNotPresent"}
"""The Volcano release's ``basic`` values: its images are pulled once per node, not on every start. The chart's
default is ``Always`` (volcano-sh/volcano v1.15.1 ``installer/helm/chart/volcano/values.yaml``
``basic.image_pull_policy``, the ``imagePullPolicy`` of every container its templates write), which asks Docker Hub
on each restart of the controller, scheduler or webhook: a tag moved there, or the registry's pull limit, would then
change or stop the cluster's scheduler. The tag stays the chart's (``v1.15.1``)."""

VOLCANO_DEFAULT_QUEUE = "default"
"""The queue Volcano's scheduler creates at start (``pkg/scheduler/cache/cache.go`` at v1.15.1)."""

QUEUE_OPEN_TIMEOUT = Duration.minutes(5)
"""How long the deploy waits for the Volcano queue to be opened by Volcano's queue controller (seconds, normally)."""

HELM_BUDGET = Duration.minutes(11)
"""How long one ``helm upgrade --install`` may take in all: clearly below :data:`KUBECTL_HANDLER_TIMEOUT`, so that a
slow install ends with Helm's own error (which pods or hooks are not ready) and the handler still has minutes to pull
the chart and report, instead of the Lambda being killed."""


SCALE_FROM_ZERO_SCHEDULER_CONF = yaml.safe_dump(
    {
        "actions": "allocate, backfill",
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}, {"name": "conformance"}]},
            {
                "plugins": [
                    {"name": "overcommit"},
                    {"name": "drf", "enablePreemptable": False},
                    {"name": "predicates"},
                    {"name": "proportion"},
                    {"name": "nodeorder"},
                    {"name": "binpack"},
                ]
            },
        ],
    },
    sort_keys=False,
)
"""Volcano's scheduler configuration on a cluster whose training nodes come for pending pods: the chart's own
(volcano-sh/volcano v1.15.1 ``installer/helm/chart/volcano/config/volcano-scheduler.conf``: actions ``enqueue,
allocate, backfill``, the same two plugin tiers) without ``enqueue``. With ``enqueue``, the ``overcommit`` and
``proportion`` plugins keep a PodGroup ``Pending`` while the cluster has no capacity for it, and the vcjob controller
creates a job's pods only once its PodGroup has left ``Pending`` (``pkg/controllers/job/job_controller_actions.go``
``syncJob``): on zero nodes no pod is ever created, so Karpenter never launches one. Without ``enqueue``,
``allocate`` moves a ``Pending`` PodGroup to ``Inqueue`` at once (``pkg/scheduler/actions/allocate/allocate.go``),
the pods are created, fit nowhere, and are marked ``PodScheduled=False`` reason ``Unschedulable``, which is what
Karpenter launches nodes for. Given as the chart's ``custom.scheduler_config_override`` (a YAML string, which
``templates/scheduler.yaml`` writes as the ConfigMap's ``volcano-scheduler.conf``)."""


def helm_timeout(pin: versions.HelmChartPin) -> Duration:
    """The ``--timeout`` of a release of ``pin``: :data:`HELM_BUDGET` shared by the wait for its resources and each
    of its hook phases (:attr:`~trainium_eks.facts.versions.HelmChartPin.hook_phases`), which Helm gives the whole
    timeout each."""
    return Duration.seconds(int(HELM_BUDGET.to_seconds()) // (1 + pin.hook_phases))


class ClusterAddons(Construct):
    """The in-cluster half of the seed system, as charts (and Volcano's Helm chart) applied by the stack.

    Every chart is an :class:`AppliedChart`: one CloudFormation resource per Kubernetes object, keyed by the object's
    kind, namespace and name. An object whose content changes is updated in place (``kubectl apply``); an object
    renamed or dropped from a chart is a new resource, and CloudFormation deletes the old object with ``kubectl delete``
    after creating the new one. Nothing relies on ``kubectl apply --prune``, which aws-eks-v2 runs with kubectl's
    default allow-list (no custom resources, NetworkPolicies, ServiceAccounts or RBAC objects).

    What ``cdk destroy`` (or removing the construct) deletes: every object except the training namespace, the
    volume and its claim (:data:`~trainium_eks.constructs.applied_chart.RETAINED_KINDS`: deleting a namespace deletes
    every job in it; a claim in use cannot be deleted; the data lives on the retained file system either way). Volcano
    is uninstalled (``helm uninstall``); the queue is deleted before it.

    **Device plugins follow the node groups**: each ``TrainingNodeGroup`` of the cluster (built before or after
    this construct, :class:`~trainium_eks.constructs.cluster_node_groups.ClusterNodeGroups`) brings the plugins its
    devices need: the Neuron plugin for Trainium nodes, the EFA plugin for nodes with EFA interfaces, the NVIDIA
    plugin for NVIDIA nodes; without them the kubelet advertises no ``aws.amazon.com/neuron``,
    ``vpc.amazonaws.com/efa`` or ``nvidia.com/gpu`` and every job asking for them stays Pending. A cluster without
    such nodes runs none of them (and none of their service accounts and cluster roles).

    **The namespace's network is closed**: :class:`TrainingNetworkPolicyChart` denies every flow to and from its pods
    but those its jobs need (pods of the namespace among themselves, DNS, the Pod Identity agent; the Kubernetes API
    for the release Jobs; HTTPS to the internet for the dataset staging Jobs).

    Order, as stack dependencies: the namespace before everything namespaced in it (service account, NetworkPolicies,
    claim, TensorBoard); the NetworkPolicies before TensorBoard and the jobs; in each chart, accounts, roles and
    services before workloads; Volcano (which installs its CRDs and admission webhook) before the queue; Volcano after
    ``after_nodes`` (the system node group), because its pre-install hook Job and its pods run there and Helm gives the
    hook and the wait the whole timeout each (:func:`helm_timeout`). ``helm --wait`` waits until its pods are ready; the
    admission Deployment has no readiness probe, so ready means started. Jobs come after :attr:`job_prerequisites`.

    :param cluster: Required.
    :param volume: The shared file system: ``LustreStorage.volume_source`` (the static volume ``fsx-pv`` and claim
        ``fsx-claim``) or ``EfsStorage.volume_source`` (the storage class ``efs-sc``, volume ``efs-pv`` and claim
        ``efs-sc-claim``). Required.
    :param namespace: Default: ``training``.
    :param service_account: Default: ``training``.
    :param queue: Name of the Volcano queue. Default: ``training``.
    :param node_instance_types: Instance types of nodes the library does not build (an existing node group, say):
        their device plugins are installed too. Default: none.
    :param nvidia_device_plugin: Deprecated (device plugins follow the node groups): true adds an NVIDIA type to
        ``node_instance_types``. Default: false.
    :param after_nodes: What the Volcano release is installed after: the nodes its hook Job and pods run on (the
        system node group of a cluster built in the same app). Default: nothing (an existing cluster's nodes).
    :param kubernetes_api_addresses: The addresses of the cluster's ``kubernetes`` Service, which the release Jobs may
        reach through the namespace's NetworkPolicies (:class:`TrainingNetworkPolicyChart`). Default: the first address
        of either service CIDR EKS chooses from (for a cluster with its own service CIDR, give its first address).
    """

    @removed_props(
        "ClusterAddons",
        {"system_nodes": "now after_nodes=[<the system node group>]: what the Volcano release is installed after"},
    )
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster: eks.ICluster,
        volume: Union[LustreVolumeSource, EfsVolumeSource],
        namespace: str = DEFAULT_NAMESPACE,
        service_account: str = DEFAULT_SERVICE_ACCOUNT,
        queue: str = DEFAULT_QUEUE,
        node_instance_types: Sequence[str] = (),
        nvidia_device_plugin: bool = False,
        after_nodes: Sequence[IConstruct] = (),
        kubernetes_api_addresses: Sequence[str] = EKS_KUBERNETES_SERVICE_IPS,
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        check_cluster(problems, "cluster", cluster, "kubectl_provider")
        check_instance(
            problems,
            "volume",
            volume,
            (LustreVolumeSource, EfsVolumeSource),
            "a LustreVolumeSource (LustreStorage) or an EfsVolumeSource (EfsStorage)",
        )
        check_dns_label(problems, "namespace", namespace)
        check_dns_subdomain(problems, "service_account", service_account)
        check_dns_label(problems, "queue", queue)
        check_bool(problems, "nvidia_device_plugin", nvidia_device_plugin)
        if check_strings(problems, "node_instance_types", node_instance_types):
            for name in node_instance_types:
                try:
                    instance_facts(name)
                except KeyError:
                    problems.add("node_instance_types", name, "instance types of trainium_eks.facts.catalog")
        if not isinstance(after_nodes, (list, tuple)) or not all(implements(n, IConstruct) for n in after_nodes):
            problems.add("after_nodes", after_nodes, "a list of constructs (the system node group)")
        problems.raise_if_any()
        self.cluster = cluster
        self.namespace = namespace
        self.service_account = service_account
        self.queue = queue

        self.nodes_launched_for_pods = False
        """Whether some of the cluster's nodes come only for pending pods (a TrainingNodePool): then Volcano runs
        without its ``enqueue`` action (:data:`SCALE_FROM_ZERO_SCHEDULER_CONF`)."""
        self.neuron_device_plugin: Optional[AppliedChart] = None
        self.efa_device_plugin: Optional[AppliedChart] = None
        self.nvidia_device_plugin: Optional[AppliedChart] = None
        types = list(node_instance_types)
        if nvidia_device_plugin:
            warnings.warn(
                "ClusterAddons(nvidia_device_plugin=True) is deprecated: device plugins follow the cluster's "
                "TrainingNodeGroups; for nodes built elsewhere pass node_instance_types",
                DeprecationWarning,
                stacklevel=2,
            )
            types.append("g5.xlarge")
        for name in types:
            facts = instance_facts(name)
            self._serve_devices(facts.accelerator, efa=facts.efa_supported)
        ClusterNodeGroups.of(cluster).subscribe(self._serve_node_group)
        self.training_namespace = self._apply(
            "TrainingNamespace", TrainingNamespaceChart(namespace=namespace, service_account=service_account)
        )
        in_namespace = self.training_namespace.of_kind("Namespace")
        self.network_policies = self._apply(
            "NetworkPolicies",
            TrainingNetworkPolicyChart(namespace=namespace, kubernetes_api_addresses=kubernetes_api_addresses),
            after=in_namespace,
        )
        self.volume_chart: LibraryChart = (
            LustreVolumeChart(volume=volume, namespace=namespace)
            if isinstance(volume, LustreVolumeSource)
            else EfsVolumeChart(volume=volume, namespace=namespace)
        )
        self.shared_volume = self._apply("SharedVolume", self.volume_chart, after=in_namespace)
        self.tensorboard = self._apply(
            "TensorBoard",
            TensorBoardChart(namespace=namespace, claim_name=self.volume_chart.claim_name),
            after=[*in_namespace, self.network_policies],
        )

        self.volcano_namespace_network = self._apply(
            "VolcanoNamespaceNetwork", SystemNetworkPolicyChart(namespace=VOLCANO_NAMESPACE, create_namespace=True)
        )
        """Volcano's namespace and its allow-all NetworkPolicy, before Volcano's pods (the VPC CNI's strict mode
        denies a pod that no policy selects: :class:`~trainium_eks.manifests.SystemNetworkPolicyChart`)."""
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
            timeout=helm_timeout(versions.VOLCANO),
            values={"basic": dict(VOLCANO_BASIC_VALUES), "custom": self._volcano_custom_values()},
        )
        for nodes in (*after_nodes, self.volcano_namespace_network):
            self.volcano.node.add_dependency(nodes)
        self.volcano_admission_serving = eks.KubernetesObjectValue(
            self,
            "VolcanoAdmissionServing",
            cluster=cluster,
            object_type="queues.scheduling.volcano.sh",
            object_name=VOLCANO_DEFAULT_QUEUE,
            json_path=".metadata.name",
            timeout=QUEUE_OPEN_TIMEOUT,
        )
        """Waits until Volcano's admission webhooks serve, seen as the ``default`` queue existing: Volcano's scheduler
        creates it at start through the queue webhooks (failure policy Fail), retrying every second until they admit
        it (volcano-sh/volcano v1.15.1 ``pkg/scheduler/cache/cache.go``, ``createIfNotExists``). Helm's wait is not
        enough: it ends when the admission pod is ready, and the admission server answers its readiness probe before
        it writes its CA into the webhook configurations (which its chart creates without one) and before it listens
        (``cmd/webhook-manager/app/server.go``: ``StartHealthz``, ``addCaCertForWebhook``, then
        ``ListenAndServeTLS``); a Queue created in between is denied. Found by ``tests/e2e/test_deploy.py`` on the
        real API server and webhook. (The webhook configurations exist before the scheduler's first try: Helm creates
        the release's objects before any of its pods runs.)"""
        self.volcano_admission_serving.node.add_dependency(self.volcano)
        self.volcano_queue = self._apply(
            "VolcanoQueue", VolcanoQueueChart(name=queue), after=[self.volcano_admission_serving]
        )
        self.volcano_queue_open = eks.KubernetesObjectValue(
            self,
            "VolcanoQueueOpen",
            cluster=cluster,
            object_type="queues.scheduling.volcano.sh",
            object_name=queue,
            json_path=".status.state",
            timeout=QUEUE_OPEN_TIMEOUT,
        )
        self.volcano_queue_open.node.add_dependency(self.volcano_queue)
        """Waits until Volcano's queue controller has given the queue a state (``Open``): Volcano's job and PodGroup
        webhooks deny a job whose queue has no state yet (volcano-sh/volcano v1.15.1
        ``pkg/webhooks/admission/jobs/validate/admit_job.go`` ``validateJobCreate``: "can only submit job to queue with
        state `Open`"), and a new queue has none until the controller opens it."""

        self.job_prerequisites: List[IConstruct] = [
            self.training_namespace,
            self.network_policies,
            self.shared_volume,
            self.volcano_queue_open,
        ]
        """What every job is created after: the namespace and its service account, its NetworkPolicies (a pod created
        before the network policy agent knows a policy that selects it may start unprotected: Kubernetes, "Network
        Policies", pod lifecycle), the claim and the Volcano queue, open.
        Not the device plugins or the nodes: a pod waits for its devices and nodes without failing."""

    def _serve_node_group(self, group: NodeGroupTopology) -> None:
        self._serve_devices(group.instance.accelerator, efa=group.efa_interfaces > 0)
        if group.launched_for_pods and not self.nodes_launched_for_pods:
            if hasattr(self, "volcano"):
                problems = Problems(self.node.path)
                problems.add(
                    "TrainingNodePool",
                    group.instance_type,
                    "a pool built before this ClusterAddons, whose Volcano was configured for standing nodes only "
                    "(with the enqueue action no job's pods are created on zero nodes): build the cluster's "
                    "TrainingNodePools first, then its ClusterAddons",
                )
                problems.raise_if_any()
            self.nodes_launched_for_pods = True

    def _volcano_custom_values(self) -> Dict[str, Any]:
        """The Volcano release's ``custom`` values: the system nodes for its pods and, when some nodes come only for
        pending pods, :data:`SCALE_FROM_ZERO_SCHEDULER_CONF`."""
        values: Dict[str, Any] = {"default_ns": dict(SYSTEM_NODE_LABELS)}
        if self.nodes_launched_for_pods:
            values["scheduler_config_override"] = SCALE_FROM_ZERO_SCHEDULER_CONF
        return values

    def _serve_devices(self, accelerator: Accelerator, *, efa: bool) -> None:
        """Apply the device plugins of nodes with ``accelerator`` (and EFA interfaces), once each."""
        if accelerator is Accelerator.NEURON and self.neuron_device_plugin is None:
            self.neuron_device_plugin = self._apply("NeuronDevicePlugin", NeuronDevicePluginChart())
        if efa and self.efa_device_plugin is None:
            self.efa_device_plugin = self._apply("EfaDevicePlugin", EfaDevicePluginChart(registry=self._eks_registry()))
        if accelerator is Accelerator.NVIDIA and self.nvidia_device_plugin is None:
            self.nvidia_device_plugin = self._apply("NvidiaDevicePlugin", NvidiaDevicePluginChart())

    def add_chart(self, id_: str, chart: cdk8s.Chart) -> AppliedChart:
        """Apply a cdk8s chart of yours (an add-on of your own: a ConfigMap, a Deployment, objects of an imported
        CRD...) after the training namespace, one resource per object (:class:`AppliedChart`)."""
        return self._apply(id_, chart, after=self.training_namespace.of_kind("Namespace"))

    def _apply(self, id_: str, chart: cdk8s.Chart, *, after: Sequence[IConstruct] = ()) -> AppliedChart:
        return AppliedChart(self, id_, cluster=self.cluster, chart=chart, after=after)

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
