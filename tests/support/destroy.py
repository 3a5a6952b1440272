"""A ``cdk destroy`` of a template as the rehearsal plans it (CloudFormation's delete waves), without running a
handler: what the delete-path tests check with the order promise."""

from __future__ import annotations

from typing import Any, Dict, Optional

from rehearsal.cfn_changes import Deployment, plan
from rehearsal.cluster_model import ClusterModel
from rehearsal.intrinsics import StackIdentity
from rehearsal.promises import ORDER
from rehearsal.scenario import Scenario, ScenarioResult, StepRun

IDENTITY = StackIdentity("Rehearsal", "us-west-2")


def scenario_result(
    old: Dict[str, Any], new: Optional[Dict[str, Any]] = None, identity: StackIdentity = IDENTITY
) -> ScenarioResult:
    """Every step from ``old`` (deployed) to ``new`` (None: ``cdk destroy``) as run, without running a handler."""
    before = plan(Deployment.empty(), old, identity).result
    changes = plan(before, new, identity)
    runs = [StepRun(step) for step in changes.steps]
    return ScenarioResult(
        Scenario("cdk destroy", identity.name, None, None, (ORDER,)),
        identity,
        before,
        changes,
        runs,
        None,
        ClusterModel(),
        ClusterModel(),
    )
