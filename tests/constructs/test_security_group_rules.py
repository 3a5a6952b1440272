"""allow_ingress and check_client_groups: the rule's ports and home stack (the latest of three), the group checks."""

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from tests.support.apps import new_app, resources_of
from tests.support.clusters import ENV
from trainium_eks.constructs.security_group_rules import allow_ingress, check_client_groups
from trainium_eks.core.validation import Problems


def groups_in(stack, vpc, *names):
    return [ec2.SecurityGroup(stack, name, vpc=vpc) for name in names]


def stack_dependencies(app):
    """Stack name -> the names of the stacks it depends on, once synthesized (which fails on a cycle)."""
    stacks = app.synth().stacks
    return {a.stack_name: {d.id for d in a.dependencies} & {b.stack_name for b in stacks} for a in stacks}


def group_id(stack, group):
    return {"Fn::GetAtt": [stack.get_logical_id(group.node.default_child), "GroupId"]}


def test_in_one_stack_the_rule_is_made_in_the_scope_with_the_ports_of_the_port():
    stack = cdk.Stack(new_app(), "One", env=ENV)
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=0)
    server, client = groups_in(stack, vpc, "Server", "Client")
    owner = Construct(stack, "Storage")
    lustre = allow_ingress(
        owner, "Lustre", group=server, peer=client, port=ec2.Port.tcp_range(988, 1023), description="Lustre"
    )
    everything = allow_ingress(owner, "All", group=client, peer=server, port=ec2.Port.all_traffic(), description="All")
    assert (lustre.node.path, everything.node.path) == ("One/Storage/Lustre", "One/Storage/All")
    rules = {
        r["Properties"]["Description"]: r["Properties"]
        for r in resources_of(assertions.Template.from_stack(stack), "AWS::EC2::SecurityGroupIngress").values()
    }
    assert rules["Lustre"] == {
        "Description": "Lustre",
        "GroupId": group_id(stack, server),
        "SourceSecurityGroupId": group_id(stack, client),
        "IpProtocol": "tcp",
        "FromPort": 988,
        "ToPort": 1023,
    }
    assert rules["All"] == {
        "Description": "All",
        "GroupId": group_id(stack, client),
        "SourceSecurityGroupId": group_id(stack, server),
        "IpProtocol": "-1",
    }, "all traffic has no ports"


def test_a_group_of_a_later_stack_takes_the_rule_named_after_the_scope_and_only_it_depends_on_the_other():
    app = new_app()
    storage = cdk.Stack(app, "Storage", env=ENV)
    vpc = ec2.Vpc(storage, "Vpc", max_azs=1, nat_gateways=0)
    (server,) = groups_in(storage, vpc, "Server")
    owner = Construct(storage, "FileSystem")
    nodes = cdk.Stack(app, "Nodes", env=ENV)
    (client,) = groups_in(nodes, vpc, "Client")
    rule = allow_ingress(owner, "Nfs", group=server, peer=client, port=ec2.Port.tcp(2049), description="NFS")
    assert cdk.Stack.of(rule) is nodes
    assert rule.node.path == "Nodes/Storage-FileSystem-Nfs"
    assert resources_of(assertions.Template.from_stack(storage), "AWS::EC2::SecurityGroupIngress") == {}
    assert stack_dependencies(app) == {"Storage": set(), "Nodes": {"Storage"}}


def test_a_scope_in_the_latest_stack_keeps_the_rule_even_when_both_groups_are_older():
    app = new_app()
    network = cdk.Stack(app, "Network", env=ENV)
    vpc = ec2.Vpc(network, "Vpc", max_azs=1, nat_gateways=0)
    server, client = groups_in(network, vpc, "Server", "Client")
    training = cdk.Stack(app, "Training", env=ENV)
    rule = allow_ingress(training, "Rule", group=server, peer=client, port=ec2.Port.tcp(443), description="HTTPS")
    assert cdk.Stack.of(rule) is training and rule.node.path == "Training/Rule"
    assert stack_dependencies(app) == {"Network": set(), "Training": {"Network"}}
    assert resources_of(assertions.Template.from_stack(network), "AWS::EC2::SecurityGroupIngress") == {}


def test_client_groups_are_a_list_or_tuple_of_groups_and_each_other_element_is_named_by_its_index():
    stack = cdk.Stack(new_app(), "Checks", env=ENV)
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=0)
    (group,) = groups_in(stack, vpc, "Client")
    imported = ec2.SecurityGroup.from_security_group_id(stack, "Imported", "sg-0123456789abcdef0")
    for accepted in ([], [group, imported], (group,)):
        problems = Problems("fs")
        assert check_client_groups(problems, "client_security_groups", accepted) is True
        assert not problems
    problems = Problems("fs")
    assert check_client_groups(problems, "client_security_groups", [group, "sg-1", imported, 3]) is False
    assert list(problems) == [
        "client_security_groups[1]='sg-1': an ec2.ISecurityGroup",
        "client_security_groups[3]=3: an ec2.ISecurityGroup",
    ]


@pytest.mark.parametrize("value", [None, "sg-0123456789abcdef0"])
def test_a_single_value_is_not_a_list_of_groups(value):
    problems = Problems("fs")
    assert check_client_groups(problems, "security_groups", value) is False
    assert list(problems) == [f"security_groups={value!r}: a list of ec2.ISecurityGroup"]
