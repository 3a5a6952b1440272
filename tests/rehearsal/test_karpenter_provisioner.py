"""Karpenter in the scheduling rehearsal: training nodes launched from zero for pending pods, removed once empty,
and what Volcano's pod conditions do to it (kubernetes-sigs/karpenter v1.14.1, volcano-sh/volcano v1.15.1)."""

import json
from typing import Any, Callable, Dict, List, Optional, Sequence

import pytest
import yaml

from rehearsal import karpenter_provisioner
from rehearsal.container_programs import Programs
from rehearsal.karpenter_provisioner import (
    NODE_LAUNCH_TICKS,
    UNAVAILABLE_OFFERING_TICKS,
    CapacityShortfall,
    duration_ticks,
    karpenter_nodes,
)
from rehearsal.scheduling_run import broken, rehearse_jobs, run_jobs, stack_scheduling, step
from rehearsal.simulated_cluster import (
    DEFAULT_VOLCANO_ACTIONS,
    SimulatedCluster,
    node_pool_objects_of,
    volcano_actions_of,
)
from trainium_eks.core.conventions import Taint
from trainium_eks.facts.catalog import instance_facts
from trainium_eks.manifests.addons.efa_device_plugin import EfaDevicePluginChart
from trainium_eks.manifests.addons.karpenter_node_pool import KarpenterNodePoolChart
from trainium_eks.manifests.addons.neuron_device_plugin import NeuronDevicePluginChart
from trainium_eks.manifests.addons.volcano_queue import VolcanoQueueChart
from trainium_eks.manifests.jobs.dataset_staging import DatasetStagingChart
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart

ALLOCATE_BACKFILL = ("allocate", "backfill")
"""The actions of a Volcano scheduler configured for nodes launched for pending pods (no ``enqueue``)."""

ADDONS = (
    "vpc-cni",
    "kube-proxy",
    "eks-pod-identity-agent",
    "eks-node-monitoring-agent",
    "coredns",
    "aws-fsx-csi-driver",
    "amazon-cloudwatch-observability",
)
NEURON = (Taint("aws.amazon.com/neuron", "true", "NoSchedule"),)
TRN1 = instance_facts("trn1.32xlarge")
TRAINING_NODES = NodeGroupTopology("trn1.32xlarge", 2, 2, 8, NEURON, frozenset({"fsx-claim"}), launched_for_pods=True)
CPU_NODES = NodeGroupTopology("m5.xlarge", 1, 1, 0, (), frozenset({"efs-sc-claim"}), launched_for_pods=True)


def efa_only_interfaces(cards: int) -> List[Dict[str, Any]]:
    """The primary ENA interface and one ``efa-only`` interface per network card (one EFA device per card)."""
    interfaces = [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}]
    for card in range(cards):
        interfaces.append({"networkCardIndex": card, "deviceIndex": 1 if card == 0 else 0, "interfaceType": "efa-only"})
    return interfaces


def trn1_pool(*, max_nodes: int = 2, idle_after: int = 600, name: str = "trn1") -> List[Dict[str, Any]]:
    """The EC2NodeClass and NodePool of on-demand trn1.32xlarge training nodes, as the library emits them."""
    return KarpenterNodePoolChart(
        name=name,
        instance=TRN1,
        availability_zone_id="usw2-az4",
        subnet_id="subnet-0123",
        security_group_ids=["sg-0123"],
        node_role_name="nodes",
        max_nodes=max_nodes,
        idle_after=idle_after,
        root_volume_gib=500,
        labels={
            "trainium-eks/accelerator": "neuron",
            "vpc.amazonaws.com/efa.present": "true",
            "aws.amazon.com/neuron.present": "true",
        },
        taints=NEURON,
        network_interfaces=efa_only_interfaces(TRN1.network_cards),
    ).to_json()


def cpu_pool() -> List[Dict[str, Any]]:
    """The objects of on-demand m5.xlarge nodes (no EFA, no taint)."""
    return KarpenterNodePoolChart(
        name="cpu",
        instance=instance_facts("m5.xlarge"),
        availability_zone_id="usw2-az4",
        subnet_id="subnet-0123",
        security_group_ids=["sg-0123"],
        node_role_name="nodes",
        max_nodes=1,
        idle_after=600,
        root_volume_gib=100,
        labels={"trainium-eks/accelerator": "none"},
    ).to_json()


def standing() -> List[Dict[str, Any]]:
    """The device plugins of Trainium nodes and the training queue."""
    return (
        NeuronDevicePluginChart().manifests()
        + EfaDevicePluginChart(registry="602401143452.dkr.ecr.us-west-2.amazonaws.com").manifests()
        + VolcanoQueueChart().manifests()
    )


