"""The EC2NodeClass and NodePool of a Karpenter training pool, checked against Karpenter's CRD schemas and CEL rules."""

import copy

import pytest

from tests.support.k8s_validation import validate_objects
from trainium_eks.constructs.efa_layout import EfaLayout, karpenter_network_interfaces
from trainium_eks.core.conventions import ACCELERATOR_TAINTS, IMDS_HOP_LIMIT
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import INSTANCE_CATALOG, Accelerator, instance_facts
from trainium_eks.manifests.addons.karpenter_node_pool import KarpenterNodePoolChart, karpenter_duration


def chart(instance_type="trn1.32xlarge", **overrides):
    instance = instance_facts(instance_type)
    props = dict(
        name="accelerated-nodes",
        instance=instance,
        availability_zone_id="usw2-az4",
        subnet_id="subnet-0123456789abcdef0",
        security_group_ids=["sg-0123456789abcdef0"],
        node_role_name="TrainingNodes",
        max_nodes=2,
        idle_after=600,
        root_volume_gib=500,
        labels={"trainium-eks/accelerator": instance.accelerator.value},
        taints=[ACCELERATOR_TAINTS[instance.accelerator]] if instance.accelerator in ACCELERATOR_TAINTS else [],
        network_interfaces=karpenter_network_interfaces(instance, EfaLayout.IP_OPTIMIZED),
        placement_group_name="training-pg" if instance.efa_supported else None,
    )
    props.update(overrides)
    return KarpenterNodePoolChart(**props)


def objects(built):
    found = {obj["kind"]: obj for obj in built.to_json()}
    assert sorted(found) == ["EC2NodeClass", "NodePool"]
    return found["EC2NodeClass"], found["NodePool"]


def test_every_catalog_type_gives_objects_karpenters_schemas_and_cel_rules_accept(tmp_path):
    built = [obj for name in sorted(INSTANCE_CATALOG) for obj in chart(name, name=name.replace(".", "-")).to_json()]
    validate_objects(built, tmp_path)


def test_reserved_capacity_objects_are_valid(tmp_path):
    built = chart(reservation_ids=["cr-0123456789abcdef0"], placement_group_name=None)
    validate_objects(built.to_json(), tmp_path)
    node_class, pool = objects(built)
    assert node_class["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]
    capacity = [r for r in pool["spec"]["template"]["spec"]["requirements"] if r["key"] == "karpenter.sh/capacity-type"]
    assert capacity == [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}]


def test_the_validator_refuses_an_efa_only_primary_interface(tmp_path):
    """The CEL rule on networkInterfaces is live: the validator fails the layout Karpenter's API server refuses."""
    node_class, pool = objects(chart())
    broken = copy.deepcopy(node_class)
    broken["spec"]["networkInterfaces"][0]["interfaceType"] = "efa-only"
    with pytest.raises(AssertionError, match="primary interface"):
        validate_objects([broken, pool], tmp_path)


@pytest.mark.parametrize(
    ("instance_type", "cards"), [("trn1.32xlarge", 8), ("trn1n.32xlarge", 16), ("trn2.48xlarge", 16)]
)
def test_ip_optimized_layout_gives_one_efa_device_per_network_card(instance_type, cards):
    interfaces = objects(chart(instance_type))[0]["spec"]["networkInterfaces"]
    assert interfaces[0] == {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}
    efa = [i for i in interfaces if i["interfaceType"] == "efa-only"]
    assert sorted(i["networkCardIndex"] for i in efa) == list(range(cards))
    assert len(interfaces) == cards + 1


def test_all_efa_layout_leaves_the_interfaces_to_karpenter():
    instance = instance_facts("trn1.32xlarge")
    assert karpenter_network_interfaces(instance, EfaLayout.ALL_EFA) is None
    assert karpenter_network_interfaces(instance_facts("m5.xlarge"), EfaLayout.IP_OPTIMIZED) is None
    node_class, _ = objects(chart(network_interfaces=None))
    assert "networkInterfaces" not in node_class["spec"]


def test_node_class_pins_ami_subnet_groups_role_and_imdsv2():
    spec = objects(chart())[0]["spec"]
    assert spec["amiSelectorTerms"] == [{"alias": f"al2023@{versions.EKS_AMI_RELEASE}"}]
    assert spec["subnetSelectorTerms"] == [{"id": "subnet-0123456789abcdef0"}]
    assert spec["securityGroupSelectorTerms"] == [{"id": "sg-0123456789abcdef0"}]
    assert spec["role"] == "TrainingNodes"
    assert spec["metadataOptions"]["httpTokens"] == "required"
    assert spec["metadataOptions"]["httpPutResponseHopLimit"] == IMDS_HOP_LIMIT == 1
    (root,) = spec["blockDeviceMappings"]
    assert root["rootVolume"] is True
    assert root["ebs"] == {"volumeSize": "500Gi", "volumeType": "gp3", "encrypted": True, "deleteOnTermination": True}
    assert spec["placementGroupSelector"] == {"name": "training-pg"}


def test_node_pool_pins_type_zone_capacity_and_removes_only_empty_nodes():
    spec = objects(chart())[1]["spec"]
    requirements = {r["key"]: r["values"] for r in spec["template"]["spec"]["requirements"]}
    assert requirements == {
        "node.kubernetes.io/instance-type": ["trn1.32xlarge"],
        "topology.k8s.aws/zone-id": ["usw2-az4"],
        "karpenter.sh/capacity-type": ["on-demand"],
    }
    assert spec["template"]["spec"]["taints"] == [
        {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}
    ]
    assert spec["template"]["spec"]["expireAfter"] == "Never"
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert spec["disruption"]["consolidateAfter"] == "10m"
    assert {"nodes": "0", "reasons": ["Drifted"]} in spec["disruption"]["budgets"]
    assert spec["limits"] == {"nodes": "2", "cpu": "256"}


def test_without_an_az_id_the_subnet_alone_places_the_nodes():
    spec = objects(chart(availability_zone_id=None))[1]["spec"]
    assert "topology.k8s.aws/zone-id" not in {r["key"] for r in spec["template"]["spec"]["requirements"]}


def test_cpu_pool_has_no_taint_and_no_placement_group():
    node_class, pool = objects(chart("m5.xlarge", root_volume_gib=100))
    assert "taints" not in pool["spec"]["template"]["spec"]
    assert "placementGroupSelector" not in node_class["spec"]
    assert instance_facts("m5.xlarge").accelerator is Accelerator.NONE


@pytest.mark.parametrize(("seconds", "text"), [(600, "10m"), (90, "90s"), (7200, "2h"), (3660, "61m")])
def test_durations_are_written_in_the_largest_whole_unit(seconds, text):
    assert karpenter_duration(seconds) == text
