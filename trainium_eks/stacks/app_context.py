"""The default app's settings: CDK context keys (``cdk.json``, ``cdk.context.json``, ``-c key=value``) checked and
turned into TrainiumEksStack props.

Context from ``-c key=value`` arrives as strings, from ``cdk.json`` as JSON values. Every key is checked for its
type and value before anything is built: ``region`` first and on its own (other checks depend on it), then every
other key, and one ``ConfigurationError`` lists every problem, an unknown key (with the nearest known one) included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from aws_cdk import Duration, Environment
from constructs import Node

from trainium_eks.constructs.cluster import ADMIN_PRINCIPAL_ARN, NETWORK_POLICY_MODES, check_public_endpoint_cidrs
from trainium_eks.constructs.dns_firewall import DnsFirewallMode, check_domains
from trainium_eks.constructs.node_provisioning import NodeProvisioning
from trainium_eks.constructs.training_node_group import DEFAULT_INSTANCE_TYPE as TRAINIUM_INSTANCE_TYPE
from trainium_eks.core.validation import Problems, bucket_name_problem, is_integer, nearest, whole_number_hint
from trainium_eks.facts.catalog import INSTANCE_CATALOG, default_az_id
from trainium_eks.facts.regions import AZ_IDS_BY_REGION, NODE_AZ_ID_BY_REGION, partition_of
from trainium_eks.facts.versions import KUBERNETES_VERSIONS
from trainium_eks.stacks.composer_training_stack import DEFAULT_INSTANCE_TYPE as COMPOSER_INSTANCE_TYPE
from trainium_eks.stacks.composer_training_stack import NODE_TYPES as COMPOSER_NODE_TYPES
from trainium_eks.stacks.kubeflow_training_stack import ACCELERATED_NODE_TYPES, DEFAULT_CPU_INSTANCE_TYPE
from trainium_eks.stacks.training_cluster_stack import NodeTypes
from trainium_eks.stacks.trainium_eks_stack import SEED_NODE_TYPES

STACKS = ("TrainiumEks", "KubeflowTraining", "ComposerTraining")
"""The stacks of the default app, in the order it builds them; each is deployable by name."""

SHARED_KEYS: Mapping[str, str] = {
    "kubernetes_version": "kubernetesVersion",
    "admin_role_arn": "adminRoleArn",
    "provisioning": "provisioning",
    "idle_timeout": "idleMinutes",
    "preflight": "preflight",
    "public_endpoint_cidrs": "publicEndpointCidrs",
    "dns_firewall": "dnsFirewall",
    "dns_allowed_domains": "dnsAllowedDomains",
    "kubectl_invocation_alarm": "kubectlInvocationAlarm",
    "network_policy_mode": "networkPolicyMode",
}
"""Settings of every stack: prop -> context key."""

STACK_KEYS: Mapping[str, Mapping[str, str]] = {
    "TrainiumEks": {
        "instance_type": "instanceType",
        "node_count": "nodeCount",
        "availability_zone_id": "trainiumAzId",
        "lustre_storage_gib": "lustreStorageGiB",
        "data_bucket_name": "dataBucketName",
        "data_bucket_prefix": "dataBucketPrefix",
        "data_export_prefix": "dataExportPrefix",
    },
    "KubeflowTraining": {
        "availability_zone_id": "kubeflowAzId",
        "cpu_node_count": "kubeflowCpuNodes",
        "accelerated_instance_type": "kubeflowAcceleratedType",
        "accelerated_node_count": "kubeflowAcceleratedNodes",
    },
    "ComposerTraining": {
        "instance_type": "composerInstanceType",
        "node_count": "composerNodeCount",
        "availability_zone_id": "composerAzId",
    },
}
"""Settings of one stack: prop -> context key."""

STACK_INSTANCE_TYPES: Mapping[str, Tuple[Tuple[str, Optional[str]], ...]] = {
    "TrainiumEks": (("instance_type", TRAINIUM_INSTANCE_TYPE),),
    "KubeflowTraining": (("cpu_instance_type", DEFAULT_CPU_INSTANCE_TYPE), ("accelerated_instance_type", None)),
    "ComposerTraining": (("instance_type", COMPOSER_INSTANCE_TYPE),),
}
"""Each stack's instance-type props and their defaults: its default AZ ID must offer them."""

