"""GangCapacity: a job chart's capacity settings, written as the annotations its release reads."""

import dataclasses

import pytest

from trainium_eks.core.conventions import Taint
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.jobs.gang_capacity import GangCapacity
from trainium_eks.manifests.jobs.job_release_program import (
    CAPACITY_SETTINGS,
    NODE_POOL_ANNOTATION,
    capacity_settings,
)
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.train_job import TrainJobChart
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart

TRN1 = NodeGroupTopology(
    "trn1.32xlarge", 2, 4, 8, (Taint("aws.amazon.com/neuron", "true", "NoSchedule"),), frozenset({"fsx-claim"})
)
BASE = dict(name="bert-train", image="example.com/bert:1", node_group=TRN1, script="/opt/bert/pretrain_bert.py")


def test_the_defaults_are_the_release_programs_and_write_nothing():
    assert GangCapacity().annotations() == {}
    defaults = {setting: default for setting, (_, default) in CAPACITY_SETTINGS.items()}
    chart = VolcanoJobChart(**BASE)
    assert capacity_settings(chart.manifest) == defaults
    assert chart.job_name == VolcanoJobChart(**BASE, capacity=GangCapacity()).job_name, "a job keeps its name"


def test_a_gangs_settings_reach_its_release_and_its_fabric_check_and_rename_both():
    capacity = GangCapacity(
        timeout_seconds=3600, attempts=5, pause_seconds=120, stall_seconds=900, restarts=1, queue_seconds=7200
    )
    chart = VolcanoJobChart(**BASE, capacity=capacity)
    expected = {"timeout": 3600, "attempts": 5, "pause": 120, "stall": 900, "restarts": 1, "queue": 7200}
    assert capacity_settings(chart.manifest) == expected
    assert capacity_settings(chart.fabric_check.manifest) == expected
    default = VolcanoJobChart(**BASE)
    assert chart.job_name != default.job_name and chart.fabric_check.job_name != default.fabric_check.job_name
    annotations = chart.manifest["metadata"]["annotations"]
    assert annotations["trainium-eks/capacity-attempts"] == "5" and "trainium-eks/capacity-restarts" in annotations


def test_a_gang_on_a_karpenter_pool_names_its_pool_for_its_release():
    pooled = dataclasses.replace(TRN1, launched_for_pods=True, node_pool="trn-a1b2c3d4")
    chart = VolcanoJobChart(**{**BASE, "node_group": pooled})
    assert chart.manifest["metadata"]["annotations"][NODE_POOL_ANNOTATION] == "trn-a1b2c3d4"
    assert chart.fabric_check.manifest["metadata"]["annotations"][NODE_POOL_ANNOTATION] == "trn-a1b2c3d4"
    assert NODE_POOL_ANNOTATION not in VolcanoJobChart(**BASE).manifest["metadata"]["annotations"], "a node group"


def test_a_job_of_one_pod_holds_no_nodes_first_and_carries_no_settings():
    one = TrainJobChart(**{**BASE, "nodes": 1}, capacity=GangCapacity(attempts=5))
    assert not any(key.startswith("trainium-eks/capacity") for key in one.manifest["metadata"].get("annotations") or {})


@pytest.mark.parametrize(
    "capacity,problem",
    [
        (GangCapacity(timeout_seconds=59), "capacity.timeout_seconds=59"),
        (GangCapacity(attempts=0), "capacity.attempts=0"),
        (GangCapacity(pause_seconds=6 * 3600 + 1), "capacity.pause_seconds=21601"),
        (GangCapacity(stall_seconds=1.5), "capacity.stall_seconds=1.5"),
        (GangCapacity(restarts=11), "capacity.restarts=11"),
        (GangCapacity(queue_seconds=30 * 24 * 3600 + 1), "capacity.queue_seconds=2592001"),
        ({"attempts": 5}, "a GangCapacity"),
    ],
)
def test_a_setting_out_of_range_is_refused_by_name(capacity, problem):
    with pytest.raises(ConfigurationError) as raised:
        VolcanoJobChart(**BASE, capacity=capacity)
    assert any(problem in found for found in raised.value.problems), raised.value.problems
