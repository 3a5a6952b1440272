"""TemplateSizeCheck: synth fails, saying why, when a stack's template is over CloudFormation's size limit.

CloudFormation accepts a template of at most 1,000,000 bytes when it is uploaded through S3 (the CDK CLI uploads
every template larger than 51,200 bytes to the bootstrap bucket). CDK itself only warns; a deployment then fails at
``CreateChangeSet``, minutes into ``cdk deploy``. This validation plugin reads every synthesized template and stops
synth instead, naming the stack, its size and its largest resources.

Source: AWS CloudFormation user guide, "CloudFormation quotas" (template body size in an S3 object: 1 MB).
"""

from __future__ import annotations

import json
import os
from typing import List

import jsii
from aws_cdk import (
    IPolicyValidationContext,
    IPolicyValidationPlugin,
    PolicyValidationPluginReport,
    PolicyViolatingResource,
    PolicyViolation,
    Stage,
    Validations,
)
from constructs import Construct

TEMPLATE_SIZE_LIMIT = 1_000_000
"""Bytes of a template CloudFormation accepts from S3."""

RULE = "trainium-eks-template-size"
_MARKER = "TrainiumEksTemplateSizeCheck"


@jsii.implements(IPolicyValidationPlugin)
class TemplateSizeCheck:
    """A CDK validation plugin: every template must stay within :data:`TEMPLATE_SIZE_LIMIT` bytes.

    Register it with :func:`check_template_sizes` (once per app or stage).

    :param limit: The limit in bytes. Default: :data:`TEMPLATE_SIZE_LIMIT`.
    """

    def __init__(self, limit: int = TEMPLATE_SIZE_LIMIT) -> None:
        self.limit = limit

    @property
    def name(self) -> str:
        return "trainium-eks template size"

    @property
    def version(self) -> str:
        return "1.0.0"

    @property
    def rule_ids(self) -> List[str]:
        return [RULE]

    def validate(self, context: IPolicyValidationContext) -> PolicyValidationPluginReport:
        violations = []
        for path in context.template_paths:
            size = os.path.getsize(path)
            if size <= self.limit:
                continue
            resources = json.load(open(path)).get("Resources", {})
            largest = sorted(resources, key=lambda key: -len(json.dumps(resources[key])))[:3]
            violations.append(
                PolicyViolation(
                    rule_name=RULE,
                    description=(
                        f"{os.path.basename(path)} is {size:,} bytes; CloudFormation accepts at most {self.limit:,} "
                        f"(template body in S3), so `cdk deploy` would fail. Largest resources: {', '.join(largest)}"
                    ),
                    fix="Split the stack, or move large manifests out of the template (a job's pods share one pod "
                    "template whatever the node count; many jobs or charts in one stack add up).",
                    violating_resources=[
                        PolicyViolatingResource(resource_logical_id=key, template_path=path, locations=["/"])
                        for key in largest
                    ],
                )
            )
        return PolicyValidationPluginReport(success=not violations, violations=violations)


def check_template_sizes(scope: Construct) -> None:
    """Register :class:`TemplateSizeCheck` on the app or stage of ``scope``, once."""
    stage = Stage.of(scope)
    if stage is None or stage.node.try_find_child(_MARKER) is not None:
        return
    Construct(stage, _MARKER)
    Validations.of(stage).add_plugins(TemplateSizeCheck())
