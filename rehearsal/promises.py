"""The promises a deploy keeps, as checks over a :class:`~rehearsal.scenario.ScenarioResult`.

Each check returns its violations (empty when the promise holds), each naming the step, command or object at fault.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Set, Tuple

from rehearsal.cfn_changes import Action
from rehearsal.cluster_model import split_api_version
from rehearsal.delete_needs import delete_needs
from rehearsal.scenario import (
    HANDLER_TYPES,
    Promise,
    ScenarioResult,
    StepRun,
    desired_objects,
    desired_releases,
)
from rehearsal.scheduling_run import broken, is_job, rehearse_jobs, stack_scheduling
from rehearsal.simulated_cluster import nodes_of

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

JOB_KINDS: Tuple[Tuple[str, str], ...] = (
    ("batch", "Job"),
    ("batch.volcano.sh", "Job"),
    ("kubeflow.org", "PyTorchJob"),
    ("trainer.kubeflow.org", "TrainJob"),
)
"""(API group, kind) of the jobs the stacks apply."""

KEPT_KINDS: Tuple[Tuple[str, str], ...] = (("", "Namespace"), ("", "PersistentVolume"), ("", "PersistentVolumeClaim"))
"""Kinds that must survive every deploy: a namespace (deleting it deletes every job and claim in it), the shared
volume and its claim."""

MISSING_PREREQUISITE = (
    'namespaces "',
    "no matches for kind",
    "No cluster found",
    "Unable to connect to the server",
    "unable to find job queue",
)
"""Error text of a command that found something it needs already gone (or not yet there)."""

ObjectKey = Tuple[str, str, str, str]


def _key(obj: Mapping[str, Any], namespaced: bool = True) -> ObjectKey:
    metadata = obj.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "default") if namespaced else ""
    return (
        split_api_version(str(obj.get("apiVersion", "")))[0],
        str(obj.get("kind")),
        namespace,
        str(metadata["name"]),
    )


def _describe(key: ObjectKey) -> str:
    group, kind, namespace, name = key
    return f"{kind}{'.' + group if group else ''} {namespace + '/' if namespace else ''}{name}"


def _target_key(target: str) -> ObjectKey:
    """The key of an effect's target (``apiVersion Kind namespace/name``)."""
    api_version, kind, where = target.split(" ", 2)
    namespace, _, name = where.rpartition("/")
    return (split_api_version(api_version)[0], kind, namespace, name)


def _where(index: int, run: StepRun) -> str:
    step = run.step
    return f"step {index + 1} ({step.operation} {step.logical_id})"


def _command_line(command: Mapping[str, Any]) -> str:
    return " ".join([command["tool"], *command["argv"][:2]])


def stateful_resources_kept(result: ScenarioResult) -> List[str]:
    """No file system, repository, key or log group is replaced or deleted."""
    return [
        f"{change.logical_id} ({change.resource_type}) is {change.action.value}d"
        + (f": {', '.join(change.reasons)}" if change.reasons else "")
        for change in result.plan.changes
        if change.resource_type in STATEFUL_TYPES and change.action in (Action.REPLACE, Action.DELETE, Action.SNAPSHOT)
    ]


def one_copy_of_each_job(result: ScenarioResult) -> List[str]:
    """After the deploy, the cluster holds exactly the jobs of the app: each once, and no job of an old spec."""
    expected = {_key(obj) for _, obj in desired_objects(result) if _key(obj)[:2] in JOB_KINDS}
    present: Dict[ObjectKey, Any] = {
        obj.key: obj for _, obj in result.cluster_after.all_objects() if (obj.group, obj.kind) in JOB_KINDS
    }
    found = []
    for key in sorted(set(present) - expected):
        app_name = present[key].labels.get("app.kubernetes.io/name")
        twins = [k for k in sorted(expected) if app_name and k[3].startswith(app_name + "-") and k[2] == key[2]]
        also = f"; the app's {_describe(twins[0])} runs beside it" if twins else ""
        found.append(f"{_describe(key)} survives, but the app no longer has it (a job of an old spec{also})")
    found.extend(f"{_describe(key)} is in the app but not in the cluster" for key in sorted(expected - set(present)))
    return found


