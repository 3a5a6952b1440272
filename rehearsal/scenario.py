"""Scenarios: deploy one app setting over another, step by step, the way CloudFormation and the handler would.

A :class:`Scenario` names a stack, the settings deployed before (:class:`Variant`, or None: nothing deployed yet)
and after (or None: ``cdk destroy``), and the promises to check. :class:`Rehearsal` synthesizes the templates
(cached per variant), deploys the old settings on an empty account first (cached too), plans CloudFormation's
steps (:mod:`.cfn_changes`), and runs them: an ``AWS::EKS::Cluster`` step creates or deletes a cluster of the model
(:mod:`.cluster_model`); a ``Custom::AWSCDK-EKS-KubernetesResource`` or ``Custom::AWSCDK-EKS-HelmChart`` step runs
the real handler with the CloudFormation event (:mod:`.handler`). A handler that fails stops the scenario where
CloudFormation would stop and roll back (the rollback is not rehearsed). Then every promise is checked
(:mod:`.promises`).
"""

from __future__ import annotations

import importlib
import json
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from rehearsal.cfn_changes import Deployment, Plan, Step, plan
from rehearsal.cluster_model import ClusterModel
from rehearsal.handler import HandlerWorkspace, Invocation
from rehearsal.intrinsics import Resolver, StackIdentity, as_strings

HANDLER_TYPES = (
    "Custom::AWSCDK-EKS-KubernetesResource",
    "Custom::AWSCDK-EKS-HelmChart",
    "Custom::AWSCDK-EKS-KubernetesObjectValue",
)
"""Custom resources whose steps run the kubectl handler (its ``apply``, ``helm`` and ``get`` modules)."""

CLUSTER_TYPE = "AWS::EKS::Cluster"


@dataclass(frozen=True)
class Patch:
    """Replace ``target`` (``package.module.attribute``) by ``change(current value)`` while a variant is built."""

    target: str
    change: Callable[[Any], Any]
    description: str

    @contextmanager
    def applied(self) -> Iterator[None]:
        """The patch, undone on exit."""
        module_name, _, attribute = self.target.rpartition(".")
        module = importlib.import_module(module_name)
        original = getattr(module, attribute)
        setattr(module, attribute, self.change(original))
        try:
            yield
        finally:
            setattr(module, attribute, original)


@dataclass(frozen=True)
class Variant:
    """One setting of an app: context values (as ``cdk synth -c key=value`` gives them) and patches.

    :param label: How tables name it.
    :param context: (key, value) pairs. Default: none (cdk.json's).
    :param patches: Changes to the code the app is built from. Default: none.
    """

    label: str
    context: Tuple[Tuple[str, Any], ...] = ()
    patches: Tuple[Patch, ...] = ()

    @contextmanager
    def patched(self) -> Iterator[None]:
        """Every patch applied, undone on exit."""
        with ExitStack() as stack:
            for patch in self.patches:
                stack.enter_context(patch.applied())
            yield


TemplateSource = Callable[[Variant], Tuple[Mapping[str, Any], str]]
"""Builds a stack for a variant: (template, region)."""


@dataclass
class StepRun:
    """A step of the plan as it ran: the handler's invocation for handler steps, a note for cluster steps."""

    step: Step
    invocation: Optional[Invocation] = None
    note: str = ""


@dataclass(frozen=True)
class Promise:
    """A property every run of a scenario must have: ``check`` returns the violations."""

    name: str
    check: Callable[["ScenarioResult"], List[str]]


@dataclass(frozen=True)
class Scenario:
    """Deploy ``new`` over ``old`` (None: nothing deployed / ``cdk destroy``) and check ``promises``."""

    name: str
    stack: str
    old: Optional[Variant]
    new: Optional[Variant]
    promises: Tuple[Promise, ...]


@dataclass
class ScenarioResult:
    """What a scenario did.

    :param scenario: The scenario.
    :param identity: The stack's name, region, account.
    :param before: The deployment before (empty for a fresh deploy).
    :param plan: CloudFormation's changes and steps.
    :param runs: The steps that ran, in order.
    :param stopped_at: Index of the step where CloudFormation would stop (a failed handler), or None.
    :param cluster_before: The clusters before.
    :param cluster_after: The clusters after.
    :param violations: Promise name -> violations.
    """

    scenario: Scenario
    identity: StackIdentity
    before: Deployment
    plan: Plan
    runs: List[StepRun]
    stopped_at: Optional[int]
    cluster_before: ClusterModel
    cluster_after: ClusterModel
    violations: Dict[str, List[str]] = field(default_factory=dict)

    @property
    def new_template(self) -> Mapping[str, Any]:
        """The template deployed by the scenario (empty for ``cdk destroy``)."""
        return self.plan.result.template

    @property
    def commands(self) -> List[Tuple[StepRun, Dict[str, Any]]]:
        """Every command the handler ran, with its step."""
        return [(run, command) for run in self.runs if run.invocation for command in run.invocation.commands]

    def failed_promises(self) -> Dict[str, List[str]]:
        """The promises with violations."""
        return {name: found for name, found in self.violations.items() if found}


