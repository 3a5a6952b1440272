"""A node that fails in the middle of a run, on the real components: its kubelet stops being ready, and
Karpenter's node repair (on in the library's ``KarpenterController``: the chart's ``settings.featureGates.nodeRepair``)
deletes its NodeClaim once the condition has lasted the cloud provider's toleration, and the node goes with its
instance, as when its interruption controller deletes a NodeClaim because EC2 says an instance is going (a Spot
interruption, a scheduled stop or retirement) or a user does. The gang that ran there restarts as a whole and
finishes on a replacement node.

The node says it has been failing for the toleration already (kwok reports ``Ready`` False from the time
:data:`~e2e.kwok_stages.NOT_READY_SINCE` gives): the kwok provider's toleration is 10 minutes, the AWS provider's
30 (10 for ``AcceleratedHardwareReady``), and what is tested is what the real controller does once it has passed.
Its pods stop too (kwok moves none of them on, as a stopped kubelet reports nothing). The kwok provider finds the
instance of a node being deleted gone at once, and Karpenter removes a node that is not ready and whose instance is
gone without draining it (kubernetes-sigs/karpenter v1.14.1 ``pkg/controllers/node/termination/controller.go``); the
pod garbage collector fails and deletes its pods 40 to 80 s later (kubernetes v1.36.3 ``pkg/controller/podgc/``
``gc_controller.go``: orphaned pods after a 40 s quarantine, every 20 s), and Volcano restarts the gang. On AWS that
is the path when the instance is already gone; while it runs, Karpenter first deletes the pods (the repair's
termination deadline is the moment it acts: a second's grace) and terminates it, which this test does not cover.

Without its release's watch it would wait for ever: Volcano 1.15.1 places the pod that fits the surviving (now
empty) node, discards the placement because the gang is not whole, and marks that pod ``Schedulable``
(``pkg/scheduler/api/job_info.go`` ``TaskSchedulingReason``); Karpenter 1.14.1 provisions only for pods marked
``Unschedulable`` (``pkg/utils/pod/scheduling.go``), finds the surviving node empty, nominates it for the other pod
and launches nothing; the nomination keeps that node from being consolidated, so it would bill until someone deleted
the job (found here, before the watch existed). The release watches the gang it created
(``job_release_program.GangWatch``): a pod placed but not started for the stall time has it delete the gang, hold
both nodes again with capacity pods (one binds to the surviving node, Karpenter launches one for the other) and
create the gang anew, which then completes."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys

import pytest

import app as default_app
from e2e.components import ComponentRunner
from e2e.deploy import LiveStack, applied_objects
from e2e.kwok_stages import NOT_READY_SINCE
from e2e.processes import wait_for
from e2e.seed_runs import SEED_RUN_MINUTES, seed_jobs, wait_for_jobs
from rehearsal.scenarios import DEFAULT, TRAINIUM_EKS, default_app_source
from tests.support.apps import new_app
from trainium_eks.manifests.jobs.job_release_program import CAPACITY_SETTINGS

RUN_SECONDS = 40
"""How long each job's pods run here: long enough to lose a node while the training gang runs."""

STALL_SECONDS = CAPACITY_SETTINGS["stall"][1]
"""The library's default stall time, which the seed jobs keep: the scenario is the user's."""

KWOK_READY_TOLERATION = datetime.timedelta(minutes=10)
"""How long Karpenter's kwok provider tolerates ``Ready`` False before its node repair acts (kubernetes-sigs/karpenter
v1.14.1 ``kwok/cloudprovider/cloudprovider.go`` ``RepairPolicies``)."""

NODE_CLAIM = ("karpenter.sh/v1", "NodeClaim")

RECOVERY_MINUTES = STALL_SECONDS // 60 + 5
"""How long the restarted gang may take to finish: the stall time, then a replacement that launches in seconds here,
and the pods' :data:`RUN_SECONDS`."""


