"""A hybrid-workflow run on the real components, as the state machine makes it: the run's release Job, rendered from
the deployed definition with the JSONata engine and created as the workflow's access-entry group, holds all the
nodes of the run's gang, creates the TrainJob, and the run completes; the TrainJob is read as the workflow reads it
(a list by name, as the same group).

The case the release exists for: KubeflowTraining without its seed run, so that after the deploy only the staging
Job's node is warm, and a run of two nodes fits in part on it. Volcano then places one pod there and marks it
``Schedulable``, and Karpenter, which provisions only for ``Unschedulable`` pods, would never launch the second node
(volcano v1.15.1 ``pkg/scheduler/api/job_info.go``; kubernetes-sigs/karpenter v1.14.1 ``pkg/utils/pod/scheduling.go``):
a TrainJob created at once waits until its deadline."""

from __future__ import annotations

import functools
import json
from typing import Any, Dict

import app as default_app
from e2e.components import ComponentRunner
from e2e.deploy import LiveStack, applied_objects
from e2e.processes import wait_for
from e2e.seed_runs import SEED_RUN_MINUTES, seed_jobs, wait_for_jobs
from rehearsal.scenario import Patch, Variant
from rehearsal.scenarios import KUBEFLOW_TRAINING, default_app_source
from tests.support.apps import new_app
from tests.support.workflow_walk import walk
from trainium_eks.core.cfn_text import cfn_text
from trainium_eks.core.conventions import HELD_JOB_LABEL
from trainium_eks.manifests.access.workflow_access import WORKFLOW_GROUP
from trainium_eks.manifests.jobs.job_release_program import state

WITHOUT_SEED_RUN = Variant(
    "seed run removed (KubeflowTrainingStack seed_jobs=False): the staging Job and the workflow stay",
    patches=(
        Patch("app.KubeflowTrainingStack", lambda cls: functools.partial(cls, seed_jobs=False), "seed_jobs=False"),
    ),
)

STAGED = {"StatusCode": 200, "ResponseBody": {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}}
"""The answer of the workflow's read of the staging Job, once it has completed (the test waits for that first)."""


def run_definition(template: Dict[str, Any]) -> Dict[str, Any]:
    """The workflow's (Standard) state machine definition, its CloudFormation references left as they are: the run's
    release body holds none."""
    (machine,) = [
        resource
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::StepFunctions::StateMachine"
        and resource["Properties"].get("StateMachineType") == "STANDARD"
    ]
    text = cfn_text(
        machine["Properties"]["DefinitionString"],
        reference=lambda logical_id: f"<Ref:{logical_id}>",
        attribute=lambda parts: f"<GetAtt:{'.'.join(parts)}>",
    )
    return json.loads(text)


def test_a_workflow_run_whose_gang_fits_in_part_on_a_warm_node_gets_all_its_nodes(cluster, binaries, tools):
    template, region = default_app_source(new_app, default_app.build_app, KUBEFLOW_TRAINING)(WITHOUT_SEED_RUN)
    with ComponentRunner(cluster, binaries) as runner, LiveStack(cluster, KUBEFLOW_TRAINING, region, tools) as live:

        def describe() -> str:
            return f"{runner.describe()}\n{cluster.describe()}"

        deployed = live.deploy(template)
        assert not deployed.failures, f"{deployed.describe_failures()}\n{describe()}"
        staging = seed_jobs(applied_objects(live))
        assert [ref.split("/")[0] for _, ref in staging] == ["job"], staging
        states = wait_for_jobs(
            cluster.api, staging, timeout=SEED_RUN_MINUTES * 60, check=runner.check, describe=describe
        )
        assert set(states.values()) == {"done"}, states
        pool = "karpenter.sh/nodepool"
        assert len(cluster.api.list("v1", "Node", selector=pool)) == 1, "the staging Job's node is warm"

        (run,) = walk(
            run_definition(template),
            {"training_runtime": "kubernetes", "node_count": 2, "hyperparameters": {"epochs": "1"}},
            execution="e2e-warm-node",
            results={"Read data job": [STAGED]},
        )
        assert run["end"] == "Task" and run["state"] == "Create release", run
        release = run["calls"][-1]["arguments"]["RequestBody"]
        workflow = cluster.api.impersonating("states.amazonaws.com", WORKFLOW_GROUP)
        workflow.create(release)
        name = release["metadata"]["labels"][HELD_JOB_LABEL]
        trainjobs = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/training/trainjobs"

        def finished():
            items = workflow.request("GET", f"{trainjobs}?fieldSelector=metadata.name%3D{name}")["items"]
            return items and state("trainjob", items[0]) in ("done", "failed") and items[0]

        job = wait_for(
            f"the run's TrainJob {name} ends",
            finished,
            timeout=SEED_RUN_MINUTES * 60,
            check=runner.check,
            describe=describe,
        )
        assert state("trainjob", job) == "done", json.dumps(job.get("status"), indent=1)
        assert len(cluster.api.list("v1", "Node", selector=pool)) == 2, "the warm node and one more, no other"
        events = cluster.api.list("v1", "Event", namespace="training")
        held = [e for e in events if e.get("reason") == "CapacityHeld" and release["metadata"]["name"] in json.dumps(e)]
        assert held, "the release held the run's two nodes before it created the TrainJob"
