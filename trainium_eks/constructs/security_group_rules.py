"""Security group rules that live where the construct that needs them lives, whatever stack owns the groups."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct


def allow_ingress(
    scope: Construct, id_: str, *, group: ec2.ISecurityGroup, peer: ec2.ISecurityGroup, port: ec2.Port, description: str
) -> ec2.CfnSecurityGroupIngress:
    """An ingress rule of ``group`` admitting ``peer`` on ``port``, created in ``scope``.

    ``group.add_ingress_rule(peer, ...)`` creates the rule in the group's own scope, so a node group or a file
    system in another stack than the cluster would make the cluster's stack refer to the node group's security
    group, and the node group's stack to the cluster: a dependency cycle. A rule created in ``scope`` lives in the
    stack of the construct that needs it, which already depends on both groups.
    """
    rule = port.to_rule_json()
    return ec2.CfnSecurityGroupIngress(
        scope,
        id_,
        group_id=group.security_group_id,
        source_security_group_id=peer.security_group_id,
        ip_protocol=rule["ipProtocol"],
        from_port=rule.get("fromPort"),
        to_port=rule.get("toPort"),
        description=description,
    )
