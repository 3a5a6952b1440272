"""EC2's one rule per (group, direction, protocol, ports, peer), on CloudFormation's plan of small templates."""

from __future__ import annotations

from typing import Any, Dict

from rehearsal.security_group_rules import duplicate_rules, rule_key
from tests.support.destroy import scenario_result

GROUPS = {
    name: {"Type": "AWS::EC2::SecurityGroup", "Properties": {"GroupDescription": name, "VpcId": "vpc-1"}}
    for name in ("Files", "PeerA", "PeerB", "PeerC")
}


def nfs_from(peer: str) -> Dict[str, Any]:
    """A rule of ``Files`` admitting ``peer`` on TCP 2049."""
    return {
        "Type": "AWS::EC2::SecurityGroupIngress",
        "Properties": {
            "GroupId": {"Fn::GetAtt": ["Files", "GroupId"]},
            "SourceSecurityGroupId": {"Fn::GetAtt": [peer, "GroupId"]},
            "IpProtocol": "tcp",
            "FromPort": 2049,
            "ToPort": 2049,
        },
    }


def template(*peers: str) -> Dict[str, Any]:
    """The groups, and one rule per peer named by its position (``FromClient<n>``)."""
    return {"Resources": {**GROUPS, **{f"FromClient{n}": nfs_from(peer) for n, peer in enumerate(peers)}}}


def test_a_client_appended_adds_one_rule():
    assert duplicate_rules(scenario_result(template("PeerA", "PeerB"), template("PeerA", "PeerB", "PeerC"))) == []


def test_a_client_inserted_before_others_recreates_their_rules_while_the_old_ones_stand():
    found = duplicate_rules(scenario_result(template("PeerA", "PeerB"), template("PeerC", "PeerA", "PeerB")))
    assert [line.split(" (ingress")[0] for line in found] == [
        "step 2 (Create FromClient1) adds the rule that FromClient0 still holds",
        "step 3 (Create FromClient2) adds the rule that FromClient1 still holds",
    ]
    assert all(line.endswith("EC2 refuses it (InvalidPermission.Duplicate)") for line in found)


def test_a_client_removed_from_the_front_recreates_the_others_rules():
    found = duplicate_rules(scenario_result(template("PeerA", "PeerB", "PeerC"), template("PeerB", "PeerC")))
    assert len(found) == 2 and "FromClient0) adds the rule that FromClient1 still holds" in found[0]


def test_the_description_is_not_part_of_a_rule_and_a_protocol_name_is_its_number():
    rule = {"IpProtocol": "TCP", "FromPort": 2049, "ToPort": 2049, "CidrIp": "10.0.0.0/8", "Description": "a"}
    assert rule_key("sg-1", "ingress", rule) == rule_key("sg-1", "ingress", dict(rule, IpProtocol="6", Description="b"))
    everything = {"IpProtocol": "-1", "FromPort": 0, "ToPort": 65535, "CidrIp": "10.0.0.0/8"}
    assert rule_key("sg-1", "ingress", everything)[2:5] == ("-1", "", "")


INLINE = {"IpProtocol": "tcp", "FromPort": 2049, "ToPort": 2049, "CidrIp": "10.0.0.0/8"}
STANDALONE = {
    "Type": "AWS::EC2::SecurityGroupIngress",
    "Properties": {"GroupId": {"Fn::GetAtt": ["Files", "GroupId"]}, **INLINE, "IpProtocol": "6"},
}


def with_inline(*rules: Dict[str, Any], **resources: Dict[str, Any]) -> Dict[str, Any]:
    """The groups, ``Files`` with ``rules`` inline, and ``resources``."""
    files = {"GroupDescription": "Files", "VpcId": "vpc-1", "SecurityGroupIngress": list(rules)}
    return {"Resources": {**GROUPS, "Files": {"Type": "AWS::EC2::SecurityGroup", "Properties": files}, **resources}}


def test_a_rule_inline_in_its_group_stands_too():
    (found,) = duplicate_rules(scenario_result(with_inline(INLINE), with_inline(INLINE, Extra=STANDALONE)))
    assert "(Create Extra) adds the rule that Files still holds" in found


def test_a_rule_moved_out_of_its_group_is_revoked_first_and_one_moved_in_is_added_while_it_stands():
    assert duplicate_rules(scenario_result(with_inline(INLINE), with_inline(Extra=STANDALONE))) == []
    (found,) = duplicate_rules(scenario_result(with_inline(Extra=STANDALONE), with_inline(INLINE)))
    assert "(Update Files) adds the rule that Extra still holds" in found
