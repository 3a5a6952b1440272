"""The promises a deploy keeps, as checks over a :class:`~rehearsal.scenario.ScenarioResult`: what CloudFormation
does (its plan), and what the scheduling model does with the deployed jobs. What the kubectl handler and the API
server do with each step (no create hits an existing object, one copy of each job, the namespace, volume and claim
survive, Helm upgrades in place, every handler call succeeds) the end-to-end tests check on the real components
(``tests/e2e/test_lifecycle.py``).

Each check returns its violations (empty when the promise holds), each naming the step or object at fault.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from rehearsal.cfn_changes import Action, Step
from rehearsal.delete_needs import delete_needs
from rehearsal.scenario import Promise, ScenarioResult, desired_objects
from rehearsal.scheduling_run import broken, is_job, rehearse_jobs, stack_scheduling
from rehearsal.security_group_rules import duplicate_rules
from rehearsal.simulated_cluster import nodes_of
from rehearsal.subnet_cidrs import conflicting_subnets

STATEFUL_TYPES: Tuple[str, ...] = (
    "AWS::FSx::FileSystem",
    "AWS::FSx::DataRepositoryAssociation",
    "AWS::EFS::FileSystem",
    "AWS::ECR::Repository",
    "AWS::KMS::Key",
    "AWS::Logs::LogGroup",
    "AWS::S3::Bucket",
    "AWS::DynamoDB::Table",
)
"""Resource types that hold data: file systems, repositories, keys, log groups, buckets, tables."""


def _where(index: int, step: Step) -> str:
    return f"step {index + 1} ({step.operation} {step.logical_id})"


def stateful_resources_kept(result: ScenarioResult) -> List[str]:
    """No file system, repository, key or log group is replaced or deleted."""
    return [
        f"{change.logical_id} ({change.resource_type}) is {change.action.value}d"
        + (f": {', '.join(change.reasons)}" if change.reasons else "")
        for change in result.plan.changes
        if change.resource_type in STATEFUL_TYPES and change.action in (Action.REPLACE, Action.DELETE, Action.SNAPSHOT)
    ]


def _needs_deleted_first(result: ScenarioResult) -> List[str]:
    """Every need of :mod:`.delete_needs` among the cleanup steps that ran whose needed resource is deleted in an
    earlier wave than the resource that needs it, or in the same one; or at all, when that resource is retained."""
    steps = result.plan.steps
    leaving = {step.logical_id: index for index, step in enumerate(steps) if step.wave is not None}
    operations = {logical_id: steps[index].operation for logical_id, index in leaving.items()}
    found = []
    for need in delete_needs(result.before.template, operations):
        index, needed_index = leaving[need.resource], leaving[need.needed]
        step, needed = steps[index], steps[needed_index]
        if needed.operation != "Delete":
            continue
        assert step.wave is not None and needed.wave is not None
        deleted = f"step {needed_index + 1} deletes it in wave {needed.wave + 1}"
        if step.operation == "Retain":
            found.append(f"{_where(index, step)} keeps {need.needed} in use, but {deleted} ({need.why})")
        elif needed.wave <= step.wave:
            when = "at the same time" if needed.wave == step.wave else "before"
            found.append(
                f"{_where(index, step)} in wave {step.wave + 1} needs {need.needed} ({need.why}), but {deleted}, {when}"
            )
    return found


def order_respects_needs(result: ScenarioResult) -> List[str]:
    """No step needs a resource an earlier step deleted, or one that a step of its own cleanup wave deletes at the
    same time (template dependencies); no resource leaving the stack needs one that is deleted before it or with it,
    and none that a retained resource keeps in use is deleted (:mod:`.delete_needs`)."""
    found = []
    deleted: Dict[Tuple[str, str], int] = {}  # (logical id, physical id) -> step (a bucket policy has its bucket's id)
    steps = result.plan.steps
    in_wave = {
        (step.wave, step.logical_id): index
        for index, step in enumerate(steps)
        if step.operation == "Delete" and step.wave is not None
    }
    for index, step in enumerate(steps):
        resources = result.before.resources if step.operation == "Delete" else result.plan.result.resources
        for need in step.needs:
            physical = resources.get(need)
            if physical is None:
                continue
            if step.wave is not None and (step.wave, need) in in_wave:
                at = in_wave[(step.wave, need)]
                found.append(f"{_where(index, step)} needs {need}, deleted at the same time by step {at + 1}")
            elif (need, physical.physical_id) in deleted:
                found.append(
                    f"{_where(index, step)} needs {need}, deleted by step {deleted[(need, physical.physical_id)] + 1}"
                )
        if step.operation == "Delete":
            deleted[(step.logical_id, step.physical_id)] = index
    return found + _needs_deleted_first(result)


def plan_accepted(result: ScenarioResult) -> List[str]:
    """CloudFormation accepts the change set (no custom resource's service token changes, nothing it refuses)."""
    return list(result.plan.errors)


def jobs_run_to_completion(result: ScenarioResult) -> List[str]:
    """The jobs of the deployed stack run on its nodes, from no job at all, in every
    order of arrival (each fabric check next to the job it guards: :func:`~.scheduling_run.arrival_orders`), with no
    failure and with one failed attempt of each: every job completes, no pod waits for what
    no node will have, nothing waits for ever, and once the jobs have ended no node Karpenter launched is left after
    its pool's ``consolidateAfter`` (:mod:`.scheduling_run`). Volcano runs the actions of the stack's release; its
    NodePools and EC2NodeClasses are among the standing objects."""
    if not result.new_template:
        return []
    objects = [obj for _, obj in desired_objects(result)]
    arrivals = [obj for obj in objects if is_job(obj)]
    standing = [obj for obj in objects if not is_job(obj)]
    scheduling = stack_scheduling(result.new_template)
    reports = rehearse_jobs(
        nodes_of(result.new_template),
        standing,
        arrivals,
        volcano_actions=scheduling.volcano_actions,
        addons=scheduling.addons,
    )
    return [
        f"{violation} ({where[0]}; {len(where)} of {len(reports)} runs)" for violation, where in broken(reports).items()
    ]


STATEFUL_KEPT = Promise("no stateful resource is replaced or deleted", stateful_resources_kept)
ORDER = Promise("no action deletes what a later one needs", order_respects_needs)
PLAN_ACCEPTED = Promise("CloudFormation accepts the change set", plan_accepted)
RULES_UNIQUE = Promise("no security group rule is created while the same rule stands", duplicate_rules)
SUBNETS_DISJOINT = Promise("no subnet is created over one that stands", conflicting_subnets)
JOBS_RUN = Promise(
    "every job runs to completion in every arrival order, with one failed attempt of each", jobs_run_to_completion
)

DEPLOY_PROMISES: Tuple[Promise, ...] = (STATEFUL_KEPT, ORDER, PLAN_ACCEPTED, RULES_UNIQUE, SUBNETS_DISJOINT)
"""The promises of the deploy itself: CloudFormation's plan, and EC2's rules on it."""

ALL_PROMISES: Tuple[Promise, ...] = DEPLOY_PROMISES + (JOBS_RUN,)
"""Every promise, checked by every scenario except where a scenario says otherwise: the deploy's, and what the
cluster then does with the jobs."""
