"""KubeflowTrainer: Kubeflow Trainer v2 in a cluster (its Helm chart, with JobSet) and the library's runtime."""

from __future__ import annotations

from typing import List, Sequence

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

from trainium_eks.constructs.applied_chart import AppliedChart
from trainium_eks.constructs.cluster_addons import helm_timeout
from trainium_eks.core.conventions import SYSTEM_NODE_LABELS
from trainium_eks.core.validation import Problems, check_bool, check_cluster, check_dns_label, implements
from trainium_eks.facts import versions
from trainium_eks.manifests.access.system_network_policy import SystemNetworkPolicyChart
from trainium_eks.manifests.addons.training_runtime import DEFAULT_RUNTIME, TrainingRuntimeChart

TRAINER_RELEASE = "kubeflow-trainer"


class KubeflowTrainer(Construct):
    """Kubeflow Trainer v2 (``trainer.kubeflow.org``: TrainJob, TrainingRuntime, ClusterTrainingRuntime), installed by
    the stack from its official Helm chart at a pinned version (:data:`trainium_eks.facts.versions.KUBEFLOW_TRAINER`, an
    OCI chart), with its JobSet dependency, the controller on the system nodes, and the library's
    :class:`~trainium_eks.manifests.addons.training_runtime.TrainingRuntimeChart` applied once the controller (and its
    admission webhook) is ready.

    - Helm, not ``kubectl apply``: the Trainer's CRDs (2.4 MB) are far over the 262,144 bytes the last-applied
      annotation of the aws-eks-v2 handler's client-side ``kubectl apply`` can hold; Helm 4 applies them server-side.
      JobSet's CRD comes from its subchart's ``crds/`` folder: Helm installs it once and never upgrades it.
    - The chart's own runtimes are off (``runtimes.defaultEnabled: false``): they are installed by a post-install
      hook Job that pulls an Alpine image and ``apk add``s kubectl from the internet at install time; the library's
      runtime is applied by CloudFormation instead.
    - ``helm --wait`` (:func:`~trainium_eks.constructs.cluster_addons.helm_timeout`: 11 minutes, as the chart runs
      no hook with these values) waits for the controller and JobSet, which need the system nodes; the controller
      reports ready once its webhook server has started (kubeflow/trainer v2.3.0
      ``cmd/trainer-controller-manager/main.go``).

    :param cluster: Required (with a kubectl provider).
    :param runtime_name: Name of the library's ClusterTrainingRuntime. Default: ``trainium-eks-torch``.
    :param volcano: Gang scheduling of TrainJobs through Volcano (``podGroupPolicy.volcano``; the cluster needs
        Volcano, as ``ClusterAddons`` installs it). Default: true.
    :param after: What the release is installed after: with ``volcano``, Volcano's release (``ClusterAddons.volcano``),
        because a Trainer controller that starts before the PodGroup kind exists never watches PodGroups
        (kubeflow/trainer v2.3.0 ``pkg/runtime/framework/plugins/volcano/volcano.go`` ``ReconcilerBuilders``).
        Default: nothing (Volcano already in the cluster).
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster: eks.ICluster,
        runtime_name: str = DEFAULT_RUNTIME,
        volcano: bool = True,
        after: Sequence[IConstruct] = (),
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        check_cluster(problems, "cluster", cluster, "kubectl_provider")
        check_dns_label(problems, "runtime_name", runtime_name)
        check_bool(problems, "volcano", volcano)
        if not isinstance(after, (list, tuple)) or not all(implements(item, IConstruct) for item in after):
            problems.add("after", after, "a list of constructs (Volcano's Helm release)")
        problems.raise_if_any()
        pin = versions.KUBEFLOW_TRAINER
        self.namespace_network = AppliedChart(
            self,
            "NamespaceNetwork",
            cluster=cluster,
            chart=SystemNetworkPolicyChart(namespace=versions.KUBEFLOW_TRAINER_NAMESPACE, create_namespace=True),
        )
        """The namespace and its allow-all NetworkPolicy, before the release's pods (the VPC CNI's strict mode denies
        a pod that no policy selects: :class:`~trainium_eks.manifests.SystemNetworkPolicyChart`)."""
        self.release = eks.HelmChart(
            self,
            "Release",
            cluster=cluster,
            repository=pin.repository,
            chart=pin.chart,
            version=pin.version,
            release=TRAINER_RELEASE,
            namespace=versions.KUBEFLOW_TRAINER_NAMESPACE,
            create_namespace=True,
            wait=True,
            timeout=helm_timeout(pin),
            values={
                "manager": {"nodeSelector": dict(SYSTEM_NODE_LABELS)},
                "runtimes": {"defaultEnabled": False},
                "jobset": {"install": True},
            },
        )
        for item in (*after, self.namespace_network):
            self.release.node.add_dependency(item)
        self.runtime_chart = TrainingRuntimeChart(name=runtime_name, volcano=volcano)
        self.runtime = AppliedChart(self, "Runtime", cluster=cluster, chart=self.runtime_chart, after=[self.release])
        self.job_prerequisites: List[IConstruct] = [self.runtime]
        """What a TrainJob is created after: the runtime it refers to (and so the controller and its webhook)."""