def custom_resource_event(step: Step, identity: StackIdentity, index: int) -> Dict[str, Any]:
    """The CloudFormation event of a custom resource step, with every value a string as CloudFormation sends it."""
    properties = as_strings(dict(step.properties))
    request_id = (
        step.physical_id
        if step.operation == "Create"
        else str(uuid.uuid5(uuid.NAMESPACE_URL, f"{identity.stack_id}/{step.logical_id}/{step.operation}/{index}"))
    )
    event: Dict[str, Any] = {
        "RequestType": step.operation,
        "ServiceToken": properties.get("ServiceToken", ""),
        "ResponseURL": "https://cloudformation-custom-resource-response.rehearsal.invalid/",
        "StackId": identity.stack_id,
        "RequestId": request_id,
        "LogicalResourceId": step.logical_id,
        "ResourceType": step.resource_type,
        "ResourceProperties": properties,
    }
    if step.operation in ("Update", "Delete"):
        event["PhysicalResourceId"] = step.physical_id
    if step.operation == "Update":
        event["OldResourceProperties"] = as_strings(dict(step.old_properties or {}))
    return event


class Rehearsal:
    """Runs scenarios, caching templates per variant and scenario results per (stack, old, new).

    :param sources: Stack name -> how to build it for a variant.
    """

    def __init__(self, sources: Mapping[str, TemplateSource]) -> None:
        self.sources = dict(sources)
        self._templates: Dict[Tuple[str, Variant], Tuple[Mapping[str, Any], str]] = {}
        self._results: Dict[Tuple[str, Optional[Variant], Optional[Variant]], ScenarioResult] = {}
        self._workspaces: Dict[str, HandlerWorkspace] = {}

    def close(self) -> None:
        """Remove the handler workspaces."""
        for workspace in self._workspaces.values():
            workspace.close()
        self._workspaces.clear()

    def __enter__(self) -> "Rehearsal":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def template(self, stack: str, variant: Variant) -> Tuple[Mapping[str, Any], str]:
        """(template, region) of ``stack`` built with ``variant``."""
        key = (stack, variant)
        if key not in self._templates:
            self._templates[key] = self.sources[stack](variant)
        return self._templates[key]

    def _workspace(self, region: str) -> HandlerWorkspace:
        if region not in self._workspaces:
            self._workspaces[region] = HandlerWorkspace(region)
        return self._workspaces[region]

    def run(self, scenario: Scenario) -> ScenarioResult:
        """Run ``scenario`` (once per stack, old and new variant; the promises are checked on every call)."""
        key = (scenario.stack, scenario.old, scenario.new)
        if key not in self._results:
            self._results[key] = self._execute(scenario)
        result = replace(self._results[key], scenario=scenario)
        result.violations = {promise.name: promise.check(result) for promise in scenario.promises}
        return result

    def deployed(self, stack: str, variant: Variant) -> ScenarioResult:
        """The fresh deploy of ``variant``."""
        return self.run(Scenario(f"deploy {variant.label}", stack, None, variant, ()))

    def _execute(self, scenario: Scenario) -> ScenarioResult:
        if scenario.old is None:
            before, cluster_before = Deployment.empty(), ClusterModel()
        else:
            deployed = self.deployed(scenario.stack, scenario.old)
            before, cluster_before = deployed.plan.result, deployed.cluster_after
        variant = scenario.new or scenario.old
        if variant is None:
            raise ValueError(f"scenario {scenario.name!r} has neither an old nor a new variant")
        region = self.template(scenario.stack, variant)[1]
        new_template = self.template(scenario.stack, scenario.new)[0] if scenario.new else None
        identity = StackIdentity(scenario.stack, region)
        changes = plan(before, new_template, identity)
        workspace = self._workspace(region)
        model = cluster_before.copy()
        runs: List[StepRun] = []
        stopped_at: Optional[int] = None
        for index, step in enumerate(changes.steps):
            run = StepRun(step)
            runs.append(run)
            if step.resource_type == CLUSTER_TYPE and step.operation == "Create":
                model.create_cluster(step.physical_id)
                run.note = f"cluster {step.physical_id} created"
            elif step.resource_type == CLUSTER_TYPE and step.operation == "Delete":
                model.delete_cluster(step.physical_id)
                run.note = f"cluster {step.physical_id} deleted with everything in it"
            elif step.resource_type in HANDLER_TYPES and step.operation in ("Create", "Update", "Delete"):
                model.save(workspace.cluster_file)
                run.invocation = workspace.invoke(custom_resource_event(step, identity, index))
                model = ClusterModel.load(workspace.cluster_file)
                if not run.invocation.succeeded:
                    stopped_at = index
                    break
        return ScenarioResult(scenario, identity, before, changes, runs, stopped_at, cluster_before, model)


def desired_objects(result: ScenarioResult, *, old: bool = False) -> List[Tuple[str, Dict[str, Any]]]:
    """(logical id, object) of every Kubernetes object the new (or ``old``) template applies."""
    template = result.before.template if old else result.new_template
    resources = result.before.resources if old else result.plan.result.resources
    resolver = Resolver(template, resources, result.identity)
    found: List[Tuple[str, Dict[str, Any]]] = []
    for logical_id, resource in (template.get("Resources") or {}).items():
        if resource["Type"] != HANDLER_TYPES[0] or logical_id not in resources:
            continue
        manifest = resolver.resolve(resource["Properties"]["Manifest"])
        found.extend((logical_id, obj) for obj in json.loads(manifest))
    return found


def desired_releases(result: ScenarioResult, *, old: bool = False) -> List[Tuple[str, str, str]]:
    """(logical id, namespace, release) of every Helm release the new (or ``old``) template installs."""
    template = result.before.template if old else result.new_template
    resources = result.before.resources if old else result.plan.result.resources
    resolver = Resolver(template, resources, result.identity)
    found = []
    for logical_id, resource in (template.get("Resources") or {}).items():
        if resource["Type"] == HANDLER_TYPES[1] and logical_id in resources:
            properties = resolver.resolve(resource["Properties"])
            found.append((logical_id, str(properties.get("Namespace", "default")), str(properties["Release"])))
    return found
