"""A ``cdk destroy`` of a template as the rehearsal plans it (CloudFormation's delete waves): what the delete-path
tests check with the order promise."""

from __future__ import annotations

from typing import Any, Dict, Optional

from rehearsal.cfn_changes import Deployment, plan
from rehearsal.intrinsics import StackIdentity
from rehearsal.promises import ORDER
from rehearsal.scenario import Scenario, ScenarioResult, planned

IDENTITY = StackIdentity("Rehearsal", "us-west-2")


def scenario_result(
    old: Dict[str, Any], new: Optional[Dict[str, Any]] = None, identity: StackIdentity = IDENTITY
) -> ScenarioResult:
    """Every step from ``old`` (deployed) to ``new`` (None: ``cdk destroy``)."""
    before = plan(Deployment.empty(), old, identity).result
    return planned(Scenario("cdk destroy", identity.name, None, None, (ORDER,)), identity, before, new)
