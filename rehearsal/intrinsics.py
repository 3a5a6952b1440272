"""Resolve a template's intrinsic functions the way CloudFormation does, with made-up but deterministic values.

CloudFormation hands a custom resource's handler plain strings: every ``Ref``, ``Fn::GetAtt``, ``Fn::Join``,
``Fn::Sub``, ``Fn::Select``, ``Fn::Split``, ``Fn::If``, ``Fn::FindInMap``, ... is evaluated first, and every scalar
becomes a string (the aws-eks-v2 handler relies on it: ``props.get('Overwrite', 'false').lower()``).
:class:`Resolver` does the same with the physical ids of :class:`PhysicalResource` (made-up, stable for a resource
until it is replaced, then new) and the pseudo parameters of :class:`StackIdentity`.

The values are shaped like the real ones where a template takes them apart (an ARN is ``arn:<partition>:<service>:
<region>:<account>:...``, so ``Fn::Select``/``Fn::Split`` on it work as they do in AWS), but they are not what AWS
would generate. What matters is that they change exactly when CloudFormation's would: a replaced resource gets a
new physical id (and so new ARNs and attributes); an update keeps them, except attributes that are versions of the
resource (:data:`VERSIONED_ATTRIBUTES`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Set

PSEUDO_ACCOUNT = "123456789012"

ID_PREFIXES: Mapping[str, str] = {
    "AWS::EC2::VPC": "vpc",
    "AWS::EC2::Subnet": "subnet",
    "AWS::EC2::SecurityGroup": "sg",
    "AWS::EC2::RouteTable": "rtb",
    "AWS::EC2::InternetGateway": "igw",
    "AWS::EC2::NatGateway": "nat",
    "AWS::EC2::EIP": "eipalloc",
    "AWS::EC2::LaunchTemplate": "lt",
    "AWS::EC2::VPCEndpoint": "vpce",
    "AWS::EC2::FlowLog": "fl",
    "AWS::EC2::PlacementGroup": "pg",
    "AWS::FSx::FileSystem": "fs",
    "AWS::FSx::DataRepositoryAssociation": "dra",
}
"""Resource types whose physical id is an AWS-style id (``vpc-0123...``)."""

VERSIONED_ATTRIBUTES: Mapping[str, Set[str]] = {
    "AWS::EC2::LaunchTemplate": {"LatestVersionNumber", "DefaultVersionNumber"},
}
"""Attributes that change when the resource is updated in place: an update of a launch template's data creates a
new version (EC2 user guide, "Modify a launch template (manage launch template versions)")."""

ARN_FORMATS: Mapping[str, str] = {
    "AWS::StepFunctions::StateMachine": "arn:{partition}:states:{region}:{account}:stateMachine:{name}",
}
"""ARNs whose form is not ``<service>:<region>:<account>:<type>/<id>`` (Step Functions API reference, "Amazon
Resource Names": a state machine's ARN ends ``stateMachine:<name>``)."""

REF_IS_ARN = frozenset({"AWS::StepFunctions::StateMachine"})
"""Resource types whose ``Ref`` is their ARN, not their name (CloudFormation template reference,
AWS::StepFunctions::StateMachine, "Return values": "Ref returns the ARN of the created state machine")."""

NO_VALUE = object()
"""``Ref: AWS::NoValue``: the property is removed."""


def _digest(*parts: Any) -> str:
    return hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()


def is_custom_resource(resource_type: str) -> bool:
    """``Custom::*`` and ``AWS::CloudFormation::CustomResource``."""
    return resource_type.startswith("Custom::") or resource_type == "AWS::CloudFormation::CustomResource"


@dataclass(frozen=True)
class StackIdentity:
    """The stack's name, region and account, and what the pseudo parameters resolve to."""

    name: str
    region: str
    account: str = PSEUDO_ACCOUNT
    partition: str = "aws"
    url_suffix: str = "amazonaws.com"

    @property
    def stack_id(self) -> str:
        """``AWS::StackId``."""
        return (
            f"arn:{self.partition}:cloudformation:{self.region}:{self.account}:stack/{self.name}/"
            f"{uuid.UUID(_digest(self.name)[:32])}"
        )

    def arn(self, resource_type: str, physical_id: str) -> str:
        """A made-up ARN of a resource of ``resource_type`` (``physical_id`` itself when it is an ARN)."""
        if physical_id.startswith("arn:"):
            return physical_id
        if resource_type in ARN_FORMATS:
            return ARN_FORMATS[resource_type].format(
                partition=self.partition, region=self.region, account=self.account, name=physical_id
            )
        _, service, resource = resource_type.split("::")
        service = service.lower()
        region = "" if service == "iam" else self.region
        return f"arn:{self.partition}:{service}:{region}:{self.account}:{resource.lower()}/{physical_id}"


@dataclass(frozen=True)
class PhysicalResource:
    """A resource as CloudFormation knows it: physical id, generation (how often it was replaced) and how often it
    was updated in place."""

    logical_id: str
    resource_type: str
    physical_id: str
    generation: int = 0
    updates: int = 0

    def attribute(self, name: str, identity: StackIdentity) -> str:
        """``Fn::GetAtt [logical_id, name]``."""
        if name in VERSIONED_ATTRIBUTES.get(self.resource_type, ()):
            return str(1 + self.updates)
        if name == "Arn" or name.endswith("Arn"):
            return identity.arn(self.resource_type, self.physical_id)
        if name.endswith(("GroupId", "SecurityGroupId")):
            return f"sg-{_digest(self.physical_id, name)[:17]}"
        if name == "Endpoint":
            return f"https://{_digest(self.physical_id, name)[:32].upper()}.gr7.{identity.region}.eks.amazonaws.com"
        return f"{name[:1].lower()}{name[1:]}-{_digest(self.physical_id, name)[:12]}"


def new_physical_id(
    identity: StackIdentity, logical_id: str, resource_type: str, generation: int, name: Optional[str] = None
) -> str:
    """The physical id CloudFormation gives a new resource: ``name`` when the template names the resource (its
    primary identifier), else a generated one (a request id for custom resources, as the provider framework
    returns; ``<prefix>-<hex>`` for EC2-style ids; ``<stack>-<logical id>-<suffix>`` otherwise)."""
    if name:
        return name
    digest = _digest(identity.name, logical_id, generation)
    if is_custom_resource(resource_type) or resource_type == "AWS::KMS::Key":
        return str(uuid.UUID(digest[:32]))
    if resource_type in ID_PREFIXES:
        return f"{ID_PREFIXES[resource_type]}-{digest[:17]}"
    if resource_type == "AWS::Lambda::LayerVersion":
        return (
            f"arn:{identity.partition}:lambda:{identity.region}:{identity.account}:layer:{logical_id}:{generation + 1}"
        )
    return f"{identity.name}-{logical_id[:40]}-{digest[:12].upper()}"


class ResolutionError(ValueError):
    """A template that CloudFormation would reject, or an intrinsic the rehearsal does not know."""


class Resolver:
    """Evaluates intrinsic functions of ``template`` with the physical resources ``resources``.

    :param template: The CloudFormation template (JSON).
    :param resources: Logical id -> physical resource, for every resource a value may reference.
    :param identity: Stack name, region, account.
    :param parameters: Values of the template's parameters. Default: each parameter's ``Default``.
    """

    def __init__(
        self,
        template: Mapping[str, Any],
        resources: Mapping[str, PhysicalResource],
        identity: StackIdentity,
        parameters: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.template = template
        self.resources = resources
        self.identity = identity
        self.parameters = dict(parameters or {})
        self._conditions: Dict[str, bool] = {}

    # -- conditions -------------------------------------------------------------------------------------------------

    def condition(self, name: str) -> bool:
        """The value of the template's condition ``name``."""
        if name not in self._conditions:
            definitions = self.template.get("Conditions") or {}
            if name not in definitions:
                raise ResolutionError(f"unknown condition {name!r}")
            self._conditions[name] = bool(self.resolve(definitions[name]))
        return self._conditions[name]

    def is_active(self, logical_id: str) -> bool:
        """Whether the resource exists (its ``Condition``, if any, is true)."""
        condition = self.template["Resources"][logical_id].get("Condition")
        return condition is None or self.condition(condition)

    # -- values -----------------------------------------------------------------------------------------------------

    def ref(self, name: str) -> Any:
        """``Ref: name``."""
        pseudo = {
            "AWS::Region": self.identity.region,
            "AWS::AccountId": self.identity.account,
            "AWS::Partition": self.identity.partition,
            "AWS::URLSuffix": self.identity.url_suffix,
            "AWS::StackName": self.identity.name,
            "AWS::StackId": self.identity.stack_id,
            "AWS::NotificationARNs": [],
            "AWS::NoValue": NO_VALUE,
        }
        if name in pseudo:
            return pseudo[name]
        parameters = self.template.get("Parameters") or {}
        if name in parameters:
            if name in self.parameters:
                return self.parameters[name]
            if "Default" not in parameters[name]:
                raise ResolutionError(f"parameter {name!r} has no value")
            return parameters[name]["Default"]
        if name in self.resources:
            resource = self.resources[name]
            if resource.resource_type in REF_IS_ARN:
                return self.identity.arn(resource.resource_type, resource.physical_id)
            return resource.physical_id
        raise ResolutionError(f"Ref to {name!r}, which is neither a parameter nor a known resource")

    def get_att(self, logical_id: str, attribute: str) -> Any:
        """``Fn::GetAtt [logical_id, attribute]``."""
        if logical_id not in self.resources:
            raise ResolutionError(f"Fn::GetAtt of {logical_id!r}, which is not a known resource")
        return self.resources[logical_id].attribute(attribute, self.identity)

    def resolve(self, value: Any) -> Any:
        """``value`` with every intrinsic function evaluated; properties set to ``AWS::NoValue`` are dropped."""
        if isinstance(value, list):
            items = [self.resolve(item) for item in value]
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            handler = _FUNCTIONS.get(key)
            if handler is not None:
                return handler(self, argument)
            if key.startswith("Fn::"):
                raise ResolutionError(f"intrinsic function {key} is not modelled")
        resolved = {key: self.resolve(item) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not NO_VALUE}

    def _sub(self, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else (argument[0], argument[1])
        values = {name: self.resolve(item) for name, item in variables.items()}

        def replace(match: "re.Match[str]") -> str:
            expression = match.group(1)
            if expression.startswith("!"):
                return "${" + expression[1:] + "}"
            if expression in values:
                return str(values[expression])
            if "." in expression and expression.split(".", 1)[0] in self.resources:
                logical_id, attribute = expression.split(".", 1)
                return str(self.get_att(logical_id, attribute))
            return str(self.ref(expression))

        return re.sub(r"\$\{([^}]+)\}", replace, text)


def _join(resolver: Resolver, argument: Any) -> str:
    delimiter, items = argument
    return str(delimiter).join(str(item) for item in resolver.resolve(items))


def _select(resolver: Resolver, argument: Any) -> Any:
    index, items = resolver.resolve(argument[0]), resolver.resolve(argument[1])
    return items[int(index)]


def _split(resolver: Resolver, argument: Any) -> Any:
    return str(resolver.resolve(argument[1])).split(argument[0])


def _if(resolver: Resolver, argument: Any) -> Any:
    name, if_true, if_false = argument
    return resolver.resolve(if_true if resolver.condition(name) else if_false)


def _find_in_map(resolver: Resolver, argument: Any) -> Any:
    name, top, second = (resolver.resolve(item) for item in argument[:3])
    try:
        return resolver.template["Mappings"][name][top][second]
    except KeyError as error:
        raise ResolutionError(f"Fn::FindInMap {name}/{top}/{second}: no such entry") from error


_FUNCTIONS = {
    "Ref": lambda r, a: r.ref(a),
    "Fn::GetAtt": lambda r, a: r.get_att(*(a.split(".", 1) if isinstance(a, str) else r.resolve(a))),
    "Fn::Join": _join,
    "Fn::Sub": lambda r, a: r._sub(a),
    "Fn::Select": _select,
    "Fn::Split": _split,
    "Fn::If": _if,
    "Fn::FindInMap": _find_in_map,
    "Fn::Equals": lambda r, a: r.resolve(a[0]) == r.resolve(a[1]),
    "Fn::Not": lambda r, a: not r.resolve(a[0]),
    "Fn::And": lambda r, a: all(r.resolve(item) for item in a),
    "Fn::Or": lambda r, a: any(r.resolve(item) for item in a),
    "Condition": lambda r, a: r.condition(a),
    "Fn::GetAZs": lambda r, a: [f"{r.identity.region}{zone}" for zone in "abc"],
    "Fn::Base64": lambda r, a: base64.b64encode(str(r.resolve(a)).encode()).decode(),
    "Fn::ToJsonString": lambda r, a: json.dumps(r.resolve(a), separators=(",", ":")),
    "Fn::Length": lambda r, a: len(r.resolve(a)),
}


def as_strings(value: Any) -> Any:
    """``value`` with every scalar turned into the string CloudFormation passes to a custom resource."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return [as_strings(item) for item in value]
    if isinstance(value, dict):
        return {key: as_strings(item) for key, item in value.items()}
    return value


def references(value: Any) -> Set[str]:
    """Names a value refers to: ``Ref`` targets, ``Fn::GetAtt`` resources, ``${Name}``/``${Name.Attr}`` of
    ``Fn::Sub`` (without the Sub's own variables). Pseudo parameters and parameters are included; callers keep
    the names that are resources."""
    found: Set[str] = set()
    if isinstance(value, list):
        for item in value:
            found |= references(item)
    elif isinstance(value, dict):
        for key, argument in value.items():
            if key == "Ref" and isinstance(argument, str):
                found.add(argument)
            elif key == "Fn::GetAtt":
                found.add(argument.split(".", 1)[0] if isinstance(argument, str) else argument[0])
            elif key == "Fn::Sub":
                text, variables = (argument, {}) if isinstance(argument, str) else (argument[0], argument[1])
                for expression in re.findall(r"\$\{([^}!][^}]*)\}", text):
                    name = expression.split(".", 1)[0]
                    if name not in variables:
                        found.add(name)
                found |= references(variables)
            else:
                found |= references(argument)
    return found
