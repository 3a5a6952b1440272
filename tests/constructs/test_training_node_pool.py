"""TrainingNodePool on its own: the same node facts as TrainingNodeGroup, as Karpenter objects applied after the
controller."""

import json

import aws_cdk as cdk
import pytest
from aws_cdk import Duration, assertions

from tests.support.apps import new_app, resources_of
from trainium_eks.constructs.cluster import TrainingCluster
from trainium_eks.constructs.efa_layout import EfaLayout
from trainium_eks.constructs.karpenter_controller import KarpenterController
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.constructs.node_capacity import NodeCapacity
from trainium_eks.constructs.training_node_group import TrainingNodeGroup
from trainium_eks.constructs.training_node_pool import DEFAULT_IDLE_TIMEOUT, TrainingNodePool
from trainium_eks.core.validation import ConfigurationError


def standalone(**props):
    """A stack with a cluster, its Karpenter and one pool built with ``props``; the pool and the template."""
    app = new_app()
    stack = cdk.Stack(app, "Standalone", env=cdk.Environment(region="us-west-2"))
    network = TrainingNetwork(stack, "Network", node_az_id="usw2-az4")
    cluster = TrainingCluster(stack, "Cluster", vpc=network.vpc)
    controller = KarpenterController(stack, "Karpenter", cluster=cluster.cluster, after=[cluster.system_nodegroup])
    props.setdefault("availability_zone_id", "usw2-az4")
    pool = TrainingNodePool(
        stack, "Trn", cluster=cluster.cluster, subnet=network.node_subnet, controller=controller, **props
    )
    return pool, assertions.Template.from_stack(stack)


def manifests(template):
    """The pool's objects by kind, as the kubectl handler receives them (tokens as CloudFormation intrinsics)."""
    found = {}
    for logical_id, resource in resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource").items():
        if logical_id.startswith("TrnNodePool"):
            kind = logical_id[len("TrnNodePool") :].split("trn", 1)[0]
            found[kind] = (logical_id, resource)
    return found


@pytest.fixture(scope="module")
def built():
    return standalone()


def test_pool_has_the_node_groups_labels_taints_and_efa_devices(built):
    pool, _ = built
    app = new_app()
    stack = cdk.Stack(app, "Group", env=cdk.Environment(region="us-west-2"))
    network = TrainingNetwork(stack, "Network", node_az_id="usw2-az4")
    cluster = TrainingCluster(stack, "Cluster", vpc=network.vpc)
    group = TrainingNodeGroup(stack, "Trn", cluster=cluster.cluster, subnet=network.node_subnet)
    assert pool.labels == group.labels
    assert pool.topology.taints == group.topology.taints
    assert pool.efa_interfaces == group.efa_interfaces == 8
    assert pool.topology.launched_for_pods and not group.topology.launched_for_pods
    assert pool.topology.node_pool == pool.pool_name and group.topology.node_pool is None, "its limit is its own"
    assert (pool.topology.instance_type, pool.topology.node_count) == (group.topology.instance_type, 2)


def test_node_class_names_the_pools_own_security_group_subnet_and_karpenters_node_role(built):
    _, template = built
    _, resource = manifests(template)["EC2NodeClass"]
    text = json.dumps(resource["Properties"]["Manifest"])
    assert '"Fn::GetAtt": ["TrnNodeSecurityGroup' in text
    assert '"Ref": "NetworkAcceleratedSubnet' in text
    assert '"Ref": "KarpenterNodeRole' in text
    assert '"Fn::GetAtt": ["TrnPlacementGroup' in text


def test_objects_are_applied_after_the_controller_and_the_pool_after_its_node_class(built):
    _, template = built
    found = manifests(template)
    releases = [
        k
        for k, v in resources_of(template, "Custom::AWSCDK-EKS-HelmChart").items()
        if v["Properties"]["Release"] == "karpenter"
    ]
    node_class_id, node_class = found["EC2NodeClass"]
    _, pool = found["NodePool"]
    assert releases[0] in node_class["DependsOn"]
    assert node_class_id in pool["DependsOn"]


