"""Every held gang gets all its nodes, on the real components: when EC2 refuses part of a gang's launches, the
release's capacity Jobs keep the nodes that came and wait while Karpenter retries the rest, and the gang runs on
exactly the nodes it needs (the warm node of another gang size: KubeflowTraining's seed jobs in test_lifecycle.py);
when other pods hold the pool's nodes up to its limit, a gang waits for them without holding any node and without
using up its attempts, and runs once they are free."""

from __future__ import annotations

import json

import app as default_app
from e2e.api import Api
from e2e.components import ComponentRunner
from e2e.deploy import LiveStack, applied_objects
from e2e.karpenter_kwok import LAUNCH_FAILURES_FILE
from e2e.processes import wait_for
from e2e.seed_runs import SEED_RUN_MINUTES, seed_jobs, wait_for_jobs
from rehearsal.scenarios import DEFAULT, TRAINIUM_EKS, default_app_source
from tests.support.apps import new_app
from tests.support.manifests import held_job
from trainium_eks.core.conventions import FABRIC_CHECK_LABEL, HELD_JOB_LABEL
from trainium_eks.manifests.jobs.gang_capacity import GangCapacity
from trainium_eks.manifests.jobs.job_release import release_job
from trainium_eks.manifests.jobs.job_release_program import gang_pods, pod_requests

NAMESPACE = "training"


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
        describe = lambda: f"{runner.describe()}\n{cluster.describe()}"  # noqa: E731
        _a_gang_beyond_the_pools_limit_waits_for_its_nodes(cluster.api, applied_objects(live), runner.check, describe)


def _a_gang_beyond_the_pools_limit_waits_for_its_nodes(api: Api, applied, check, describe):
    """The pool's two nodes held by a Deployment of the gang's pod shape (the trn1 pool's limit is its node count),
    a gang of two is released with one attempt of 60 s and pauses of 30 s: Karpenter says the NodePool's limit is
    exhausted, the release gives back what it holds and waits, attempt after attempt, past the attempt's timeout
    (which failed the release before); once the Deployment is gone, the gang gets both nodes and completes."""
    held = [held_job(o) for o in applied if o["kind"] == "Job" and HELD_JOB_LABEL in o["metadata"].get("labels", {})]
    training = [
        job
        for job in held
        if job["apiVersion"].startswith("batch.volcano.sh/")
        and gang_pods(job)
        and FABRIC_CHECK_LABEL not in (job["metadata"].get("labels") or {})
    ]
    gang = json.loads(json.dumps(training[-1]))
    ((count, pod),) = gang_pods(gang)
    assert count == 2
    requests = {key: str(int(value)) for key, value in pod_requests(pod).items() if "/" in key}
    occupant = {"name": "occupant", "image": "busybox", "resources": {"requests": requests, "limits": requests}}
    placement = {key: pod[key] for key in ("nodeSelector", "tolerations", "affinity") if pod.get(key)}
    api.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "occupant", "namespace": NAMESPACE},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "occupant"}},
                "template": {
                    "metadata": {"labels": {"app": "occupant"}},
                    "spec": {**placement, "containers": [occupant]},
                },
            },
        }
    )

    def occupied():
        pods = api.list("v1", "Pod", NAMESPACE, selector="app=occupant")
        return len([p for p in pods if p["spec"].get("nodeName")]) == 2

    wait_for("the pool's nodes occupied", occupied, timeout=600, check=check, describe=describe)
    settings = GangCapacity(timeout_seconds=60, attempts=1, pause_seconds=30)
    gang["metadata"] = {
        "name": "beyond-limit",
        "namespace": NAMESPACE,
        "annotations": {**gang["metadata"]["annotations"], **settings.annotations()},
        "labels": gang["metadata"].get("labels") or {},
    }
    release = release_job(
        NAMESPACE, held_name="beyond-limit", held_text=json.dumps(gang), wait_for=[], timeout_seconds=3600
    )
    api.create(release)

    def reasons():
        events = api.list("v1", "Event", NAMESPACE)
        return [e["reason"] for e in events if e["involvedObject"]["name"] == "beyond-limit-release"]

    wait_for(
        "three rounds of waiting for the pool", lambda: reasons().count("CapacityQueued") >= 3, timeout=600, check=check
    )
    assert "CapacityNotHeld" not in reasons(), reasons()
    assert not (api.get("batch/v1", "Job", "beyond-limit-release", NAMESPACE)["status"].get("failed")), reasons()
    api.delete("apps/v1", "Deployment", "occupant", NAMESPACE)
    ref = (NAMESPACE, "vcjob/beyond-limit")
    states = wait_for_jobs(api, [ref], timeout=900, check=check, describe=describe)
    assert states == {ref: "done"}, (states, reasons())
    assert reasons().count("CapacityHeld") == 1, reasons()
