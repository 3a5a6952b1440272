"""What the cluster records of nodes removed, as ``status`` reads it: Karpenter's log lines as the real controller
writes them (fields as in the log of ``tests/e2e/test_node_loss.py``'s run)."""

import json

from trainium_eks.commands import node_events

REPAIR = {
    "level": "INFO",
    "time": "2026-12-06T13:08:48.210Z",
    "logger": "controller",
    "message": "deleting unhealthy node",
    "controller": "node.health",
    "controllerKind": "Node",
    "Node": {"name": "kwok-acceleratednodes-faa3434d-8tbxd"},
    "namespace": "",
    "name": "kwok-acceleratednodes-faa3434d-8tbxd",
    "NodeClaim": {"name": "acceleratednodes-faa3434d-8tbxd"},
}


def test_a_repair_names_its_node_its_nodeclaim_and_why():
    assert node_events.karpenter_removals(json.dumps(REPAIR)) == [
        "2026-12-06T13:08:48.210Z  node kwok-acceleratednodes-faa3434d-8tbxd, nodeclaim "
        "acceleratednodes-faa3434d-8tbxd  node repair: a condition unhealthy past the provider's toleration"
    ]


def test_other_lines_and_lines_that_are_not_json_objects_are_left_out():
    lines = [
        json.dumps({**REPAIR, "message": "found provisionable pod(s)"}),
        "I1206 13:08:48.210 klog line",
        "[pod/karpenter-1/controller] [1, 2]",
        "{broken",
        "",
    ]
    assert node_events.karpenter_removals("\n".join(lines)) == []


def test_the_log_is_read_where_the_stacks_karpenter_runs():
    from trainium_eks.constructs.karpenter_controller import KARPENTER_NAMESPACE

    assert node_events.KARPENTER_PODS == (KARPENTER_NAMESPACE, "app.kubernetes.io/name=karpenter")
