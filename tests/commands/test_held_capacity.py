"""cost --held: what a cluster's nodes bill for while no training runs on them, from kubectl's JSON."""

import json
from datetime import datetime, timezone

import pytest

from trainium_eks.commands import cost
from trainium_eks.commands.held_capacity import HeldCapacityError, held_report
from trainium_eks.facts.pricing import hourly_price

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=timezone.utc)
TRN1 = hourly_price("trn1.32xlarge", "us-west-2")


def node(name, instance_type, accelerated, created="2026-12-05T10:00:00Z"):
    allocatable = {"cpu": "128", "aws.amazon.com/neuron": "16" if accelerated else "0"}
    labels = {"node.kubernetes.io/instance-type": instance_type, "topology.kubernetes.io/region": "us-west-2"}
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "creationTimestamp": created},
        "status": {"allocatable": allocatable},
    }


def pod(name, node_name=None, labels=None, phase="Running", scheduled=None, reason=None, owner=None, finished=None):
    conditions = []
    if scheduled:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled})
    if reason:
        conditions.append(
            {"type": "PodScheduled", "status": "False", "reason": reason, "lastTransitionTime": "2026-12-05T11:56:00Z"}
        )
    status = {"phase": phase, "conditions": conditions}
    if finished:
        status["containerStatuses"] = [{"state": {"terminated": {"finishedAt": finished}}}]
    metadata = {"name": name, "labels": labels or {}, "creationTimestamp": "2026-12-05T11:20:00Z"}
    if owner:
        metadata["ownerReferences"] = [{"kind": owner, "name": "x"}]
    return {"kind": "Pod", "metadata": metadata, "spec": {"nodeName": node_name} if node_name else {}, "status": status}


CLUSTER = {
    "kind": "List",
    "items": [
        node("system-1", "m6i.large", False),
        node("trn1-a", "trn1.32xlarge", True),
        node("trn1-b", "trn1.32xlarge", True),
        node("trn1-c", "trn1.32xlarge", True),
        pod("coredns", "system-1"),
        pod("hold-0", "trn1-a", {"trainium-eks/capacity-for": "train-1"}, scheduled="2026-12-05T11:30:00Z"),
        pod("hold-1", None, {"trainium-eks/capacity-for": "train-1"}, phase="Pending"),
        pod("efa-plugin", "trn1-b", owner="DaemonSet"),
        pod("old-gang-0", "trn1-b", phase="Succeeded", finished="2026-12-05T11:50:00Z"),
        pod("bert-0", None, {"volcano.sh/job-name": "bert-2"}, phase="Pending", reason="Schedulable"),
        pod("worker-0", "trn1-c", {"volcano.sh/job-name": "other"}),
    ],
}


def test_nodes_held_for_a_gang_a_stalled_gang_and_idle_nodes_are_priced():
    report = held_report(CLUSTER, NOW)
    assert "gang train-1: its release holds 1 nodes with 1 of 2 capacity pods placed (since 40 min)" in report
    assert f"1 x node, {TRN1:,.2f} USD/hour, {TRN1 / 2:,.2f} USD so far" in report, "held from 11:30, bound"
    assert "gang bert-2: 1 pods placed but not started (Schedulable: the gang does not fit whole) for 4 min" in report
    assert "    trn1-b (trn1.32xlarge), empty for 10 min" in report, "since its last pod ended, DaemonSets aside"
    assert "trn1-c" not in report and "system-1" not in report, "a node that trains; a node of no training type"
    assert report.endswith(f"total: {2 * TRN1:,.2f} USD/hour")


def test_a_node_two_capacity_pods_share_counts_once():
    shared = {
        "kind": "List",
        "items": [
            node("cpu-1", "trn1.32xlarge", True),
            pod("hold-0", "cpu-1", {"trainium-eks/capacity-for": "cifar"}, scheduled="2026-12-05T11:30:00Z"),
            pod("hold-1", "cpu-1", {"trainium-eks/capacity-for": "cifar"}, scheduled="2026-12-05T11:45:00Z"),
        ],
    }
    report = held_report(shared, NOW)
    assert "holds 1 nodes with 2 of 2 capacity pods placed" in report and report.count("    cpu-1 (") == 1
    assert f"{TRN1 / 2:,.2f} USD so far" in report, "from the first pod bound to it"


def test_a_cluster_that_trains_everywhere_holds_nothing():
    busy = {"kind": "List", "items": [node("trn1-c", "trn1.32xlarge", True), pod("w", "trn1-c")]}
    assert held_report(busy, NOW).endswith("nothing: every training node runs a pod, and no gang waits for nodes")


def test_a_node_without_a_price_says_so():
    unknown = {"kind": "List", "items": [node("x", "trn9.large", True)]}
    assert "1 x node, n/a USD/hour" in held_report(unknown, NOW) and "(and nodes without a price)" in held_report(
        unknown, NOW
    )


@pytest.mark.parametrize("document", [[], {"items": "x"}, {"kind": "List", "items": [{"kind": "Deployment"}]}])
def test_anything_but_nodes_and_pods_is_refused_with_the_command_that_gives_them(document):
    with pytest.raises(HeldCapacityError, match="kubectl get nodes,pods -A -o json"):
        held_report(document, NOW)


def test_the_cost_command_prints_the_report_without_building_the_stacks(tmp_path, capsys):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(CLUSTER))
    assert cost.main(["--held", str(path), "--at", "2026-12-05T12:00:00Z", "--project", str(tmp_path)]) == 0
    assert "gang train-1" in capsys.readouterr().out
    path.write_text(json.dumps({"kind": "List", "items": []}))
    assert cost.main(["--held", str(path)]) == 2
    assert "nodes and pods" in capsys.readouterr().err
