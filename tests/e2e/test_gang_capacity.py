"""Every held gang gets all its nodes, on the real components: when EC2 refuses part of a gang's launches, the
release's capacity Jobs keep the nodes that came and wait while Karpenter retries the rest, and the gang runs on
exactly the nodes it needs (the warm node of another gang size: KubeflowTraining's seed jobs in test_lifecycle.py)."""

from __future__ import annotations

import json

import app as default_app
from e2e.components import ComponentRunner
from e2e.deploy import LiveStack, applied_objects
from e2e.karpenter_kwok import LAUNCH_FAILURES_FILE
from e2e.seed_runs import SEED_RUN_MINUTES, seed_jobs, wait_for_jobs
from rehearsal.scenarios import DEFAULT, TRAINIUM_EKS, default_app_source
from tests.support.apps import new_app


def test_a_gang_whose_second_node_ec2_refuses_twice_runs_once_karpenter_gets_it(cluster, binaries, tools):
    """TrainiumEks: the first trn1.32xlarge launches, the next two launches fail with insufficient capacity (the
    first node is up and registered meanwhile, the case where a gang created at once deadlocks), the third
    succeeds; every seed job completes, on the two nodes of the pool and no more."""
    (cluster.workdir / LAUNCH_FAILURES_FILE).write_text(json.dumps({"trn1.32xlarge": {"after": 1, "count": 2}}))
    template, region = default_app_source(new_app, default_app.build_app, TRAINIUM_EKS)(DEFAULT)
    with ComponentRunner(cluster, binaries) as runner, LiveStack(cluster, TRAINIUM_EKS, region, tools) as live:
        deployed = live.deploy(template)
        assert not deployed.failures, f"{deployed.describe_failures()}\n{runner.describe()}\n{cluster.describe()}"
        states = wait_for_jobs(
            cluster.api,
            seed_jobs(applied_objects(live)),
            timeout=SEED_RUN_MINUTES * 60,
            check=runner.check,
            describe=lambda: f"{runner.describe()}\n{cluster.describe()}",
        )
        assert set(states.values()) == {"done"}, states
        refused = [e for e in cluster.api.list("v1", "Event") if e.get("reason") == "InsufficientCapacityError"]
        assert len(refused) == 2, "Karpenter saw both refused launches (each a NodeClaim it then deleted)"
        trn1 = cluster.api.list("v1", "Node", selector="node.kubernetes.io/instance-type=trn1.32xlarge")
        assert len(trn1) == 2, [node["metadata"]["name"] for node in trn1]
        held = [e for e in cluster.api.list("v1", "Event", namespace="training") if e.get("reason") == "CapacityHeld"]
        assert len(held) == 4, "each gang (two fabric checks, pre-compilation, training) held its nodes first"
