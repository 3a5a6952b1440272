"""TrainingDashboard: one per-node SEARCH graph per panel, two a row, at the period given, and its refusals."""

import json

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from tests.support.apps import new_app, only
from tests.support.clusters import ENV
from trainium_eks.constructs.training_dashboard import CLUSTER_PANEL, NODE_PANELS, PER_NODE, TrainingDashboard
from trainium_eks.core.cfn_text import cfn_text
from trainium_eks.core.validation import ConfigurationError


def widgets(stack=None, **props):
    """The widgets of the dashboard body built in ``stack`` (a new one by default) with ``props``; references read
    as ``<logical id>``."""
    stack = stack or cdk.Stack(new_app(), "Dashboards", env=ENV)
    TrainingDashboard(stack, "Dashboard", **{"cluster_name": "trn-cluster", **props})
    body = only(assertions.Template.from_stack(stack), "AWS::CloudWatch::Dashboard")["Properties"]["DashboardBody"]
    return json.loads(cfn_text(body, reference=lambda logical_id: f"<{logical_id}>"))["widgets"]


def expressions(found):
    return [widget["properties"]["metrics"][0][0]["expression"] for widget in found]


def test_one_graph_per_panel_two_a_row_each_a_search_of_this_clusters_nodes_at_one_minute():
    found = widgets()[:-1]
    assert len(found) == len(NODE_PANELS) == 8
    assert [(w["x"], w["y"], w["width"]) for w in found] == [(x, 6 * row, 12) for row in range(4) for x in (0, 12)]
    for widget, (title, metric, statistic) in zip(found, NODE_PANELS, strict=True):
        properties = widget["properties"]
        assert properties["title"] == title and properties["region"] == "<AWS::Region>"
        ((line,),) = properties["metrics"]
        assert line["expression"] == (
            f"SEARCH('{PER_NODE} MetricName=\"{metric}\" ClusterName=\"trn-cluster\"', '{statistic}', 60)"
        )
    summed = [metric for _, metric, statistic in NODE_PANELS if statistic == "Sum"]
    assert summed == ["node_neuron_execution_errors_total", "node_neurondevice_hw_ecc_events_total"], "counters"


def test_the_period_and_a_cluster_name_token_reach_every_search():
    stack = cdk.Stack(new_app(), "Tokens", env=ENV)
    name = cdk.CfnParameter(stack, "ClusterName").value_as_string
    found = widgets(stack, cluster_name=name, period=cdk.Duration.minutes(5))
    # 300 s is a dashboard graph's default period, which the CDK leaves out
    assert ["period" in line[-1] for line in found[-1]["properties"]["metrics"]] == [False, False]
    assert [line[3] for line in found[-1]["properties"]["metrics"]] == ["<ClusterName>", "<ClusterName>"]
    found = found[:-1]
    assert expressions(found) == [
        f"SEARCH('{PER_NODE} MetricName=\"{metric}\" ClusterName=\"<ClusterName>\"', '{statistic}', 300)"
        for _, metric, statistic in NODE_PANELS
    ]


def test_the_last_row_graphs_the_clusters_nodes_and_its_failing_nodes_where_a_replaced_node_shows():
    last = widgets()[-1]
    assert (last["x"], last["y"], last["width"]) == (0, 24, 24)
    assert last["properties"]["title"] == CLUSTER_PANEL[0]
    assert last["properties"]["metrics"] == [
        [
            "ContainerInsights",
            metric,
            "ClusterName",
            "trn-cluster",
            {"label": label, "period": 60, "stat": "Maximum"},
        ]
        for metric, label in CLUSTER_PANEL[1]
    ]
    assert [metric for metric, _ in CLUSTER_PANEL[1]] == ["cluster_node_count", "cluster_failed_node_count"]


@pytest.mark.parametrize(
    "period, shown",
    [
        (cdk.Duration.seconds(90), "'1 minute 30 seconds'"),
        (cdk.Duration.seconds(0), "'0 seconds'"),
        (cdk.Duration.millis(1500), "'1 second 500 millis'"),
        ("1m", "'1m'"),
    ],
)
def test_a_period_of_other_than_whole_minutes_is_refused(period, shown):
    with pytest.raises(ConfigurationError, match=f"period={shown}: a Duration of whole minutes"):
        widgets(period=period)


@pytest.mark.parametrize("cluster_name", ["", " trn-cluster", None, 5])
def test_a_missing_or_padded_cluster_name_is_refused(cluster_name):
    with pytest.raises(ConfigurationError, match=rf"Dashboards/Dashboard: .*\n  - cluster_name={cluster_name!r}: "):
        widgets(cluster_name=cluster_name)
