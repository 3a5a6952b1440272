"""manifests.jobs.topology: NodeGroupTopology, the nodes of a group as a job sees them."""

import dataclasses

import pytest

from tests.support.kubeflow_jobs import CPU, P4D, TRN1
from trainium_eks.core.conventions import Taint
from trainium_eks.facts.catalog import instance_facts
from trainium_eks.manifests.jobs.topology import NodeGroupTopology


@pytest.mark.parametrize(
    "topology,devices,cores,gpus", [(CPU, 0, 0, 0), (TRN1, 16, 32, 0), (P4D, 0, 0, 8)], ids=["cpu", "trn1", "p4d"]
)
def test_the_accelerators_per_node_are_the_catalog_rows(topology, devices, cores, gpus):
    assert topology.instance == instance_facts(topology.instance_type)
    assert (topology.neuron_devices, topology.neuron_cores, topology.gpus) == (devices, cores, gpus)


def test_pods_are_placed_by_instance_type_and_tolerate_each_taint_exactly_in_order():
    taints = (Taint("aws.amazon.com/neuron", "true", "NoSchedule"), Taint("team", "a", "NoExecute"))
    topology = NodeGroupTopology("trn1.32xlarge", 2, 2, 8, taints)
    assert topology.pod_placement() == {
        "nodeSelector": {"node.kubernetes.io/instance-type": "trn1.32xlarge"},
        "tolerations": [
            {"key": "aws.amazon.com/neuron", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
            {"key": "team", "operator": "Equal", "value": "a", "effect": "NoExecute"},
        ],
    }
    assert CPU.pod_placement() == {"nodeSelector": {"node.kubernetes.io/instance-type": "m5.xlarge"}, "tolerations": []}


def test_each_placement_is_a_new_dict_that_callers_may_change():
    placement = TRN1.pod_placement()
    placement["nodeSelector"]["extra"] = "x"
    placement["tolerations"].clear()
    assert TRN1.pod_placement()["nodeSelector"] == {"node.kubernetes.io/instance-type": "trn1.32xlarge"}
    assert len(TRN1.pod_placement()["tolerations"]) == 1


def test_defaults_and_value_semantics():
    topology = NodeGroupTopology("m5.xlarge", 1, 3, 0)
    assert (topology.taints, topology.shared_claims) == ((), frozenset())
    assert (
        topology == NodeGroupTopology("m5.xlarge", 1, 3, 0)
        and len({topology, NodeGroupTopology("m5.xlarge", 1, 3, 0)}) == 1
    )
    assert topology != dataclasses.replace(topology, shared_claims=frozenset({"efs-sc-claim"}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        topology.node_count = 2


def test_an_instance_type_the_catalog_lacks_is_refused_when_its_facts_are_read():
    topology = NodeGroupTopology("x9.huge", 1, 1, 0)
    assert topology.pod_placement()["nodeSelector"] == {"node.kubernetes.io/instance-type": "x9.huge"}
    with pytest.raises(KeyError, match="unknown instance type; supported: .*trn1.32xlarge"):
        _ = topology.neuron_cores
