"""What a resource leaving the stack needs that its template does not say, per resource type.

CloudFormation orders deletions by the template's dependencies only (``DependsOn``, ``Ref``, ``Fn::GetAtt``,
``Fn::Sub``): it deletes a resource once everything leaving the stack that depends on it is gone, and deletes every
resource that is ready at once, in parallel (AWS CloudFormation user guide, "DependsOn attribute": "resources are
deleted in the reverse order of their creation", which only those dependencies fix;
:func:`.cfn_changes.deletion_waves`). A need that is not such a dependency can be deleted first, or at the same time.
The needs declared here:

- **The kubectl handler's network path.** Every ``Custom::AWSCDK-EKS-*`` resource is deleted by the kubectl
  provider's Lambda functions (the handler and its provider framework's ``onEvent``), which the EKS cluster places in
  the private subnets: they reach EKS, Lambda and S3 through the private subnets' route table associations and default
  routes, the NAT gateways with their Elastic IPs, which sit in the public subnets and leave through their route
  table associations and routes to the attached internet gateway, and the S3 gateway endpoint. aws-cdk-lib's
  ``Function`` depends on the selected subnets' ``internetConnectivityEstablished`` (``aws-lambda/lib/function.ts``),
  which is empty for imported subnets (``aws-ec2/lib/vpc.ts``, ``ImportedSubnet``): without those dependencies the
  path goes in the first wave of a destroy and each delete fails after the handler's timeout. The node subnet's own
  path (``NetworkAccelerated*``) is not the handler's.
- **Karpenter's controller policy.** The Karpenter Helm release and every NodePool and EC2NodeClass manifest need the
  controller role's ``AWS::IAM::Policy`` (``KarpenterControllerRoleDefaultPolicy*``): deleting a NodePool or
  EC2NodeClass waits for finalizers the controller runs with that policy (terminating instances, deleting instance
  profiles: aws/karpenter-provider-aws v1.14.1 ``pkg/controllers/nodeclass/controller.go``), and uninstalling the
  release stops the controller.
- **What a retained resource holds.** A retained resource (``DeletionPolicy: Retain``) stays in the account, and keeps
  the subnets, security groups and VPC it references in use (an FSx for Lustre file system keeps its network
  interfaces there): EC2 refuses to delete them (``DependencyViolation``), which fails the destroy, unless they are
  retained too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator, List, Mapping

from rehearsal.intrinsics import references

KUBECTL_HANDLER_TYPE_PREFIX = "Custom::AWSCDK-EKS-"
"""The custom resource types the kubectl provider's functions create, update and delete."""

NETWORK_PATH_TYPES = (
    "AWS::EC2::Route",
    "AWS::EC2::SubnetRouteTableAssociation",
    "AWS::EC2::NatGateway",
    "AWS::EC2::EIP",
    "AWS::EC2::VPCGatewayAttachment",
    "AWS::EC2::VPCEndpoint",
)
"""The types of the network path from the private subnets to the internet and to S3."""

NODE_SUBNET_PREFIX = "NetworkAccelerated"
"""Logical id prefix of the node subnet's resources (``TrainingNetwork``), which the handler does not use."""

KARPENTER_POLICY_PREFIX = "KarpenterControllerRoleDefaultPolicy"
"""Logical id prefix of the Karpenter controller role's default ``AWS::IAM::Policy``."""

KARPENTER_CHART = "karpenter"
"""The Karpenter controller's Helm chart (its CRDs come in ``karpenter-crd``)."""

KARPENTER_KINDS = re.compile(r'"kind"\s*:\s*"(NodePool|EC2NodeClass)"')
"""A NodePool or EC2NodeClass in a manifest's JSON text."""

HELD_TYPES = ("AWS::EC2::Subnet", "AWS::EC2::SecurityGroup", "AWS::EC2::VPC")
"""What a retained resource keeps in use when it references it."""


@dataclass(frozen=True)
class DeleteNeed:
    """``resource`` needs ``needed`` until it has left the account: ``needed`` must not be deleted in an earlier wave
    than ``resource``'s delete, nor in the same one; a retained ``resource`` never leaves, so ``needed`` must not be
    deleted at all. ``why`` says which rule."""

    resource: str
    needed: str
    why: str


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def is_network_path(logical_id: str, resource_type: str) -> bool:
    """Whether ``logical_id`` of ``resource_type`` is on the kubectl handler's path to EKS, Lambda and S3."""
    return resource_type in NETWORK_PATH_TYPES and not logical_id.startswith(NODE_SUBNET_PREFIX)


def needs_karpenter_policy(resource: Mapping[str, Any]) -> bool:
    """Whether deleting ``resource`` needs the Karpenter controller: its Helm release, or a manifest with a NodePool
    or an EC2NodeClass."""
    properties = resource.get("Properties") or {}
    if resource["Type"] == f"{KUBECTL_HANDLER_TYPE_PREFIX}HelmChart":
        return properties.get("Chart") == KARPENTER_CHART
    if resource["Type"] == f"{KUBECTL_HANDLER_TYPE_PREFIX}KubernetesResource":
        return any(KARPENTER_KINDS.search(text) for text in _strings(properties.get("Manifest")))
    return False


def delete_needs(template: Mapping[str, Any], operations: Mapping[str, str]) -> List[DeleteNeed]:
    """The needs of the rules above among the resources of ``template`` leaving the stack (``operations``: logical
    id -> ``Delete`` or ``Retain``): a deleted resource's needs during its delete, a retained resource's needs for as
    long as it stays."""
    resources = template.get("Resources") or {}
    path = [name for name in operations if is_network_path(name, resources[name]["Type"])]
    policies = [name for name in operations if name.startswith(KARPENTER_POLICY_PREFIX)]
    found: List[DeleteNeed] = []
    for name in sorted(operations):
        resource = resources[name]
        if operations[name] == "Retain":
            held = sorted(
                dep
                for dep in references(resource.get("Properties") or {})
                if dep in operations and dep != name and resources[dep]["Type"] in HELD_TYPES
            )
            found.extend(DeleteNeed(name, dep, "EC2 refuses to delete it: DependencyViolation") for dep in held)
            continue
        if resource["Type"].startswith(KUBECTL_HANDLER_TYPE_PREFIX):
            found.extend(DeleteNeed(name, dep, "the kubectl handler's network path") for dep in sorted(path))
        if needs_karpenter_policy(resource):
            found.extend(DeleteNeed(name, dep, "the Karpenter controller's policy") for dep in sorted(policies))
    return found