def gang(name: str, **extra: Any) -> Dict[str, Any]:
    """A 2-node trn1.32xlarge Volcano gang of the library (each pod asks for a whole node's devices), without the
    fabric check a job sequence would run first (the gangs arrive here by themselves)."""
    extra.setdefault("fabric_check", False)
    return VolcanoJobChart(name=name, image="i:1", node_group=TRAINING_NODES, script="/t.py", **extra).manifest


TRAIN = f"vcjob/training/{gang('train')['metadata']['name']}"


def staging(node_group: NodeGroupTopology = TRAINING_NODES) -> Dict[str, Any]:
    """A dataset staging Job: one pod of the default scheduler."""
    return DatasetStagingChart(
        name="data", source="s3://bucket/d.tar", directory="d", image="i:1", node_group=node_group
    ).manifest


def run(arrivals: Sequence[Dict[str, Any]], pools: Sequence[Dict[str, Any]], **options: Any):
    options.setdefault("volcano_actions", ALLOCATE_BACKFILL)
    return run_jobs([], standing(), arrivals, node_pools=pools, addons=ADDONS, **options)


def launches(report) -> List[str]:
    return [line for line in report.log if "NodeClaim" in line and "launched for pod" in line]


def failed_launches(report) -> List[str]:
    return [line for line in report.log if "launch failed" in line]


def ticks(
    cluster: SimulatedCluster, programs: Programs, count: int = 30, until: Optional[Callable[[], bool]] = None
) -> None:
    """Run ``count`` ticks of ``cluster``, or until ``until()`` holds (which it must within ``count``)."""
    for _ in range(count):
        step(cluster, programs)
        cluster.tick += 1
        if until is not None and until():
            return
    assert until is None, f"not after {count} ticks: {cluster.log[-5:]}"


def tick_of(line: str) -> int:
    return int(line.split(":", 1)[0].removeprefix("t="))


# --- (a) from zero nodes, in every arrival order ------------------------------------------------------------------


def test_two_node_gangs_run_from_zero_nodes_in_every_order_and_leave_no_node():
    """Without ``enqueue``, each gang's PodGroup goes in queue at once, its pods are created and marked
    Unschedulable, Karpenter launches the two nodes; the second gang finds them warm; both nodes go 10 minutes after
    the last job."""
    reports = rehearse_jobs(
        [],
        standing(),
        [gang("compile", precompile=True), gang("train")],
        volcano_actions=ALLOCATE_BACKFILL,
        node_pools=trn1_pool(),
        addons=ADDONS,
    )
    assert len(reports) == 4, "two orders, with and without a failed first attempt each"
    assert broken(reports) == {}
    for report in reports:
        assert set(report.jobs.values()) == {"Completed"}, report.jobs
        assert report.peak_nodes == {"trn1": 2}
        assert len(launches(report)) == 2, "launched once, reused by the second gang"
        assert report.nodes_left == ()
        removed = [line for line in report.log if "removed (Karpenter: empty for 10 minutes" in line]
        assert len(removed) == 2
        last_end = max(tick_of(line) for line in report.log if line.endswith("Completed"))
        assert all(tick_of(line) >= last_end + 10 for line in removed), "not before consolidateAfter"


