"""The default app's settings: CDK context keys (``cdk.json``, ``-c key=value``) turned into TrainingStack props."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from aws_cdk import Environment
from constructs import Node

from trainium_eks.validation import Problems

CONTEXT_KEYS: Mapping[str, str] = {
    "instance_type": "instanceType",
    "node_count": "nodeCount",
    "accelerated_az_id": "trainiumAzId",
    "kubernetes_version": "kubernetesVersion",
    "lustre_storage_gib": "lustreStorageGiB",
    "data_bucket_name": "dataBucketName",
    "admin_role_arn": "adminRoleArn",
}
"""TrainingStack prop -> context key of the default app. ``region`` and ``account`` set the stack's environment."""

_INTEGER_PROPS = ("node_count", "lustre_storage_gib")


@dataclass(frozen=True)
class AppSettings:
    """What the default app reads from its context.

    :param stack_props: TrainingStack props, already typed.
    :param env: The stack's environment (region from ``region``, account from ``account`` when set).
    """

    stack_props: Dict[str, Any]
    env: Environment


def settings_from_context(node: Node) -> AppSettings:
    """Read and type the context keys; raise one ConfigurationError naming every key that is not usable.

    Context from ``-c key=value`` arrives as strings and from ``cdk.json`` as JSON values, so integers are parsed
    from either, and empty strings mean "not set".
    """
    problems = Problems("default app context (cdk.json / -c key=value)")
    props: Dict[str, Any] = {}
    for prop, key in CONTEXT_KEYS.items():
        value = node.try_get_context(key)
        if value in (None, ""):
            continue
        if prop in _INTEGER_PROPS:
            parsed = _as_int(value)
            if parsed is None:
                problems.add(key, value, "a whole number")
                continue
            value = parsed
        elif prop == "kubernetes_version" and isinstance(value, float):
            value = f"{value:.2f}"
        props[prop] = str(value) if not isinstance(value, int) else value
    region = node.try_get_context("region") or None
    account = node.try_get_context("account") or None
    if region is None:
        problems.add("region", region, "the AWS region to deploy to, such as us-west-2 (synth makes no lookups)")
    problems.raise_if_any()
    return AppSettings(stack_props=props, env=Environment(region=region, account=_optional_str(account)))


def _as_int(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _optional_str(value: Any) -> Optional[str]:
    return None if value in (None, "") else str(value)
