"""Scenarios: deploy one app setting over another, as CloudFormation would plan it.

A :class:`Scenario` names a stack, the settings deployed before (:class:`Variant`, or None: nothing deployed yet)
and after (or None: ``cdk destroy``), and the promises to check. :class:`Rehearsal` synthesizes the templates
(cached per variant), plans the old settings on an empty account first (cached too), then CloudFormation's steps
from there to the new ones (:mod:`.cfn_changes`), and checks every promise (:mod:`.promises`). What the kubectl
handler, the API server and the controllers then do with those steps is not modelled here: the end-to-end tests run
every scenario that can run offline on the real components (``tests/e2e/test_lifecycle.py``).
"""

from __future__ import annotations

import importlib
import json
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from rehearsal.cfn_changes import Deployment, Plan, plan
from rehearsal.handler import HANDLER_TYPES
from rehearsal.intrinsics import Resolver, StackIdentity


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
    :param violations: Promise name -> violations.
    """

    scenario: Scenario
    identity: StackIdentity
    before: Deployment
    plan: Plan
    violations: Dict[str, List[str]] = field(default_factory=dict)

    @property
    def new_template(self) -> Mapping[str, Any]:
        """The template deployed by the scenario (empty for ``cdk destroy``)."""
        return self.plan.result.template

    def failed_promises(self) -> Dict[str, List[str]]:
        """The promises with violations."""
        return {name: found for name, found in self.violations.items() if found}


def planned(
    scenario: Scenario, identity: StackIdentity, before: Deployment, new: Optional[Mapping[str, Any]]
) -> ScenarioResult:
    """The result of ``scenario``: CloudFormation's plan from ``before`` to ``new`` (None: ``cdk destroy``)."""
    return ScenarioResult(scenario, identity, before, plan(before, new, identity))


class Rehearsal:
    """Runs scenarios, caching templates per variant and scenario results per (stack, old, new).

    :param sources: Stack name -> how to build it for a variant.
    """

    def __init__(self, sources: Mapping[str, TemplateSource]) -> None:
        self.sources = dict(sources)
        self._templates: Dict[Tuple[str, Variant], Tuple[Mapping[str, Any], str]] = {}
        self._results: Dict[Tuple[str, Optional[Variant], Optional[Variant]], ScenarioResult] = {}

    def template(self, stack: str, variant: Variant) -> Tuple[Mapping[str, Any], str]:
        """(template, region) of ``stack`` built with ``variant``."""
        key = (stack, variant)
        if key not in self._templates:
            self._templates[key] = self.sources[stack](variant)
        return self._templates[key]

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
        before = Deployment.empty()
        if scenario.old is not None:
            before = self.deployed(scenario.stack, scenario.old).plan.result
        variant = scenario.new or scenario.old
        if variant is None:
            raise ValueError(f"scenario {scenario.name!r} has neither an old nor a new variant")
        region = self.template(scenario.stack, variant)[1]
        new_template = self.template(scenario.stack, scenario.new)[0] if scenario.new else None
        return planned(scenario, StackIdentity(scenario.stack, region), before, new_template)


def resolver_of(result: ScenarioResult, *, old: bool = False) -> Resolver:
    """The values CloudFormation passes in the deployment after the scenario (or the ``old`` one, before it)."""
    deployment = result.before if old else result.plan.result
    return Resolver(deployment.template, deployment.resources, result.identity)


def deployed_resources(result: ScenarioResult, *, old: bool = False) -> Iterator[Tuple[str, str, Dict[str, Any]]]:
    """(logical id, type, resolved properties) of every resource of the deployment after the scenario (or the
    ``old`` one, before it), its conditions applied."""
    deployment = result.before if old else result.plan.result
    resolver = resolver_of(result, old=old)
    for logical_id, resource in (deployment.template.get("Resources") or {}).items():
        if logical_id in deployment.resources:
            yield logical_id, resource["Type"], resolver.resolve(resource.get("Properties") or {})


def desired_objects(result: ScenarioResult, *, old: bool = False) -> List[Tuple[str, Dict[str, Any]]]:
    """(logical id, object) of every Kubernetes object the new (or ``old``) template applies."""
    return [
        (logical_id, obj)
        for logical_id, resource_type, properties in deployed_resources(result, old=old)
        if resource_type == HANDLER_TYPES[0]
        for obj in json.loads(properties["Manifest"])
    ]
