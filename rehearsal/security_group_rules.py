"""Security group rules as EC2 holds them: one rule per (group, direction, protocol, ports, peer), whatever
CloudFormation resource declared it.

``AuthorizeSecurityGroupIngress`` (and ``...Egress``) refuses a rule the group already has, with
``InvalidPermission.Duplicate`` ("The specified inbound or outbound rule already exists for that security group";
Amazon EC2 API Reference, Error codes, https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html);
the description is not part of a rule's identity. CloudFormation creates a resource's replacement, and a resource
under a new logical ID, in the update phase and deletes the old one only in the cleanup phase
(:mod:`.cfn_changes`), so a rule that moves to another logical ID, or whose logical ID is reused for another peer
while the old peer's rule moves on, is created while its twin still stands: the update fails and rolls back.

:func:`duplicate_rules` finds those creations in a plan. Rules inline in an ``AWS::EC2::SecurityGroup``
(``SecurityGroupIngress``, ``SecurityGroupEgress``) count as standing for the group they are in.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from rehearsal.intrinsics import Resolver
from rehearsal.scenario import ScenarioResult, deployed_resources, resolver_of

GROUP = "AWS::EC2::SecurityGroup"

RULE_TYPES = {"AWS::EC2::SecurityGroupIngress": "ingress", "AWS::EC2::SecurityGroupEgress": "egress"}
"""Standalone rule resources and their direction."""

PEER_PROPERTIES = {
    "ingress": ("SourceSecurityGroupId", "SourceSecurityGroupName", "CidrIp", "CidrIpv6", "SourcePrefixListId"),
    "egress": ("DestinationSecurityGroupId", "CidrIp", "CidrIpv6", "DestinationPrefixListId"),
}
"""The properties that name a rule's peer, per direction."""

RuleKey = Tuple[str, str, str, str, str, str]


def rule_key(group: str, direction: str, rule: Mapping[str, Any]) -> RuleKey:
    """What EC2 compares: the group, the direction, the protocol (``-1`` for all, names lower-cased), the ports
    (none for all protocols) and the peer."""
    protocol = str(rule.get("IpProtocol", "")).lower()
    protocol = {"tcp": "6", "udp": "17", "icmp": "1"}.get(protocol, protocol)
    ports = ("", "") if protocol == "-1" else (str(rule.get("FromPort", "")), str(rule.get("ToPort", "")))
    peer = next((f"{name}={rule[name]}" for name in PEER_PROPERTIES[direction] if rule.get(name)), "")
    return (group, direction, protocol, *ports, peer)


def rules_of(resource_type: str, properties: Mapping[str, Any], group_id: str = "") -> Iterator[RuleKey]:
    """The rules a resource declares (resolved properties): a standalone rule, or the inline rules of the group
    whose ID is ``group_id``."""
    if resource_type in RULE_TYPES:
        yield rule_key(str(properties.get("GroupId", "")), RULE_TYPES[resource_type], properties)
    elif resource_type == GROUP:
        for direction, name in (("ingress", "SecurityGroupIngress"), ("egress", "SecurityGroupEgress")):
            for rule in properties.get(name) or ():
                yield rule_key(group_id, direction, rule)


def _group_id(resolver: Resolver, logical_id: str) -> str:
    """A group's ID (``Fn::GetAtt [id, GroupId]``), which its inline rules belong to."""
    return str(resolver.resolve({"Fn::GetAtt": [logical_id, "GroupId"]}))


def duplicate_rules(result: ScenarioResult) -> List[str]:
    """Every rule the update phase adds while the same rule stands: declared by a resource of the old deployment
    that the update phase has not deleted or changed, or by one created earlier in the plan. A group's update
    revokes the inline rules it no longer has before it authorizes those it gains; a new group has rules of its own
    ID only."""
    before, after = resolver_of(result, old=True), resolver_of(result)
    standing: Dict[RuleKey, str] = {
        key: logical_id
        for logical_id, resource_type, properties in deployed_resources(result, old=True)
        for key in rules_of(resource_type, properties, _group_id(before, logical_id) if resource_type == GROUP else "")
    }
    found = []
    for index, step in enumerate(result.plan.steps):
        if step.phase != "update":
            continue
        if step.operation == "Delete":
            standing = {key: owner for key, owner in standing.items() if owner != step.logical_id}
            continue
        if step.operation not in ("Create", "Update"):
            continue
        if step.resource_type == GROUP:
            added = set(rules_of(GROUP, step.properties, _group_id(after, step.logical_id)))
            if step.operation == "Update":
                standing = {key: owner for key, owner in standing.items() if owner != step.logical_id or key in added}
            added -= {key for key, owner in standing.items() if owner == step.logical_id}
        elif step.resource_type in RULE_TYPES and step.operation == "Create":
            added = set(rules_of(step.resource_type, step.properties))
        else:
            continue
        for key in sorted(added):
            twin: Optional[str] = standing.get(key)  # another resource, or the old copy of a replaced one
            if twin is not None:
                found.append(
                    f"step {index + 1} ({step.operation} {step.logical_id}) adds the rule that {twin} still holds "
                    f"({key[1]} {key[2]} {key[3]}-{key[4]} {key[5]}): EC2 refuses it (InvalidPermission.Duplicate)"
                )
            standing[key] = step.logical_id
    return found
