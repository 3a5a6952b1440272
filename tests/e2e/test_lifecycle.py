"""A stack's life on the real control plane, as a user lives it: a fresh deploy, then each of the rehearsal's update
scenarios in turn (:mod:`rehearsal.scenarios`), the settings a scenario starts from deployed again first where they
differ (a user reverting the last change), then a ``cdk destroy``.

After every deploy: every handler call succeeded (so no create hit an existing object and no step lacked what it
needed), every object of the new template exists, what the change dropped is gone, the namespace, volume and claim
were never replaced (same uid), and every Helm release CloudFormation updated was upgraded in place (its revision
grew: an uninstall and install starts again at 1), every other one left alone.
After a scenario's deploy, also: the new settings' seed jobs all complete, on whatever nodes the steps before left
warm, each created only after what it waits for had completed, and the cluster then holds exactly those jobs (none
of an old spec, no capacity Job). A revert does not wait for its seed jobs: the next change lands while they run, as
it does for a user who reverts and goes on at once.
After the destroy: only the retained objects are left, and no node.

Not run here, because the real control plane has nothing to run them with: a chart pin moved one minor version
ahead (a version with no chart in ``../shared/upstream``; the rehearsal checks that CloudFormation updates its
release in place), and ``kubernetesVersion`` 1.35 -> 1.36 (an EKS control plane upgrade; this one is 1.36). A fresh
deploy of other settings, and the destroy of node groups: ``test_deploy.py``."""

from __future__ import annotations

import functools
from typing import Any, Dict, List, NamedTuple, Optional

import pytest

import app as default_app
from e2e.components import ComponentRunner
from e2e.deploy import LiveStack, applied_objects
from e2e.processes import wait_for
from e2e.seed_runs import SEED_RUN_MINUTES, created_before_its_waits_ended, seed_jobs, wait_for_jobs
from e2e.stack_state import helm_revision, jobs_in, object_key, present, releases, uids
from rehearsal.handler import HANDLER_TYPES
from rehearsal.scenario import Scenario, Variant
from rehearsal.scenarios import (
    KUBERNETES_1_35,
    NEWER_KARPENTER,
    NEWER_TRAINER,
    NEWER_VOLCANO,
    STACKS,
    all_scenarios,
    default_app_source,
)
from tests.support.apps import new_app
from trainium_eks.constructs.applied_chart import RETAINED_KINDS

NO_OFFLINE_COUNTERPART = (NEWER_KARPENTER, NEWER_TRAINER, NEWER_VOLCANO, KUBERNETES_1_35)
"""Variants the real control plane cannot deploy (see the module docstring)."""

GARBAGE_COLLECTION_SECONDS = 60
"""How long the garbage collector may take to delete what a deleted release Job owned."""


class Step(NamedTuple):
    """One deploy of a walk: the settings (None: ``cdk destroy``), what it is, and whether it is a scenario's own
    change (False: a revert to the settings the next scenario starts from)."""

    variant: Optional[Variant]
    why: str
    scenario: bool


def scenarios(stack: str) -> List[Scenario]:
    """The stack's scenarios the real control plane can run: its fresh deploy, its updates, its first destroy."""
    runnable = [
        scenario
        for scenario in all_scenarios()
        if scenario.stack == stack and not {scenario.old, scenario.new} & set(NO_OFFLINE_COUNTERPART)
    ]
    fresh = [scenario for scenario in runnable if scenario.old is None]
    destroys = [scenario for scenario in runnable if scenario.new is None]
    return fresh[:1] + [s for s in runnable if s.old is not None and s.new is not None] + destroys[:1]


def walk(stack: str) -> List[Step]:
    """The deploys of a stack's life: each scenario's old settings (unless deployed already), then its new."""
    steps: List[Step] = []
    for scenario in scenarios(stack):
        if scenario.old is not None and steps[-1].variant != scenario.old:
            steps.append(Step(scenario.old, f"back to {scenario.old.label}", False))
        steps.append(Step(scenario.new, scenario.name, True))
    return steps


