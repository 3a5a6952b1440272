"""What CloudFormation does to each resource between two templates, and in which order.

**Which changes replace a resource.** The rules come from the CloudFormation resource provider schemas that
cfn-lint ships (``cfnlint/data/schemas/providers/<region>.json`` maps a type to
``cfnlint/data/schemas/resources/<hash>.json``): a change of a property listed in ``createOnlyProperties`` (JSON
pointers such as ``/properties/SubnetIds`` or ``/properties/KubernetesNetworkConfig/IpFamily``) replaces the
resource; a change of any other property updates it in place. These are the registry schemas CloudFormation itself
uses to provision resource types (cfn-lint copies them from CloudFormation's published schema files), and they
are more current and finer than what the CDK CLI's ``cdk diff`` uses: the CLI (aws-cdk 2.1148.1,
``node_modules/aws-cdk/db.json.gz``, ``@aws-cdk/cloudformation-diff``) reads aws-service-spec, which keeps a
per-top-level-property ``causesReplacement`` merged from the legacy CloudFormation resource specification. Two
examples from the installed copies: the CLI marks ``AWS::FSx::FileSystem.FileSystemTypeVersion`` as replacing (the
legacy spec), while the registry schema lets it update in place (FSx upgrades Lustre versions in place); and it
marks the whole ``AWS::EKS::Cluster.KubernetesNetworkConfig`` as replacing, while the schema names only its
``IpFamily`` and ``ServiceIpv4Cidr``. The CLI's diff also compares template text, not values: it cannot tell whether
a reference to a replaced resource changes a value. Here values are compared after resolution
(:mod:`.intrinsics`), with new physical ids for replaced resources, so a reference to a replaced resource inside
a create-only property is a change, as in CloudFormation.

**Rules** (per logical id):

- only in the new template: create; only in the old one: delete, or retain when its ``DeletionPolicy`` is
  ``Retain`` or ``RetainExceptOnCreate`` (``Snapshot`` deletes the resource after a snapshot: "snapshot");
- same logical id, other type: replace;
- custom resources (``Custom::*``, ``AWS::CloudFormation::CustomResource``): any property change is an update
  (CloudFormation sends ``Update`` with ``OldResourceProperties``). The resource is replaced only when the handler
  answers with another physical id, and aws-cdk-lib's provider framework keeps the event's physical id when the
  handler returns none (see :mod:`.handler`); a changed ``ServiceToken`` is refused by CloudFormation ("Updates
  aren't supported", AWS::CloudFormation::CustomResource reference) and reported as an error;
- other resources: a change of a create-only property replaces, any other change updates, else nothing happens.

**Order.** Creations, updates and the creation of replacements run in the dependency order of the new template
(``DependsOn``, ``Ref``, ``Fn::GetAtt``, ``Fn::Sub`` references; independent resources in template order); a type
whose schema says ``replacementStrategy: delete_then_create`` has its old copy deleted just before. Then the cleanup
phase deletes the old copies of replaced resources (unless ``UpdateReplacePolicy`` keeps them) and the removed
resources (CloudFormation user guide, "Update behaviors of stack resources": it creates the replacement, points
dependents at it, then deletes the old resource). ``cdk destroy`` deletes every resource, keeping what
``DeletionPolicy`` retains. Deletions run in waves (:func:`deletion_waves`): CloudFormation deletes a resource once
every resource that depends on it in the old template, among those leaving the stack, is gone, and deletes all the
resources that are ready at once, in parallel (user guide, "DependsOn attribute": "resources are deleted in the
reverse order of their creation", which only the template's dependencies fix). A retained resource leaves the stack
in its wave like a deleted one. Each cleanup step carries its wave; what a delete needs beyond the template's
dependencies is :mod:`.delete_needs`'s.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from rehearsal.intrinsics import (
    PhysicalResource,
    Resolver,
    StackIdentity,
    is_custom_resource,
    new_physical_id,
    references,
)

EMPTY_TEMPLATE: Mapping[str, Any] = {"Resources": {}}


@lru_cache(maxsize=None)
def _providers(region: str) -> Mapping[str, str]:
    import cfnlint

    schemas = Path(cfnlint.__file__).parent / "data" / "schemas"
    path = schemas / "providers" / f"{region}.json"
    if not path.is_file():
        path = schemas / "providers" / "us-east-1.json"
    return json.loads(path.read_text())


@lru_cache(maxsize=None)
def resource_schema(resource_type: str, region: str = "us-east-1") -> Optional[Mapping[str, Any]]:
    """The CloudFormation registry schema of ``resource_type`` (cfn-lint's copy), or None for unknown types."""
    import cfnlint

    schema_hash = _providers(region).get(resource_type)
    if schema_hash is None:
        return None
    path = Path(cfnlint.__file__).parent / "data" / "schemas" / "resources" / f"{schema_hash}.json"
    return json.loads(path.read_text())


def create_only_paths(resource_type: str, region: str = "us-east-1") -> Tuple[Tuple[str, ...], ...]:
    """The create-only properties of ``resource_type`` as key paths (``("KubernetesNetworkConfig", "IpFamily")``)."""
    schema = resource_schema(resource_type, region) or {}
    return tuple(tuple(pointer.split("/")[2:]) for pointer in schema.get("createOnlyProperties", ()))


def primary_identifier(resource_type: str, region: str = "us-east-1") -> Optional[str]:
    """The property that names a resource (``Name`` of ``AWS::EKS::Cluster``), when it is a single, writable one."""
    schema = resource_schema(resource_type, region) or {}
    identifiers = schema.get("primaryIdentifier") or []
    read_only = set(schema.get("readOnlyProperties") or [])
    if len(identifiers) == 1 and identifiers[0] not in read_only and identifiers[0].count("/") == 2:
        return identifiers[0].split("/")[2]
    return None


def deletes_before_create(resource_type: str, region: str = "us-east-1") -> bool:
    """Whether the schema's ``replacementStrategy`` is ``delete_then_create``."""
    return (resource_schema(resource_type, region) or {}).get("replacementStrategy") == "delete_then_create"


class Action(str, Enum):
    """What CloudFormation does to a resource."""

    CREATE = "create"
    UPDATE = "update"
    REPLACE = "replace"
    DELETE = "delete"
    RETAIN = "retain"
    SNAPSHOT = "snapshot"


_REMOVAL_ACTIONS: Mapping[str, Action] = {
    "Retain": Action.RETAIN,
    "RetainExceptOnCreate": Action.RETAIN,
    "Snapshot": Action.SNAPSHOT,
}
"""DeletionPolicy -> the action on a resource removed from the stack (default: delete)."""


@dataclass(frozen=True)
class ResourceChange:
    """The action on one logical id, and why (changed properties; create-only ones marked)."""

    logical_id: str
    resource_type: str
    action: Action
    reasons: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    """One operation of CloudFormation, in order.

    :param logical_id: The resource.
    :param resource_type: Its type (the old type for deletions).
    :param operation: ``Create``, ``Update`` or ``Delete`` (the custom resource request type), or ``Retain``
        (removed from the stack, kept in the account: nothing is called).
    :param action: The resource's action (a replacement shows as a ``Create`` step and a ``Delete`` step).
    :param phase: ``update`` or ``cleanup``.
    :param physical_id: The physical id the operation works on (the old one for deletions).
    :param properties: Resolved properties for Create and Update, the old ones for Delete.
    :param old_properties: The old resolved properties, for Update.
    :param needs: Logical ids the operation depends on (in the template it belongs to).
    :param wave: For a cleanup step, its deletion wave (0 first; :func:`deletion_waves`): the steps of one wave run
        at the same time. None in the update phase, whose steps run one after the other.
    """

    logical_id: str
    resource_type: str
    operation: str
    action: Action
    phase: str
    physical_id: str
    properties: Mapping[str, Any]
    old_properties: Optional[Mapping[str, Any]] = None
    needs: Tuple[str, ...] = ()
    wave: Optional[int] = None


@dataclass
class Deployment:
    """A deployed stack: its template, its physical resources, and the generation of every logical id ever used."""

    template: Mapping[str, Any]
    resources: Dict[str, PhysicalResource] = field(default_factory=dict)
    generations: Dict[str, int] = field(default_factory=dict)

    @classmethod
    def empty(cls) -> "Deployment":
        """No stack yet."""
        return cls(EMPTY_TEMPLATE)


@dataclass
class Plan:
    """CloudFormation's work between two deployments: per-resource changes, ordered steps, problems it would refuse
    the update with, and the resulting deployment."""

    changes: List[ResourceChange]
    steps: List[Step]
    errors: List[str]
    result: Deployment


def dependencies(template: Mapping[str, Any], logical_ids: Set[str]) -> Dict[str, Set[str]]:
    """Logical id -> the resources among ``logical_ids`` it depends on (DependsOn, Ref, GetAtt, Sub)."""
    resources = template.get("Resources") or {}
    graph: Dict[str, Set[str]] = {}
    for logical_id in logical_ids:
        resource = resources[logical_id]
        depends_on = resource.get("DependsOn") or []
        names = {depends_on} if isinstance(depends_on, str) else set(depends_on)
        names |= references(resource.get("Properties") or {})
        graph[logical_id] = {name for name in names if name in logical_ids and name != logical_id}
    return graph


def dependency_order(template: Mapping[str, Any], logical_ids: Set[str]) -> List[str]:
    """``logical_ids`` so that every resource comes after what it depends on; ties in template order."""
    graph = dependencies(template, logical_ids)
    position = {name: index for index, name in enumerate(template.get("Resources") or {})}
    waiting = {name: len(deps) for name, deps in graph.items()}
    dependents: Dict[str, List[str]] = {name: [] for name in graph}
    for name, deps in graph.items():
        for dep in deps:
            dependents[dep].append(name)
    ready = [(position[name], name) for name, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: List[str] = []
    while ready:
        _, name = heapq.heappop(ready)
        order.append(name)
        for dependent in dependents[name]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                heapq.heappush(ready, (position[dependent], dependent))
    if len(order) != len(graph):
        raise ValueError(f"circular dependency among {sorted(set(graph) - set(order))}")
    return order


def deletion_waves(template: Mapping[str, Any], logical_ids: Set[str]) -> List[List[str]]:
    """``logical_ids`` in the waves CloudFormation deletes them in: the first wave is every resource nothing among
    ``logical_ids`` depends on; each next wave is every resource whose dependents among ``logical_ids`` are all in
    earlier waves. Within a wave (parallel in CloudFormation), later resources of the template come first."""
    graph = dependencies(template, logical_ids)
    position = {name: index for index, name in enumerate(template.get("Resources") or {})}
    dependents = {name: 0 for name in graph}
    for deps in graph.values():
        for dep in deps:
            dependents[dep] += 1
    waves: List[List[str]] = []
    ready = [name for name, count in dependents.items() if count == 0]
    while ready:
        waves.append(sorted(ready, key=lambda name: -position[name]))
        ready = []
        for name in waves[-1]:
            for dep in graph[name]:
                dependents[dep] -= 1
                if dependents[dep] == 0:
                    ready.append(dep)
    if sum(len(wave) for wave in waves) != len(graph):
        raise ValueError(f"circular dependency among {sorted(name for name, count in dependents.items() if count)}")
    return waves


def _value_at(properties: Any, path: Sequence[str]) -> Any:
    for index, key in enumerate(path):
        if isinstance(properties, list):
            return [_value_at(item, path[index:]) for item in properties]
        if not isinstance(properties, dict) or key not in properties:
            return None
        properties = properties[key]
    return properties


def changed_properties(old: Mapping[str, Any], new: Mapping[str, Any]) -> List[str]:
    """Names of the top-level properties whose resolved values differ."""
    return sorted(key for key in set(old) | set(new) if old.get(key) != new.get(key))


def _active(template: Mapping[str, Any], resolver: Resolver) -> Set[str]:
    return {logical_id for logical_id in template.get("Resources") or {} if resolver.is_active(logical_id)}


def _new_resource(
    identity: StackIdentity,
    logical_id: str,
    resource_type: str,
    properties: Mapping[str, Any],
    generations: Dict[str, int],
) -> PhysicalResource:
    """The next generation of ``logical_id``: named by its primary identifier when the template sets it."""
    generation = generations.get(logical_id, -1) + 1
    generations[logical_id] = generation
    name_property = primary_identifier(resource_type, identity.region)
    name = properties.get(name_property) if name_property else None
    physical_id = new_physical_id(
        identity, logical_id, resource_type, generation, name if isinstance(name, str) else None
    )
    return PhysicalResource(logical_id, resource_type, physical_id, generation)


def classify(
    resource_type: str, before: Mapping[str, Any], after: Mapping[str, Any], region: str = "us-east-1"
) -> Tuple[Optional[Action], Tuple[str, ...], List[str]]:
    """(action, reasons, errors) for a resource of ``resource_type`` whose resolved properties change from
    ``before`` to ``after``: None (no change), UPDATE or REPLACE; errors are changes CloudFormation refuses."""
    changed = changed_properties(before, after)
    if not changed:
        return None, (), []
    if is_custom_resource(resource_type):
        errors = []
        if before.get("ServiceToken") != after.get("ServiceToken"):
            errors.append("CloudFormation refuses to change a custom resource's ServiceToken")
        return Action.UPDATE, tuple(changed), errors
    replacing = [
        "/".join(path)
        for path in create_only_paths(resource_type, region)
        if _value_at(before, path) != _value_at(after, path)
    ]
    if not replacing:
        return Action.UPDATE, tuple(changed), []
    replaced_keys = {path.split("/")[0] for path in replacing}
    reasons = [f"{path} (replacement)" for path in replacing] + [key for key in changed if key not in replaced_keys]
    return Action.REPLACE, tuple(reasons), []


def plan(old: Deployment, new_template: Optional[Mapping[str, Any]], identity: StackIdentity) -> Plan:
    """CloudFormation's changes from ``old`` to ``new_template`` (None: ``cdk destroy``)."""
    new_template = new_template if new_template is not None else EMPTY_TEMPLATE
    old_resources = old.template.get("Resources") or {}
    new_resources = new_template.get("Resources") or {}
    old_resolver = Resolver(old.template, old.resources, identity)
    old_ids = _active(old.template, old_resolver)
    state: Dict[str, PhysicalResource] = {}
    new_resolver = Resolver(new_template, state, identity)
    new_ids = _active(new_template, new_resolver)
    generations = dict(old.generations)
    changes: Dict[str, ResourceChange] = {}
    errors: List[str] = []
    steps: List[Step] = []
    old_graph = dependencies(old.template, old_ids)
    new_graph = dependencies(new_template, new_ids)
    old_properties = {lid: old_resolver.resolve(old_resources[lid].get("Properties") or {}) for lid in old_ids}

    for logical_id in dependency_order(new_template, new_ids):
        resource_type = new_resources[logical_id]["Type"]
        properties = new_resolver.resolve(new_resources[logical_id].get("Properties") or {})
        previous = old.resources.get(logical_id) if logical_id in old_ids else None
        needs = tuple(sorted(new_graph[logical_id]))
        if previous is None:
            action, reasons, refused = Action.CREATE, (), []
        elif previous.resource_type != resource_type:
            action, reasons, refused = Action.REPLACE, (f"type {previous.resource_type} -> {resource_type}",), []
        else:
            action, reasons, refused = classify(resource_type, old_properties[logical_id], properties, identity.region)
        errors.extend(f"{logical_id}: {error}" for error in refused)
        if action is None:
            assert previous is not None
            state[logical_id] = previous
            continue
        changes[logical_id] = ResourceChange(logical_id, resource_type, action, reasons)
        if action is Action.UPDATE:
            assert previous is not None
            state[logical_id] = replace(previous, updates=previous.updates + 1)
            before = old_properties[logical_id]
            steps.append(
                Step(
                    logical_id,
                    resource_type,
                    "Update",
                    action,
                    "update",
                    previous.physical_id,
                    properties,
                    before,
                    needs,
                )
            )
            continue
        if previous is not None and deletes_before_create(previous.resource_type, identity.region):
            old_needs = tuple(sorted(old_graph[logical_id]))
            before = old_properties[logical_id]
            steps.append(
                Step(
                    logical_id,
                    previous.resource_type,
                    "Delete",
                    action,
                    "update",
                    previous.physical_id,
                    before,
                    None,
                    old_needs,
                )
            )
        state[logical_id] = _new_resource(identity, logical_id, resource_type, properties, generations)
        steps.append(
            Step(
                logical_id,
                resource_type,
                "Create",
                action,
                "update",
                state[logical_id].physical_id,
                properties,
                None,
                needs,
            )
        )

    leaving: Dict[str, bool] = {}  # logical id -> whether its old copy is replaced
    for logical_id in old_ids:
        change = changes.get(logical_id)
        replaced = change is not None and change.action is Action.REPLACE
        if logical_id in new_ids and not replaced:
            continue
        if replaced and deletes_before_create(old.resources[logical_id].resource_type, identity.region):
            continue  # deleted before its replacement was created
        leaving[logical_id] = replaced

    for wave, names in enumerate(deletion_waves(old.template, set(leaving))):
        for logical_id in names:
            replaced = leaving[logical_id]
            previous = old.resources[logical_id]
            policy = old_resources[logical_id].get("UpdateReplacePolicy" if replaced else "DeletionPolicy", "Delete")
            if not replaced:
                action = _REMOVAL_ACTIONS.get(policy, Action.DELETE)
                changes[logical_id] = ResourceChange(logical_id, previous.resource_type, action)
            operation = "Retain" if policy in ("Retain", "RetainExceptOnCreate") else "Delete"
            steps.append(
                Step(
                    logical_id,
                    previous.resource_type,
                    operation,
                    changes[logical_id].action,
                    "cleanup",
                    previous.physical_id,
                    old_properties[logical_id],
                    None,
                    tuple(sorted(old_graph[logical_id])),
                    wave,
                )
            )

    ordered = [changes[lid] for lid in dict.fromkeys([step.logical_id for step in steps])]
    return Plan(ordered, steps, errors, Deployment(new_template, state, generations))