def test_a_node_joins_with_the_pools_labels_and_taints_and_its_device_plugins_make_it_usable():
    cluster = SimulatedCluster(nodes=[], queues={"default": {}}, volcano_actions=ALLOCATE_BACKFILL, addons=ADDONS)
    for manifest in standing() + trn1_pool():
        cluster.create(manifest)
    cluster.create(gang("train"))
    programs = Programs()
    ticks(cluster, programs, until=lambda: bool(karpenter_nodes(cluster)))
    node = karpenter_nodes(cluster)[0]
    assert node.labels["karpenter.sh/nodepool"] == "trn1"
    assert node.labels["node.kubernetes.io/instance-type"] == "trn1.32xlarge"
    assert node.labels["topology.k8s.aws/zone-id"] == "usw2-az4"
    assert node.labels["kubernetes.io/hostname"] == node.name
    assert node.labels["aws.amazon.com/neuron.present"] == "true"
    assert node.taints == [{"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}]
    assert "aws.amazon.com/neuron" not in node.allocatable, "no device before its plugin runs"
    ticks(cluster, programs, 2)
    assert node.allocatable["aws.amazon.com/neuron"] == 16 and node.allocatable["vpc.amazonaws.com/efa"] == 8
    assert node.initialized is not None


def test_a_pool_whose_node_class_says_nothing_of_interfaces_offers_the_types_efa_maximum():
    pool = trn1_pool()
    del pool[0]["spec"]["networkInterfaces"]
    report = run([gang("train")], pool)
    assert report.jobs == {TRAIN: "Completed"}, report.violations


def test_efa_only_interfaces_count_as_the_nodes_efa_devices():
    """Four ``efa-only`` entries give four EFA devices: the gang asks for eight, so no node of the pool can hold it."""
    pool = trn1_pool()
    pool[0]["spec"]["networkInterfaces"] = efa_only_interfaces(4)
    report = run([gang("train")], pool)
    assert not launches(report)
    assert any("can never be placed" in v and "vpc.amazonaws.com/efa: requests 8" in v for v in report.violations)


# --- (b) the chart's default actions --------------------------------------------------------------------------------


def test_with_the_enqueue_action_no_pod_is_ever_created_so_no_node_is_ever_launched():
    """The defect the library's Volcano configuration fixes: overcommit and proportion keep the PodGroup Pending on a
    cluster with no Neuron capacity, the vcjob controller waits for it to leave Pending, and Karpenter sees no pod."""
    report = run([gang("train")], trn1_pool(), volcano_actions=DEFAULT_VOLCANO_ACTIONS)
    assert not launches(report) and report.peak_nodes == {"trn1": 0}
    assert report.jobs == {TRAIN: "Pending"}
    assert not any("pod train-" in line for line in report.log), "no pod"
    assert any("never enqueued" in v for v in report.violations), report.violations
    assert any("a wait that never ends" in v for v in report.violations)


# --- (c), (d) capacity shortfalls -----------------------------------------------------------------------------------


def test_a_launch_that_fails_once_for_capacity_is_retried_and_the_gang_completes():
    report = run([gang("train")], trn1_pool(), shortfalls={"trn1": CapacityShortfall(1, failures=1)})
    assert report.jobs == {TRAIN: "Completed"}, report.violations
    assert report.violations == ()
    (failed,) = failed_launches(report)
    first, retry = launches(report)
    assert tick_of(retry) == tick_of(failed) + UNAVAILABLE_OFFERING_TICKS, "after the offering is available again"
    assert tick_of(retry) < tick_of(first) + NODE_LAUNCH_TICKS, "before the first node joined"
    assert report.peak_nodes == {"trn1": 2} and report.nodes_left == ()


def test_a_permanent_shortfall_leaves_the_gang_waiting_for_ever_on_one_nominated_node():
    """Only one instance can ever launch. Its node joins; Volcano places one pod of the gang on it, cannot place the
    other, discards the placement and marks the placed pod Schedulable (ignored by Karpenter) and the other
    Unschedulable. Karpenter simulates that one onto the lone node, which is empty in its view: it launches nothing
    more, and the node, *nominated* for a pending pod at every pass, is never consolidated. Not a loop of launches and
    removals but a standing deadlock that bills one trn1.32xlarge until someone deletes the job; it would outlast the
    shortfall, since the pending pod fits the node it counts on."""
    report = run([gang("train")], trn1_pool(), shortfalls={"trn1": CapacityShortfall(1)})
    assert report.jobs[TRAIN] != "Completed"
    (waiting,) = [v for v in report.violations if "never finished" in v]
    assert "(volcano, Schedulable)" in waiting and "(volcano, Unschedulable)" in waiting, waiting
    assert "Karpenter counts the Unschedulable pods on empty trn1-" in waiting
    assert any("a wait that never ends" in v for v in report.violations)
    assert len(karpenter_nodes_left(report)) == 1
    assert 1 <= len(failed_launches(report)) <= 3, "the retries stop once the lone node is usable"
    assert not any("removed" in line for line in report.log)


def karpenter_nodes_left(report) -> List[str]:
    return [name for name in report.nodes_left if name.startswith("trn1-")]


def test_a_retry_that_comes_after_the_first_node_is_usable_never_comes(monkeypatch):
    """The same deadlock from a shortfall of one launch, when a node joins and registers its devices before the
    failed offering is tried again: the gang's placed pod is Schedulable, the other fits the joined node in
    Karpenter's view, and the second node is never launched (volcano-sh/volcano#3976)."""
    monkeypatch.setattr(karpenter_provisioner, "NODE_LAUNCH_TICKS", 1)
    report = run([gang("train")], trn1_pool(), shortfalls={"trn1": CapacityShortfall(1, failures=1)})
    assert report.jobs[TRAIN] != "Completed"
    assert len(failed_launches(report)) == 1 and len(launches(report)) == 1


def test_a_warm_node_left_by_a_one_pod_job_deadlocks_the_two_node_gang_that_follows():
    """A staging Job on the training pool leaves one warm node; a 2-node gang created after it ended gets one pod
    placed (then discarded: Schedulable) and the other Unschedulable, which fits the warm node in Karpenter's view:
    no second node is ever launched."""
    cluster = SimulatedCluster(nodes=[], queues={"default": {}}, volcano_actions=ALLOCATE_BACKFILL, addons=ADDONS)
    for manifest in standing() + trn1_pool():
        cluster.create(manifest)
    data = cluster.create(staging())
    programs = Programs()
    ticks(cluster, programs, until=lambda: data.finished)
    assert data.state == "Complete" and len(karpenter_nodes(cluster)) == 1
    train = cluster.create(gang("train"))
    ticks(cluster, programs, 60)
    assert train.state != "Completed"
    (node,) = karpenter_nodes(cluster)
    assert node.nominated == cluster.tick - 1, "a pending pod counts on it"
    assert sorted(p.scheduled_reason for p in cluster.pods_of(train.ref)) == ["Schedulable", "Unschedulable"]
    assert not cluster.node_claims


# --- (e) limits -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2])
def test_a_pool_never_has_more_nodes_than_limits_nodes(limit):
    reports = rehearse_jobs(
        [],
        standing(),
        [gang("compile", precompile=True), gang("train")],
        volcano_actions=ALLOCATE_BACKFILL,
        node_pools=trn1_pool(max_nodes=limit),
        addons=ADDONS,
    )
    for report in reports:
        assert report.peak_nodes == {"trn1": limit}
        if limit == 1:
            assert not any(state == "Completed" for state in report.jobs.values()), "a 2-node gang on 1 node"
        else:
            assert report.violations == ()


def test_a_pools_cpu_limit_counts_the_vcpus_of_its_nodes():
    pool = trn1_pool(max_nodes=4)
    pool[1]["spec"]["limits"] = {"nodes": "4", "cpu": "128"}
    report = run([gang("train")], pool)
    assert report.peak_nodes == {"trn1": 1}


# --- (f) consolidation never takes a busy node ------------------------------------------------------------------------


def test_a_node_running_a_pod_is_never_consolidated():
    """A service pinned to the pool runs for ever; with ``consolidateAfter`` of one minute its node stays."""
    pool = trn1_pool(idle_after=60)
    service = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "sidecar", "namespace": "training"},
        "spec": {
            "replicas": 1,
            "template": {
                "spec": {
                    **TRAINING_NODES.pod_placement(),
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                }
            },
        },
    }
    cluster = SimulatedCluster(nodes=[], queues={"default": {}}, volcano_actions=ALLOCATE_BACKFILL, addons=ADDONS)
    for manifest in standing() + pool + [service]:
        cluster.create(manifest)
    programs = Programs()
    for _ in range(120):
        step(cluster, programs)
        cluster.tick += 1
        names = {node.name for node in cluster.nodes}
        assert all(pod.node in names for pod in cluster.pods if pod.node and not pod.finished)
    (node,) = karpenter_nodes(cluster)
    assert node.workload_pods and not any("removed" in line for line in cluster.log)