def namespace_volume_claim_survive(result: ScenarioResult) -> List[str]:
    """Every namespace, persistent volume and claim the app applied (before or after) is still there and was never
    deleted on the way."""
    watched: Set[ObjectKey] = set()
    for old in (True, False):
        for _, obj in desired_objects(result, old=old):
            group = split_api_version(str(obj.get("apiVersion", "")))[0]
            if (group, obj.get("kind")) in KEPT_KINDS:
                watched.add(_key(obj, namespaced=obj.get("kind") == "PersistentVolumeClaim"))
    present = {obj.key for _, obj in result.cluster_after.all_objects()}
    found = [f"{_describe(key)} is gone after the deploy" for key in sorted(watched - present)]
    for index, run in enumerate(result.runs):
        for command in run.invocation.commands if run.invocation else ():
            for op, target, *_ in command["effects"]:
                if target.startswith("release ") or op in ("created", "configured", "unchanged"):
                    continue
                if _target_key(target) in watched:
                    found.append(f"{_where(index, run)}: {_command_line(command)} {op} {target}")
        if run.note and "deleted" in run.note and watched:
            found.append(f"{_where(index, run)}: {run.note}")
    return found


def no_create_hits_existing(result: ScenarioResult) -> List[str]:
    """No creation fails because the object already exists."""
    found = []
    for index, run in enumerate(result.runs):
        for command in run.invocation.commands if run.invocation else ():
            for line in command["stderr"].splitlines():
                if "AlreadyExists" in line or "already exists" in line:
                    found.append(f"{_where(index, run)}: {_command_line(command)}: {line}")
    return found


def helm_upgrades_in_place(result: ScenarioResult) -> List[str]:
    """Every Helm release of the app exists after the deploy; a changed chart is upgraded in place, never
    uninstalled and installed again."""
    wanted = {(namespace, release) for _, namespace, release in desired_releases(result)}
    after = {key for cluster in result.cluster_after.clusters.values() for key in cluster.releases}
    found = [f"release {ns}/{name} of the app is not installed after the deploy" for ns, name in sorted(wanted - after)]
    for index, run in enumerate(result.runs):
        if run.step.resource_type != HANDLER_TYPES[1] or run.invocation is None:
            continue
        effects = [(op, target) for command in run.invocation.commands for op, target, *_ in command["effects"]]
        for op, target in effects:
            release = tuple(target.split(" ")[1].split("/", 1)) if target.startswith("release ") else None
            if op == "uninstalled" and release in wanted:
                found.append(f"{_where(index, run)} uninstalls {target}, which the app still has")
            if op == "installed" and run.step.operation == "Update":
                found.append(f"{_where(index, run)} installs {target} anew instead of upgrading it")
        if (
            run.step.operation == "Update"
            and run.invocation.succeeded
            and not any(op == "upgraded" for op, _ in effects)
        ):
            found.append(f"{_where(index, run)} did not upgrade its release")
    return found


def _needs_deleted_first(result: ScenarioResult) -> List[str]:
    """Every need of :mod:`.delete_needs` among the cleanup steps that ran whose needed resource is deleted in an
    earlier wave than the resource that needs it, or in the same one; or at all, when that resource is retained."""
    leaving = {run.step.logical_id: index for index, run in enumerate(result.runs) if run.step.wave is not None}
    operations = {logical_id: result.runs[index].step.operation for logical_id, index in leaving.items()}
    found = []
    for need in delete_needs(result.before.template, operations):
        index, needed_index = leaving[need.resource], leaving[need.needed]
        step, needed = result.runs[index].step, result.runs[needed_index].step
        if needed.operation != "Delete":
            continue
        assert step.wave is not None and needed.wave is not None
        deleted = f"step {needed_index + 1} deletes it in wave {needed.wave + 1}"
        if step.operation == "Retain":
            found.append(f"{_where(index, result.runs[index])} keeps {need.needed} in use, but {deleted} ({need.why})")
        elif needed.wave <= step.wave:
            when = "at the same time" if needed.wave == step.wave else "before"
            found.append(
                f"{_where(index, result.runs[index])} in wave {step.wave + 1} needs {need.needed} ({need.why}), but "
                f"{deleted}, {when}"
            )
    return found