@pytest.mark.job_seconds(RUN_SECONDS)
def test_a_training_gang_that_loses_a_node_mid_run_gets_a_new_node_and_completes(cluster, binaries, tools):
    template, region = default_app_source(new_app, default_app.build_app, TRAINIUM_EKS)(DEFAULT)
    with ComponentRunner(cluster, binaries) as runner, LiveStack(cluster, TRAINIUM_EKS, region, tools) as live:

        def describe() -> str:
            return f"{runner.describe()}\n{cluster.describe()}"

        deployed = live.deploy(template)
        assert not deployed.failures, f"{deployed.describe_failures()}\n{describe()}"
        jobs = seed_jobs(applied_objects(live))
        training = [ref for _, ref in jobs if ref.startswith("vcjob/bert-phase1-train-") and "-fabric-" not in ref]
        assert len(training) == 1, jobs
        name = training[0].split("/")[1]

        def gang_running():
            pods = cluster.api.list("v1", "Pod", "training", selector=f"volcano.sh/job-name={name}")
            running = [pod for pod in pods if (pod.get("status") or {}).get("phase") == "Running"]
            return running if len(running) == 2 else None

        running = wait_for(
            "the training gang running on its two nodes",
            gang_running,
            timeout=SEED_RUN_MINUTES * 60,
            check=runner.check,
            describe=describe,
        )
        first_uid = cluster.api.get("batch.volcano.sh/v1alpha1", "Job", name, "training")["metadata"]["uid"]
        lost = running[0]["spec"]["nodeName"]
        claims = [c for c in cluster.api.list(*NODE_CLAIM) if c["status"].get("nodeName") == lost]
        assert len(claims) == 1, lost
        since = datetime.datetime.now(datetime.timezone.utc) - KWOK_READY_TOLERATION - datetime.timedelta(minutes=1)
        failed = {"metadata": {"annotations": {NOT_READY_SINCE: since.strftime("%Y-%m-%dT%H:%M:%SZ")}}}
        for pod in [pod for pod in cluster.api.list("v1", "Pod") if pod["spec"].get("nodeName") == lost]:
            cluster.api.patch("v1", "Pod", pod["metadata"]["name"], failed, pod["metadata"]["namespace"])
        cluster.api.patch("v1", "Node", lost, failed)

        def restarted_without_the_node() -> bool:
            job = cluster.api.get("batch.volcano.sh/v1alpha1", "Job", name, "training") or {}
            nodes = [node["metadata"]["name"] for node in cluster.api.list("v1", "Node")]
            return (job.get("status") or {}).get("retryCount") == 1 and lost not in nodes

        def describe_repair() -> str:
            node = cluster.api.get("v1", "Node", lost) or {}
            conditions = (node.get("status") or {}).get("conditions") or []
            ready = [c for c in conditions if c.get("type") == "Ready"]
            claims = [(c["metadata"]["name"], c["status"].get("nodeName")) for c in cluster.api.list(*NODE_CLAIM)]
            job = cluster.api.get("batch.volcano.sh/v1alpha1", "Job", name, "training") or {}
            return f"{lost} Ready: {ready}\nNodeClaims: {claims}\njob status: {job.get('status')}\n{describe()}"

        wait_for(
            "the node gone and the gang restarted",
            restarted_without_the_node,
            timeout=RECOVERY_MINUTES * 60,
            check=runner.check,
            describe=describe_repair,
        )

        states = wait_for_jobs(cluster.api, jobs, timeout=RECOVERY_MINUTES * 60, check=runner.check, describe=describe)
        assert set(states.values()) == {"done"}, states
        job = cluster.api.get("batch.volcano.sh/v1alpha1", "Job", name, "training")
        assert job["metadata"]["uid"] != first_uid, "the gang completed without being created again"
        reasons = [
            event["reason"]
            for event in cluster.api.list("v1", "Event", "training")
            if event["involvedObject"]["name"] == f"{name}-release"
        ]
        assert reasons.count("GangStalled") == 1 and reasons.count("CapacityHeld") == 2, reasons

        # what `python -m trainium_eks status` tells the user, from the real API server and Karpenter's own log
        saved = cluster.workdir / "karpenter.log"
        saved.write_text("".join(log.read_text(errors="replace") for log in runner.logs("karpenter-kwok")))
        kubectl = tools["kubectl"]
        env = {
            **os.environ,
            "KUBECONFIG": str(cluster.kubeconfig),
            "PATH": f"{kubectl.parent}{os.pathsep}/usr/bin:/bin",
        }
        command = [sys.executable, "-m", "trainium_eks", "status", "--stack", "TrainiumEks", "--no-aws"]
        done = subprocess.run(
            [*command, "--karpenter-log", str(saved)], env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        row = next(line.split() for line in done.stdout.splitlines() if line.split()[:2] == ["volcano", name])
        assert row[2:6] == ["Completed", "0", "(+1", "recreated)"], done.stdout
        claim = claims[0]["metadata"]["name"]
        repaired = f"node {lost}, nodeclaim {claim}  node repair: a condition unhealthy past the provider's toleration"
        assert repaired in done.stdout, f"{done.stdout}\n--- Karpenter's log ---\n{saved.read_text()[-4000:]}"
