#!/usr/bin/env python3
"""The modeled critical path of ``cdk deploy`` of each stack of a cloud assembly: the longest chain of its
CloudFormation dependency graph (``DependsOn``, ``Ref``, ``Fn::GetAtt``, ``Fn::Sub`` references), each resource
weighted by a typical creation time.

    make deploy-path                    # or: python scripts/deploy_path.py cdk.out [STACK ...]

It prints, for each stack alone (CloudFormation deploys stacks one by one), the resources of its critical path with
their minutes, the path's total, and the sum of every resource's minutes (what a deploy would take one at a time).
A model, not a measurement: it shows what serializes the deploy. The weights are the steering project's model's
(``../shared/tools/deploy_model.py``), so that the figures agree with it; an unlisted type weighs
:data:`OTHER_MINUTES`, an unlisted custom resource :data:`CUSTOM_MINUTES`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Dict, List, Mapping, Set, Tuple

MINUTES: Mapping[str, float] = {
    "AWS::EKS::Cluster": 10.0,
    "AWS::EKS::Nodegroup": 5.0,
    "AWS::EKS::Addon": 1.0,
    "AWS::EKS::PodIdentityAssociation": 0.3,
    "AWS::EKS::AccessEntry": 0.3,
    "AWS::FSx::FileSystem": 9.0,
    "AWS::FSx::DataRepositoryAssociation": 5.0,
    "AWS::EFS::FileSystem": 0.5,
    "AWS::EFS::MountTarget": 1.5,
    "AWS::EC2::NatGateway": 2.0,
    "AWS::EC2::VPCEndpoint": 1.0,
    "AWS::KMS::Key": 0.5,
    "AWS::IAM::Role": 0.3,
    "AWS::Lambda::Function": 0.5,
    "AWS::Lambda::LayerVersion": 0.3,
    "AWS::StepFunctions::StateMachine": 0.3,
    "Custom::AWSCDK-EKS-KubernetesResource": 1.0,
    "Custom::AWSCDK-EKS-HelmChart": 3.0,
}
"""Typical creation minutes by resource type."""

CUSTOM_MINUTES = 1.0
OTHER_MINUTES = 0.2
_REFERENCE = re.compile(r'"Ref": "([A-Za-z0-9]+)"|"Fn::GetAtt": \["([A-Za-z0-9]+)"|\$\{([A-Za-z0-9]+)[.}]')


def minutes(resource_type: str) -> float:
    """The weight of a resource of ``resource_type``."""
    if resource_type in MINUTES:
        return MINUTES[resource_type]
    return CUSTOM_MINUTES if resource_type.startswith("Custom::") else OTHER_MINUTES


def dependencies(template: Mapping) -> Dict[str, Set[str]]:
    """Logical id -> the logical ids it depends on (explicitly, or by a reference in its properties)."""
    resources = template.get("Resources", {})
    found = {}
    for logical_id, resource in resources.items():
        explicit = resource.get("DependsOn", [])
        explicit = [explicit] if isinstance(explicit, str) else list(explicit)
        text = json.dumps({key: value for key, value in resource.items() if key != "DependsOn"})
        referenced = [next(group for group in match if group) for match in _REFERENCE.findall(text)]
        found[logical_id] = {d for d in explicit + referenced if d in resources and d != logical_id}
    return found


def critical_path(template: Mapping) -> Tuple[float, List[Tuple[str, str, float]], float]:
    """(minutes of the longest chain, the chain as (logical id, type, minutes) from first to last, the serial sum)."""
    resources = template.get("Resources", {})
    edges = dependencies(template)
    finish: Dict[str, Tuple[float, List[str]]] = {}

    def longest(logical_id: str, visiting: frozenset) -> Tuple[float, List[str]]:
        if logical_id in finish:
            return finish[logical_id]
        if logical_id in visiting:
            raise ValueError(f"dependency cycle through {logical_id}")
        best: Tuple[float, List[str]] = (0.0, [])
        for dependency in sorted(edges[logical_id]):
            candidate = longest(dependency, visiting | {logical_id})
            if candidate[0] > best[0]:
                best = candidate
        own = minutes(resources[logical_id].get("Type", ""))
        finish[logical_id] = (best[0] + own, best[1] + [logical_id])
        return finish[logical_id]

    total, chain = max((longest(logical_id, frozenset()) for logical_id in sorted(resources)), default=(0.0, []))
    path = [(lid, resources[lid].get("Type", ""), minutes(resources[lid].get("Type", ""))) for lid in chain]
    serial = sum(minutes(resource.get("Type", "")) for resource in resources.values())
    return total, path, serial


def main(argv: List[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    cdk_out, wanted = Path(argv[0]), set(argv[1:])
    templates = sorted(cdk_out.glob("*.template.json"))
    if not templates:
        print(f"no *.template.json in {cdk_out}: run make synth first", file=sys.stderr)
        return 2
    for path in templates:
        stack = path.name.split(".")[0]
        if wanted and stack not in wanted:
            continue
        template = json.loads(path.read_text())
        total, chain, serial = critical_path(template)
        print(
            f"{stack}: modeled critical path {total:.1f} min (serial sum {serial:.1f} min, "
            f"{len(template.get('Resources', {}))} resources)"
        )
        for logical_id, resource_type, weight in chain:
            print(f"  {weight:5.1f}  {resource_type:45} {logical_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