def test_with_a_one_minute_idle_timeout_nodes_go_only_after_the_jobs_pods_have_ended():
    reports = rehearse_jobs(
        [],
        standing(),
        [gang("compile", precompile=True), gang("train")],
        volcano_actions=ALLOCATE_BACKFILL,
        node_pools=trn1_pool(idle_after=60),
        addons=ADDONS,
    )
    assert broken(reports) == {}
    for report in reports:
        assert set(report.jobs.values()) == {"Completed"}
        assert report.nodes_left == ()


def test_a_pool_that_never_consolidates_leaves_its_nodes_after_the_jobs():
    pool = trn1_pool()
    pool[1]["spec"]["disruption"]["consolidateAfter"] = "Never"
    report = run([gang("train")], pool)
    assert report.jobs == {TRAIN: "Completed"}
    (left,) = [v for v in report.violations if v.startswith("Karpenter nodes left running after the jobs: ")]
    assert left.count("NodePool trn1") == 2 and "empty since" in left


# --- (g) the default scheduler ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("actions", [DEFAULT_VOLCANO_ACTIONS, ALLOCATE_BACKFILL])
def test_a_staging_job_of_the_default_scheduler_gets_a_cpu_node_and_completes(actions):
    """kube-scheduler marks the pod Unschedulable whatever Volcano's actions; Karpenter launches one m5.xlarge."""
    report = run([staging(CPU_NODES)], cpu_pool(), volcano_actions=actions)
    assert list(report.jobs.values()) == ["Complete"]
    assert report.violations == ()
    (launch,) = launches(report)
    assert "NodePool cpu" in launch and "for pod data-" in launch
    assert report.nodes_left == ()