CONTEXT_KEYS: Mapping[str, str] = {**STACK_KEYS["TrainiumEks"], **SHARED_KEYS}
"""TrainiumEksStack prop -> context key of the default app (the names its error messages use)."""

ENVIRONMENT_KEYS = ("region", "account", "stacks")
KNOWN_KEYS = (*SHARED_KEYS.values(), *(key for keys in STACK_KEYS.values() for key in keys.values()), *ENVIRONMENT_KEYS)

CDK_KEYS = ("cli-telemetry",)
"""Context keys of the CDK CLI itself that carry no ':' and no '@' (feature flags start with '@', the CLI's and the
context lookups' own keys hold a ':')."""

_INTEGER_KEYS = (
    "nodeCount",
    "lustreStorageGiB",
    "kubeflowCpuNodes",
    "kubeflowAcceleratedNodes",
    "composerNodeCount",
    "idleMinutes",
)
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")
AZ_KEYS: Mapping[str, str] = {stack: keys["availability_zone_id"] for stack, keys in STACK_KEYS.items()}
"""Each stack's AZ ID key: empty or unset means the region's default (:data:`NODE_AZ_ID_BY_REGION`)."""

_OPTIONAL_KEYS = (
    "account",
    "dataBucketName",
    "dataBucketPrefix",
    "dataExportPrefix",
    "adminRoleArn",
    "kubeflowAcceleratedType",
    "idleMinutes",
    "publicEndpointCidrs",
    "dnsAllowedDomains",
    *AZ_KEYS.values(),
)
"""Keys where an empty string means "not set"."""

_NODE_TYPES_BY_KEY: Mapping[str, NodeTypes] = {
    "instanceType": SEED_NODE_TYPES,
    "kubeflowAcceleratedType": ACCELERATED_NODE_TYPES,
    "composerInstanceType": COMPOSER_NODE_TYPES,
}
"""The stacks' own rules for the instance-type keys, checked with every other key so that one message lists all."""


@dataclass(frozen=True)
class AppSettings:
    """What the default app reads from its context.

    :param props: Props of each stack, already typed, by stack name.
    :param env: The stacks' environment (region from ``region``, account from ``account`` when set).
    :param stacks: The stacks to build (``stacks``: default all of :data:`STACKS`).
    """

    props: Dict[str, Dict[str, Any]]
    env: Environment
    stacks: Tuple[str, ...] = STACKS

    def setting_names(self, stack: str) -> Dict[str, str]:
        """How the stack's props are called in error messages: their context keys."""
        return {**STACK_KEYS[stack], **SHARED_KEYS}


def settings_from_context(node: Node) -> AppSettings:
    """Read and check every context key; raise one ConfigurationError naming every key that is not usable."""
    context = node.get_all_context()
    problems = Problems("default app context (cdk.json / cdk.context.json / -c key=value)")
    _check_unknown_keys(problems, context)
    region = _region(problems, context.get("region"))
    account = context.get("account")
    if account not in (None, "") and not (isinstance(account, str) and account.isdigit() and len(account) == 12):
        problems.add(
            "account",
            account,
            "12 digits, as a string (in cdk.json in quotes: a JSON number loses leading zeros)",
        )
    stacks = _stacks(problems, context.get("stacks"))
    parsed: Dict[str, Any] = {}
    for key in KNOWN_KEYS:
        value = context.get(key)
        if key in ENVIRONMENT_KEYS or value is None or (key in _OPTIONAL_KEYS and value == ""):
            continue
        typed = _parse(problems, key, value, region)
        if typed is not None:
            parsed[key] = typed
    props = {
        stack: {prop: parsed[key] for prop, key in {**STACK_KEYS[stack], **SHARED_KEYS}.items() if key in parsed}
        for stack in STACKS
    }
    for stack in stacks:
        if region is not None and AZ_KEYS[stack] not in parsed:
            _default_az_id(problems, AZ_KEYS[stack], region, props[stack], stack)
    problems.raise_if_any()
    return AppSettings(props=props, env=Environment(region=region, account=account or None), stacks=stacks)