def order_respects_needs(result: ScenarioResult) -> List[str]:
    """No step needs a resource an earlier step deleted, or one that a step of its own cleanup wave deletes at the
    same time (template dependencies); no resource leaving the stack needs one that is deleted before it or with it,
    and none that a retained resource keeps in use is deleted (:mod:`.delete_needs`); and no command of a creation or
    update finds something it needs missing (a namespace, a custom resource definition, the cluster, a queue)."""
    found = []
    deleted: Dict[Tuple[str, str], int] = {}  # (logical id, physical id) -> step (a bucket policy has its bucket's id)
    in_wave = {
        (run.step.wave, run.step.logical_id): index
        for index, run in enumerate(result.runs)
        if run.step.operation == "Delete" and run.step.wave is not None
    }
    for index, run in enumerate(result.runs):
        step = run.step
        resources = result.before.resources if step.operation == "Delete" else result.plan.result.resources
        for need in step.needs:
            physical = resources.get(need)
            if physical is None:
                continue
            if step.wave is not None and (step.wave, need) in in_wave:
                at = in_wave[(step.wave, need)]
                found.append(f"{_where(index, run)} needs {need}, deleted at the same time by step {at + 1}")
            elif (need, physical.physical_id) in deleted:
                found.append(
                    f"{_where(index, run)} needs {need}, deleted by step {deleted[(need, physical.physical_id)] + 1}"
                )
        if step.operation == "Delete":
            deleted[(step.logical_id, step.physical_id)] = index
        if step.operation in ("Create", "Update") and run.invocation:
            for command in run.invocation.commands:
                lines = [
                    line for line in command["stderr"].splitlines() if any(m in line for m in MISSING_PREREQUISITE)
                ]
                found.extend(f"{_where(index, run)}: {_command_line(command)}: {line}" for line in lines)
    return found + _needs_deleted_first(result)


def handler_calls_succeed(result: ScenarioResult) -> List[str]:
    """CloudFormation accepts the change set, every handler call returns (CloudFormation gets SUCCESS) and no
    physical id changes."""
    found = list(result.plan.errors)
    for index, run in enumerate(result.runs):
        if run.invocation is None:
            continue
        if not run.invocation.succeeded:
            found.append(f"{_where(index, run)} fails: {run.invocation.error.strip()[:600]}")
        elif run.invocation.physical_id != run.step.physical_id:
            found.append(f"{_where(index, run)} changed the physical id to {run.invocation.physical_id}")
    return found


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
ONE_COPY_OF_EACH_JOB = Promise("exactly one copy of each job, none of an old spec", one_copy_of_each_job)
NAMESPACE_VOLUME_CLAIM_SURVIVE = Promise("the namespace, volume and claim survive", namespace_volume_claim_survive)
NO_CREATE_ON_EXISTING = Promise("no create hits an existing object", no_create_hits_existing)
HELM_IN_PLACE = Promise("Helm upgrades in place", helm_upgrades_in_place)
ORDER = Promise("no action deletes what a later one needs", order_respects_needs)
HANDLER_SUCCEEDS = Promise("every handler call succeeds", handler_calls_succeed)
JOBS_RUN = Promise(
    "every job runs to completion in every arrival order, with one failed attempt of each", jobs_run_to_completion
)

DEPLOY_PROMISES: Tuple[Promise, ...] = (
    STATEFUL_KEPT,
    ONE_COPY_OF_EACH_JOB,
    NAMESPACE_VOLUME_CLAIM_SURVIVE,
    NO_CREATE_ON_EXISTING,
    HELM_IN_PLACE,
    ORDER,
    HANDLER_SUCCEEDS,
)
"""The promises of the deploy itself (CloudFormation, the handler, the API server)."""

ALL_PROMISES: Tuple[Promise, ...] = DEPLOY_PROMISES + (JOBS_RUN,)
"""Every promise, checked by every scenario except where a scenario says otherwise: the deploy's, and what the
cluster then does with the jobs."""
