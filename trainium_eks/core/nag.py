"""Acknowledgements of cdk-nag (AwsSolutions) findings, recorded in code next to the resource they concern.

cdk-nag 3 runs as a CDK validation plugin and matches an acknowledgement only by the full finding id, for instance
``AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore]``.
Acknowledging a construct covers its descendants. Every acknowledgement carries the reason it is acceptable.
"""

from __future__ import annotations

from typing import Any, Iterable

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

from trainium_eks.core.cfn_text import compact_json

AWS_MANAGED_POLICY = "Policy::arn:<AWS::Partition>:iam::aws:policy/{}"
"""Finding id of AwsSolutions-IAM4 for an AWS managed policy (name with its path, e.g. service-role/...)."""


def acknowledge(scope: IConstruct, rule: str, reason: str, *findings: str) -> None:
    """Acknowledge ``rule`` (``AwsSolutions-IAM4``) for ``findings`` (none: a rule without finding ids) under
    ``scope``, with ``reason``."""
    ids = [f"AwsSolutions::{rule}[{finding}]" for finding in findings] or [f"AwsSolutions::{rule}"]
    Validations.of(scope).acknowledge(*(Acknowledgment(id=id_, reason=reason) for id_ in ids))


def managed_policy_findings(policy_names: Iterable[str]) -> list:
    """The AwsSolutions-IAM4 finding ids of AWS managed policies."""
    return [AWS_MANAGED_POLICY.format(name) for name in policy_names]


def token_finding(kind: str, value: Any) -> str:
    """The finding id cdk-nag derives from a CloudFormation expression (compact JSON, as ``JSON.stringify``)."""
    return f"{kind}::{compact_json(value)}"