def test_capacity_block_pool_launches_reserved_capacity_without_a_new_placement_group():
    pool, template = standalone(capacity=NodeCapacity.capacity_block("cr-0123456789abcdef0"))
    assert pool.placement_group is None
    template.resource_count_is("AWS::EC2::PlacementGroup", 0)
    spec = pool.chart.to_json()
    node_class = next(o for o in spec if o["kind"] == "EC2NodeClass")
    node_pool = next(o for o in spec if o["kind"] == "NodePool")
    assert node_class["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]
    assert {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]} in node_pool["spec"][
        "template"
    ]["spec"]["requirements"]


def test_all_efa_layout_still_counts_one_efa_device_per_card():
    pool, _ = standalone(efa_layout=EfaLayout.ALL_EFA)
    assert pool.efa_interfaces == 8
    assert "networkInterfaces" not in next(o for o in pool.chart.to_json() if o["kind"] == "EC2NodeClass")["spec"]


def test_cost_is_what_a_running_job_adds_and_the_idle_tail():
    pool, _ = standalone(idle_timeout=Duration.minutes(30))
    line = pool.cost_line
    assert not line.idle
    assert line.tail_hours == 0.5
    assert line.usd_per_hour == pytest.approx(pool.usd_per_hour)
    assert "while a job runs" in line.quantity
    assert DEFAULT_IDLE_TIMEOUT.to_minutes() == 10


def test_every_bad_setting_is_reported_at_once():
    with pytest.raises(ConfigurationError) as raised:
        standalone(node_count=3, max_nodes=2, idle_timeout=Duration.seconds(20), availability_zone_id="usw2-az9")
    message = str(raised.value)
    assert "node_count" in message and "max_nodes=2" in message
    assert "idle_timeout" in message and "from 1 minute to 24 hours" in message
    assert "availability_zone_id" in message


def test_an_idle_timeout_over_a_day_is_refused():
    with pytest.raises(ConfigurationError, match="idle_timeout"):
        standalone(idle_timeout=Duration.hours(25))


def test_a_type_the_az_does_not_offer_is_refused():
    with pytest.raises(ConfigurationError, match="not offered there"):
        standalone(instance_type="trn1.32xlarge", availability_zone_id="usw2-az1")


def test_without_an_az_id_a_type_the_stacks_region_does_not_offer_is_refused():
    """trn2.48xlarge in a us-west-2 stack, its subnet composed without an AZ ID: the catalog lists trn2's regions."""
    with pytest.raises(ConfigurationError) as raised:
        standalone(instance_type="trn2.48xlarge", availability_zone_id=None)
    (problem,) = raised.value.problems
    assert problem.startswith("instance_type='trn2.48xlarge': a type offered in the stack's region us-west-2: ")
    assert "offered in regions us-east-2, ap-south-2" in problem


def test_labels_in_karpenters_own_domains_are_refused():
    with pytest.raises(ConfigurationError, match="outside karpenter.sh"):
        standalone(labels={"karpenter.sh/team": "ml", "team.karpenter.k8s.aws/x": "y"})


def test_without_an_az_id_synth_warns_that_the_offering_is_unchecked():
    pool, _ = standalone(availability_zone_id=None)
    messages = [m.entry.data for m in cdk.App.of(pool).synth().get_stack_by_name("Standalone").messages]
    assert any("No availability_zone_id" in str(m) for m in messages)


def test_another_instance_type_is_another_pool_and_the_same_settings_the_same_pool(built):
    """A changed instance type creates a new NodePool and EC2NodeClass (CloudFormation then deletes the old ones and
    Karpenter their nodes at once); anything else keeps the pool's name, and its nodes."""
    pool, _ = built
    assert standalone()[0].pool_name == pool.pool_name
    assert standalone(max_nodes=4)[0].pool_name == pool.pool_name
    other = standalone(instance_type="trn1n.32xlarge")[0].pool_name
    assert other != pool.pool_name and other.split("-")[0] == pool.pool_name.split("-")[0] == "trn"
