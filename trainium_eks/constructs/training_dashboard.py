"""TrainingDashboard: a CloudWatch dashboard of Neuron and EFA metrics per node, and of a cluster's failing nodes."""

from __future__ import annotations

from typing import List, Tuple

from aws_cdk import Duration, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from trainium_eks.core.validation import Problems, check_instance, check_text

CONTAINER_INSIGHTS = "ContainerInsights"
PER_NODE = "{ContainerInsights,ClusterName,InstanceId,NodeName}"
"""Dimension set of the per-node Container Insights metrics."""

NODE_PANELS: Tuple[Tuple[str, str, str], ...] = (
    ("NeuronCore utilisation per node (%)", "node_neuroncore_utilization", "Average"),
    ("Neuron device memory used per node (bytes)", "node_neurondevice_runtime_memory_used_bytes", "Average"),
    ("EFA bytes received per node (bytes/s)", "node_efa_rx_bytes", "Average"),
    ("EFA bytes sent per node (bytes/s)", "node_efa_tx_bytes", "Average"),
    ("EFA RDMA read bytes per node (bytes/s)", "node_efa_rdma_read_bytes", "Average"),
    ("EFA RDMA write bytes per node (bytes/s)", "node_efa_rdma_write_bytes", "Average"),
    ("Neuron execution errors per node", "node_neuron_execution_errors_total", "Sum"),
    ("Neuron hardware ECC events per node", "node_neurondevice_hw_ecc_events_total", "Sum"),
)
"""(title, metric, statistic) of each per-node panel. Metric names and dimensions: CloudWatch user guide, "Amazon
EKS and Kubernetes Container Insights with enhanced observability metrics" (Container-Insights-metrics-enhanced-EKS
.html): Neuron metrics from add-on v1.5.0-eksbuild.1, EFA metrics from v1.5.2-eksbuild.1; they need the Neuron and
EFA device plugins."""

CLUSTER_PANEL: Tuple[str, Tuple[Tuple[str, str], ...]] = (
    "Nodes, and nodes the agent counts as failed (a node lost: failed, then gone, then a new one)",
    (("cluster_node_count", "nodes"), ("cluster_failed_node_count", "nodes under pressure or not reporting")),
)
"""(title, ((metric, label), ...)) of the cluster panel, dimension ClusterName (CloudWatch user guide, "Amazon EKS and
Kubernetes Container Insights metrics", Container-Insights-metrics-EKS.html). The CloudWatch agent counts a node as
failed when its ``MemoryPressure``, ``DiskPressure``, ``PIDPressure`` or ``NetworkUnavailable`` condition is not
``False`` (open-telemetry/opentelemetry-collector-contrib ``internal/aws/k8s/k8sclient/node.go``
``failedNodeConditions``, which the agent builds on): a node whose kubelet stopped reporting counts (the node
lifecycle controller sets those conditions ``Unknown``: kubernetes v1.36.3
``pkg/controller/nodelifecycle/node_lifecycle_controller.go``), a node the repair replaces for its accelerators
(``AcceleratedHardwareReady``) or one Karpenter drifts or consolidates shows only in the node count. A gang's
restarts are not in CloudWatch: ``python -m trainium_eks status`` reads them from the jobs."""

DEFAULT_PERIOD = Duration.minutes(1)


class TrainingDashboard(Construct):
    """A CloudWatch dashboard with one graph per Neuron and EFA metric, one line per node, for one cluster, and a graph
    of its nodes and of those the CloudWatch agent counts as failed (:data:`CLUSTER_PANEL`).

    The graphs use ``SEARCH`` expressions over the Container Insights metrics (namespace ``ContainerInsights``,
    dimensions ClusterName, InstanceId, NodeName), so nodes that come and go appear without a redeploy. It needs
    ``TrainingCluster(container_insights=True)`` (the default), the Neuron and the EFA device plugins.

    :param cluster_name: The EKS cluster's name (a token is fine). Required.
    :param period: Aggregation period of the graphs. Default: one minute.
    """

    def __init__(self, scope: Construct, id_: str, *, cluster_name: str, period: Duration = DEFAULT_PERIOD) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        check_text(
            problems,
            "cluster_name",
            cluster_name,
            allowed="the EKS cluster's name: a TrainingCluster's .cluster.cluster_name, or the name of yours",
        )
        if check_instance(problems, "period", period, Duration, "a Duration of whole minutes"):
            seconds = period.to_seconds(integral=False)
            if Token.is_unresolved(seconds) or seconds % 60 or seconds <= 0:
                problems.add("period", period.to_human_string(), "a Duration of whole minutes")
        problems.raise_if_any()
        widgets: List[cloudwatch.IWidget] = [
            cloudwatch.GraphWidget(
                title=title,
                width=12,
                left=[self._per_node(metric, statistic, cluster_name, period)],
            )
            for title, metric, statistic in NODE_PANELS
        ]
        title, lines = CLUSTER_PANEL
        nodes = cloudwatch.GraphWidget(
            title=title,
            width=24,
            left=[
                cloudwatch.Metric(
                    namespace=CONTAINER_INSIGHTS,
                    metric_name=metric,
                    dimensions_map={"ClusterName": cluster_name},
                    statistic="Maximum",
                    label=label,
                    period=period,
                )
                for metric, label in lines
            ],
        )
        rows = [widgets[i : i + 2] for i in range(0, len(widgets), 2)]
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", widgets=[*rows, [nodes]])

    @staticmethod
    def _per_node(metric: str, statistic: str, cluster_name: str, period: Duration) -> cloudwatch.MathExpression:
        return cloudwatch.MathExpression(
            expression=(
                f'SEARCH(\'{PER_NODE} MetricName="{metric}" ClusterName="{cluster_name}"\', '
                f"'{statistic}', {int(period.to_seconds())})"
            ),
            using_metrics={},
            label="",
            period=period,
        )