def test_a_pod_no_pool_accepts_launches_nothing_and_can_never_be_placed():
    report = run([staging(CPU_NODES)], trn1_pool())
    assert not launches(report)
    assert any("can never be placed" in v for v in report.violations)


def test_a_pool_without_its_node_class_launches_nothing():
    report = run([gang("train")], [obj for obj in trn1_pool() if obj["kind"] == "NodePool"])
    assert not launches(report)
    assert any("can never be placed" in v and "no node" in v for v in report.violations)


# --- reading a stack's template ---------------------------------------------------------------------------------------


def volcano_release(values: Optional[Any]) -> Dict[str, Any]:
    props: Dict[str, Any] = {"Release": "volcano", "Chart": "volcano", "Namespace": "volcano-system"}
    if values is not None:
        props["Values"] = values
    return {"Type": "Custom::AWSCDK-EKS-HelmChart", "Properties": props}


SCHEDULER_CONF = yaml.safe_dump(
    {"actions": "allocate, backfill", "tiers": [{"plugins": [{"name": "gang"}]}, {"plugins": [{"name": "drf"}]}]}
)


@pytest.mark.parametrize(
    "resources,expected",
    [
        ({}, DEFAULT_VOLCANO_ACTIONS),
        ({"Volcano": volcano_release(None)}, DEFAULT_VOLCANO_ACTIONS),
        ({"Volcano": volcano_release(json.dumps({"custom": {"default_ns": {}}}))}, DEFAULT_VOLCANO_ACTIONS),
        (
            {"Volcano": volcano_release(json.dumps({"custom": {"scheduler_config_override": SCHEDULER_CONF}}))},
            ALLOCATE_BACKFILL,
        ),
        (
            {
                "Volcano": volcano_release(
                    {
                        "Fn::Join": [
                            "",
                            [
                                '{"custom":{"image":"',
                                {"Ref": "AWS::Region"},
                                '","scheduler_config_override":' + json.dumps(SCHEDULER_CONF) + "}}",
                            ],
                        ]
                    }
                ),
                "Other": {
                    "Type": "Custom::AWSCDK-EKS-HelmChart",
                    "Properties": {"Release": "kubeflow-trainer", "Values": "{}"},
                },
            },
            ALLOCATE_BACKFILL,
        ),
    ],
)
def test_the_volcano_actions_come_from_the_releases_scheduler_config_override(resources, expected):
    assert volcano_actions_of({"Resources": resources}) == expected


def test_the_node_pools_and_the_add_ons_come_from_the_template():
    objects = trn1_pool()
    text = json.dumps(objects)
    before, after = text.split("subnet-0123")
    template = {
        "Resources": {
            "Pool": {
                "Type": "Custom::AWSCDK-EKS-KubernetesResource",
                "Properties": {"Manifest": {"Fn::Join": ["", [before, {"Ref": "Subnet"}, after]]}},
            },
            "Other": {
                "Type": "Custom::AWSCDK-EKS-KubernetesResource",
                "Properties": {"Manifest": json.dumps(VolcanoQueueChart().manifests())},
            },
            "Cni": {"Type": "AWS::EKS::Addon", "Properties": {"AddonName": "vpc-cni"}},
            "Volcano": volcano_release(json.dumps({"custom": {"scheduler_config_override": SCHEDULER_CONF}})),
        }
    }
    assert [o["kind"] for o in node_pool_objects_of(template)] == ["EC2NodeClass", "NodePool"]
    scheduling = stack_scheduling(template)
    assert scheduling.volcano_actions == ALLOCATE_BACKFILL and scheduling.addons == ("vpc-cni",)
    assert scheduling.node_pools[0]["spec"]["subnetSelectorTerms"] == [{"id": "cfn-token"}]


@pytest.mark.parametrize("text,ticks", [("10m", 10), ("90s", 2), ("1h30m", 90), ("0s", 0), ("Never", None)])
def test_karpenter_durations_in_minutes(text, ticks):
    assert duration_ticks(text) == ticks


def test_a_duration_karpenter_would_refuse_is_an_error():
    with pytest.raises(ValueError, match="not a Karpenter duration"):
        duration_ticks("10 minutes")