def _default_az_id(problems: Problems, key: str, region: str, props: Dict[str, Any], stack: str) -> None:
    """The stack's AZ ID when ``key`` is not set: the AZ of its default instance types (the region's default, or the
    first of its AZ IDs that the catalog knows to offer them: :func:`~trainium_eks.facts.catalog.default_az_id`), moved
    only when the stack's types are not offered there; or a problem naming the key and the region's AZ IDs."""
    defaults = [default for _, default in STACK_INSTANCE_TYPES[stack] if default]
    types = [props.get(prop, default) for prop, default in STACK_INSTANCE_TYPES[stack]]
    default = default_az_id(region, [name for name in types if name], default_az_id(region, defaults))
    if default is not None:
        props["availability_zone_id"] = default
        return
    problems.add(
        key,
        "",
        f"the AZ ID of the stack's nodes in {region}, one of {', '.join(AZ_IDS_BY_REGION[region])} (the library has a "
        f"default only in {', '.join(NODE_AZ_ID_BY_REGION)}; `aws ec2 describe-instance-type-offerings "
        f"--location-type availability-zone-id --region {region}` shows which offer your instance type)",
    )


def _stacks(problems: Problems, value: Any) -> Tuple[str, ...]:
    """The stacks to build: all by default, else the comma-separated names of ``stacks``."""
    if value in (None, ""):
        return STACKS
    names = tuple(name.strip() for name in value.split(",")) if isinstance(value, str) else ()
    if not names or any(name not in STACKS for name in names):
        hints = "".join(nearest(name, STACKS) for name in names if name not in STACKS)
        problems.add("stacks", value, f"stack names separated by commas, of {', '.join(STACKS)}{hints}")
        return STACKS
    return tuple(name for name in STACKS if name in names)


def _check_unknown_keys(problems: Problems, context: Mapping[str, Any]) -> None:
    """Record every key of ``context`` that is not a setting of the app, with the nearest one and all of them."""
    for key in sorted(context):
        if key in KNOWN_KEYS or key in CDK_KEYS or key.startswith("@") or ":" in key:
            continue
        hint = nearest(key, KNOWN_KEYS, cutoff=0.6)
        problems.add(key, context[key], f"not a setting of the default app{hint}; the keys are {', '.join(KNOWN_KEYS)}")


def _region(problems: Problems, region: Any) -> Optional[str]:
    """The region, or None (with a problem) when it is missing or not one the library knows."""
    if isinstance(region, str) and region in AZ_IDS_BY_REGION:
        return region
    hint = nearest(region, list(AZ_IDS_BY_REGION))
    problems.add(
        "region",
        region,
        f"a region the library knows the AZ IDs of (synth makes no lookups){hint}: {', '.join(AZ_IDS_BY_REGION)}",
    )
    return None


