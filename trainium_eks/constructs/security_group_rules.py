"""Security group rules that live in the stack that depends on the others, whatever stacks own the groups (and
:func:`latest_stack`, which finds that stack for other cross-stack grants)."""

from __future__ import annotations

import re
from typing import Any, Collection

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from trainium_eks.core.validation import Problems, implements


def check_client_groups(problems: Problems, setting: str, groups: Any) -> bool:
    """``groups`` is a list (or tuple) of ``ec2.ISecurityGroup``, the clients of a file system; each other element is
    named by its index."""
    if not isinstance(groups, (list, tuple)):
        problems.add(setting, groups, "a list of ec2.ISecurityGroup")
        return False
    wrong = [(index, group) for index, group in enumerate(groups) if not implements(group, ec2.ISecurityGroup)]
    for index, group in wrong:
        problems.add(f"{setting}[{index}]", group, "an ec2.ISecurityGroup")
    return not wrong


def check_client_name(problems: Problems, name: Any, groups: Any, taken: Collection[str]) -> None:
    """``name``, when given, names the rules of exactly one client group: letters and digits, starting with a
    letter (it goes into logical IDs), not ``Client<n>`` (the names of clients by position) and not a name in
    ``taken`` (the names the file system's clients have already: a second would be the same rules)."""
    if name is None:
        return
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", name):
        problems.add("name", name, "letters and digits, starting with a letter")
    elif re.fullmatch(r"Client[0-9]+", name):
        problems.add("name", name, "a name other than Client<n>, which names the clients given without a name")
    elif name in taken:
        problems.add("name", name, "a name no other client of the file system has")
    if isinstance(groups, (list, tuple)) and len(groups) != 1:
        problems.add("security_groups", len(groups), "one security group with a name")


def allow_ingress(
    scope: Construct, id_: str, *, group: ec2.ISecurityGroup, peer: ec2.ISecurityGroup, port: ec2.Port, description: str
) -> ec2.CfnSecurityGroupIngress:
    """An ingress rule of ``group`` admitting ``peer`` on ``port``, created in ``scope`` or, when the groups live in
    other stacks, in the latest-created stack of the three.

    ``group.add_ingress_rule(peer, ...)`` creates the rule in the group's own stack: a node group in another stack
    than the cluster would then make the cluster's stack refer to the node group's security group while the node
    group's stack refers to the cluster, a dependency cycle. A stack can only refer to what existed when it was
    built, so the latest-created stack among the scope's and the two groups' is the one that may depend on the
    others: the rule lives there.
    """
    rule = port.to_rule_json()
    own = Stack.of(scope)
    home = latest_stack(own, group, peer)
    if home is not own:
        scope, id_ = home, f"{scope.node.path.replace('/', '-')}-{id_}"
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


def latest_stack(*constructs: Construct) -> Stack:
    """The stack of ``constructs`` created last, the one that may refer to the others' resources (jsii hands out one
    Python object per stack, so ``is`` compares)."""
    stacks = [construct if isinstance(construct, Stack) else Stack.of(construct) for construct in constructs]
    if all(stack is stacks[0] for stack in stacks):
        return stacks[0]
    created = [child for child in stacks[0].node.root.node.find_all() if isinstance(child, Stack)]
    return max(stacks, key=lambda stack: next((i for i, s in enumerate(created) if s is stack), -1))
