"""The seed jobs in the order least like CloudFormation's, on the real components, for the stack whose seed jobs wait
for each other most (TrainiumEks: staging, a fabric check, pre-compilation, a fabric check, training): every job
object (the staging Job, the release Jobs) is held back at the deploy, then created through the kubectl handler in
reverse order, each :data:`ARRIVAL_GAP_SECONDS` after the one before, so that every release polls at least once
before the job it waits for exists (and a fabric check's release arrives after the release of the job it guards).
Every job still completes, each after what it waits for (a release creates its job only then:
``job_release_program.decide``). Every other order: the scheduling rehearsal (TrainiumEks and ComposerTraining)."""

from __future__ import annotations

import json

import app as default_app
from e2e.components import ComponentRunner
from e2e.deploy import LiveStack, applied_objects
from e2e.seed_runs import SEED_RUN_MINUTES, created_before_its_waits_ended, seed_jobs, wait_for_jobs
from rehearsal.cfn_changes import Step
from rehearsal.handler import HANDLER_TYPES
from rehearsal.scenarios import DEFAULT, TRAINIUM_EKS, default_app_source
from tests.support.apps import new_app
from trainium_eks.manifests.jobs.job_release_program import POLL_SECONDS, ref_of

ARRIVAL_GAP_SECONDS = POLL_SECONDS + 10
"""Between two arrivals: longer than a release program's poll interval."""


def is_job(step: Step) -> bool:
    """Whether the step creates a job object (one Kubernetes object per resource: ``AppliedChart``)."""
    if step.resource_type != HANDLER_TYPES[0]:
        return False
    objects = json.loads(step.properties["Manifest"])
    return len(objects) == 1 and ref_of(objects[0]) is not None


def test_the_seed_jobs_complete_when_they_arrive_in_reverse_order(cluster, binaries, tools):
    stack = TRAINIUM_EKS
    template, region = default_app_source(new_app, default_app.build_app, stack)(DEFAULT)
    with (
        ComponentRunner(cluster, binaries) as runner,
        LiveStack(cluster, stack, region, tools, hold=is_job) as live,
    ):

        def describe() -> str:
            return f"{runner.describe()}\n{cluster.describe()}"

        deployed = live.deploy(template)
        assert not deployed.failures, f"{deployed.describe_failures()}\n{describe()}"
        assert len(live.held) >= 2, [run.step.logical_id for _, run in live.held]
        failed = live.arrive(list(reversed(live.held)), gap=ARRIVAL_GAP_SECONDS)
        assert not failed, [run.invocation.error for run in failed]
        objects = applied_objects(live)
        states = wait_for_jobs(
            cluster.api,
            seed_jobs(objects),
            timeout=SEED_RUN_MINUTES * 60,
            check=runner.check,
            describe=describe,
        )
        assert set(states.values()) == {"done"}, states
        assert created_before_its_waits_ended(cluster.api, objects) == []