def _parse(problems: Problems, key: str, value: Any, region: Optional[str]) -> Any:
    """The typed value of ``key``, or None with a problem recorded."""
    if key in _INTEGER_KEYS:
        number = _as_int(value)
        if number is None:
            problems.add(key, value, f"a whole number{whole_number_hint(value) or ' (such as 4)'}")
        elif key == "idleMinutes":
            return Duration.minutes(number)
        return number
    if key in ("preflight", "kubectlInvocationAlarm"):
        if value in (True, False) or value in ("true", "false"):
            return value in (True, "true")
        problems.add(key, value, f"true or false{nearest(value, ['true', 'false'])}")
        return None
    if key == "publicEndpointCidrs":
        return _public_endpoint_cidrs(problems, key, value)
    if key == "dnsAllowedDomains":
        domains = [part.strip() for part in value.split(",")] if isinstance(value, str) else value
        before = len(list(problems))
        checked = check_domains(problems, key, domains)
        return tuple(checked) if len(list(problems)) == before else None
    if key == "networkPolicyMode":
        if value not in NETWORK_POLICY_MODES:
            problems.add(key, value, f"one of {', '.join(NETWORK_POLICY_MODES)}{nearest(value, NETWORK_POLICY_MODES)}")
            return None
        return value
    for enum_key, enum_type in (("provisioning", NodeProvisioning), ("dnsFirewall", DnsFirewallMode)):
        if key == enum_key:
            choices = [mode.value for mode in enum_type]
            if value not in choices:
                problems.add(key, value, f"one of {', '.join(choices)}{nearest(value, choices)}")
                return None
            return enum_type(value)
    if not isinstance(value, str) or not value or value != value.strip():
        problems.add(
            key, value, f"a string without surrounding spaces{_example(key)}{_string_hint(key, value, region)}"
        )
        return None
    if key in _NODE_TYPES_BY_KEY and value in INSTANCE_CATALOG:
        if not _NODE_TYPES_BY_KEY[key].accepts(problems, key, INSTANCE_CATALOG[value]):
            return None
    if key == "dataBucketName":
        reason = bucket_name_problem(value)
        if reason:
            problems.add(key, value, f"the name of an existing S3 bucket: {reason}")
            return None
    if key == "adminRoleArn":
        match = ADMIN_PRINCIPAL_ARN.fullmatch(value)
        if match is None:
            problems.add(
                key,
                value,
                "an IAM role ARN with its path (arn:aws:iam::123456789012:role/Admin) or IAM user ARN; "
                "`python -m trainium_eks admin-role --save` finds yours",
            )
            return None
        if region and match.group("partition") != partition_of(region):
            problems.add(key, value, f"an ARN of partition {partition_of(region)}, the partition of region {region}")
            return None
    return value


def _public_endpoint_cidrs(problems: Problems, key: str, value: Any) -> Optional[Tuple[str, ...]]:
    """The CIDR blocks of ``publicEndpointCidrs``: a string of blocks separated by commas (``-c``) or a JSON list of
    strings (cdk.json); an empty list means not set. None, with one problem naming every bad block, otherwise."""
    if isinstance(value, str):
        cidrs: Any = [part.strip() for part in value.split(",")]
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        cidrs = list(value)
    else:
        cidrs = value
    if cidrs == []:
        return None
    if not check_public_endpoint_cidrs(problems, key, cidrs):
        return None
    return tuple(cidrs)


def _string_hint(key: str, value: Any, region: Optional[str]) -> str:
    """The string ``value`` (a number, or a string with surrounding spaces) most likely means for ``key``: the nearest
    choice of the keys that have a list of them, else its text when ``key`` takes that; empty when there is none."""
    choices = {
        "kubernetesVersion": KUBERNETES_VERSIONS,
        **{name: list(INSTANCE_CATALOG) for name in _NODE_TYPES_BY_KEY},
        **{name: AZ_IDS_BY_REGION.get(region or "", ()) for name in AZ_KEYS.values()},
    }
    if key in choices:
        return nearest(value, choices[key])
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        return ""
    text = str(value).strip()
    scratch = Problems("")
    _parse(scratch, key, text, region)
    return "" if scratch else f" (did you mean {text!r}?)"


def _example(key: str) -> str:
    examples = {"kubernetesVersion": '"1.36"', "instanceType": '"trn1.32xlarge"', "trainiumAzId": '"usw2-az4"'}
    if key in examples:
        return f", such as {examples[key]} (in cdk.json in quotes: a JSON number is refused)"
    return ""


def _as_int(value: Any) -> Optional[int]:
    if is_integer(value):
        return value
    if isinstance(value, str) and _WHOLE_NUMBER.fullmatch(value.strip()):
        return int(value.strip())
    return None
