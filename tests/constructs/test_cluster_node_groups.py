"""ClusterNodeGroups: one registry per cluster, in the cluster's stack, that replays its node groups to listeners."""

import aws_cdk as cdk
from aws_cdk import assertions

from tests.support.apps import new_app
from tests.support.clusters import ENV, imported_cluster
from trainium_eks.constructs.cluster_node_groups import ClusterNodeGroups
from trainium_eks.constructs.training_node_group import TrainingNodeGroup
from trainium_eks.manifests.jobs.topology import NodeGroupTopology

CPU = NodeGroupTopology("m5.xlarge", 2, 2, 0)
TRN1 = NodeGroupTopology("trn1.32xlarge", 2, 4, 8)
P5 = NodeGroupTopology("p5.48xlarge", 1, 1, 32)


def test_one_registry_per_cluster_held_by_the_clusters_stack_without_any_resource():
    app = new_app()
    stack = cdk.Stack(app, "Clusters", env=ENV)
    _, first = imported_cluster(stack)
    registry = ClusterNodeGroups.of(first)
    assert ClusterNodeGroups.of(first) is registry, "found again, not created twice"
    assert registry.node.scope is stack, "an imported cluster is an interface and cannot hold children"
    assert registry.node.id == f"TrainiumEksNodeGroups{first.node.addr}"
    other_stack = cdk.Stack(app, "Other", env=ENV)
    _, second = imported_cluster(other_stack, cluster_name="second")
    other = ClusterNodeGroups.of(second)
    assert other is not registry and other.node.scope is other_stack
    registry.add(CPU)
    assert (registry.groups, other.groups) == ([CPU], [])
    assert not registry.node.children
    resources = assertions.Template.from_stack(stack).to_json().get("Resources", {})
    assert not [logical_id for logical_id in resources if logical_id.startswith("TrainiumEksNodeGroups")]


def test_a_listener_hears_the_groups_recorded_before_and_after_it_subscribed_once_each_in_order():
    stack = cdk.Stack(new_app(), "Listeners", env=ENV)
    registry = ClusterNodeGroups(stack, "Groups")
    registry.add(CPU)
    early, late = [], []
    registry.subscribe(early.append)
    assert early == [CPU], "replayed at once"
    registry.add(TRN1)
    registry.subscribe(late.append)
    registry.add(P5)
    assert early == [CPU, TRN1, P5]
    assert late == [CPU, TRN1, P5]
    assert registry.groups == [CPU, TRN1, P5]


def test_a_training_node_group_records_its_topology_in_its_clusters_registry():
    stack = cdk.Stack(new_app(), "Nodes", env=ENV)
    network, cluster = imported_cluster(stack)
    heard = []
    ClusterNodeGroups.of(cluster).subscribe(heard.append)
    group = TrainingNodeGroup(
        stack, "Cpu", cluster=cluster, subnet=network.node_subnet, instance_type="m5.xlarge", node_count=3
    )
    assert heard == [group.topology]
    assert (heard[0].instance_type, heard[0].node_count) == ("m5.xlarge", 3)
    assert ClusterNodeGroups.of(cluster).groups == [group.topology]