@pytest.mark.parametrize("stack", STACKS)
def test_a_walk_starts_with_a_fresh_deploy_and_ends_with_a_destroy(stack):
    steps = walk(stack)
    assert steps[0].why == "fresh deploy" and steps[-1].variant is None
    assert sum(step.scenario for step in steps) >= 5, "a fresh deploy, three updates or more, a destroy"


@pytest.mark.parametrize("stack", STACKS)
def test_a_stacks_life_keeps_every_promise_and_its_seed_jobs_complete(cluster, binaries, tools, stack):
    built = functools.lru_cache(maxsize=None)(default_app_source(new_app, default_app.build_app, stack))
    steps = walk(stack)
    region = built(steps[0].variant)[1]
    with ComponentRunner(cluster, binaries) as runner, LiveStack(cluster, stack, region, tools) as live:
        before: List[Dict[str, Any]] = []
        for step in steps:
            template = built(step.variant)[0] if step.variant is not None else None
            before = deploy_and_check(cluster, runner, live, template, step, before)


def deploy_and_check(cluster, runner, live, template, step: Step, before):
    """Deploy ``template`` (None: destroy) over ``before`` (the objects the stack applied until now) and check what
    the module docstring says; the objects applied now."""
    where = f"{live.identity.name}: {step.why}"

    def describe() -> str:
        return f"{runner.describe()}\n{cluster.describe()}"

    retained = applied_objects(live, retained=True) if before else []
    assert {obj["kind"] for obj in retained} <= RETAINED_KINDS
    kept_before = uids(cluster.api, retained)
    revisions_before = {release: helm_revision(cluster.api, *release) for release in releases(live)}

    deployed = live.deploy(template)
    assert not deployed.failures, f"{where}: {deployed.describe_failures()}\n{describe()}"
    runner.check()
    objects = applied_objects(live) if template is not None else []
    assert present(cluster.api, objects) == [object_key(obj) for obj in objects], where
    keys = {object_key(obj) for obj in objects}
    dropped = [obj for obj in before if object_key(obj) not in keys | set(kept_before)]
    assert present(cluster.api, dropped) == [], f"{where}: what the change dropped is gone"
    kept_after = uids(cluster.api, retained)
    assert {key: kept_after.get(key) for key in kept_before} == kept_before, f"{where}: never replaced"
    if template is None:
        assert [node["metadata"]["name"] for node in cluster.api.list("v1", "Node")] == [], describe()
        return objects
    upgraded = {
        (step.properties.get("Namespace") or "default", step.properties["Release"])
        for step in deployed.plan.steps
        if step.resource_type == HANDLER_TYPES[1] and step.operation == "Update"
    }
    for release, revision in revisions_before.items():
        if release in upgraded:
            assert helm_revision(cluster.api, *release) > revision, f"{where}: {release} installed again"
        elif release in releases(live):
            assert helm_revision(cluster.api, *release) == revision, f"{where}: {release} changed without an update"
    if not step.scenario:
        return objects

    jobs = set(seed_jobs(objects))
    states = wait_for_jobs(
        cluster.api, sorted(jobs), timeout=SEED_RUN_MINUTES * 60, check=runner.check, describe=describe
    )
    assert set(states.values()) <= {"done"}, f"{where}: {states}"
    assert created_before_its_waits_ended(cluster.api, objects) == [], where
    namespaces = {obj["metadata"]["namespace"] for obj in before + objects if obj["metadata"].get("namespace")}
    wait_for(
        f"{where}: exactly the seed jobs of the settings deployed, none of an old spec, no capacity Job",
        lambda: jobs_in(cluster.api, namespaces) == jobs,
        timeout=GARBAGE_COLLECTION_SECONDS,
        describe=lambda: f"{sorted(jobs_in(cluster.api, namespaces) ^ jobs)}\n{describe()}",
    )
    return objects
