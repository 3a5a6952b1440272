"""DnsFirewall: the VPC's Resolver answers the allow-list and NXDOMAIN for every other name, before any function of
the VPC starts, and a destroy can remove it."""

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from tests.support.apps import only, resources_of
from tests.support.clusters import ENV
from trainium_eks.constructs.dns_firewall import DnsFirewall, DnsFirewallMode
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.facts.dns_domains import DEFAULT_ALLOWED_DOMAINS

DOMAIN_LIST = "AWS::Route53Resolver::FirewallDomainList"


def synth(**props):
    """A stack with a TrainingNetwork, the firewall of ``props`` on it, and a function in its private subnets."""
    stack = cdk.Stack(cdk.App(), "S", env=ENV)
    network = TrainingNetwork(stack, "Network", node_az_id="usw2-az4")
    DnsFirewall(stack, "Dns", vpc=network.vpc, **props)
    lambda_.Function(
        stack,
        "InVpc",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context): pass"),
        vpc=network.vpc,
        vpc_subnets=ec2.SubnetSelection(subnets=network.vpc.private_subnets),
    )
    return Template.from_stack(stack).to_json()["Resources"]


def rules(resources):
    (group,) = [r for r in resources.values() if r["Type"] == "AWS::Route53Resolver::FirewallRuleGroup"]
    return group["Properties"]["FirewallRules"]


def domain_list(resources, rule):
    return resources[rule["FirewallDomainListId"]["Fn::GetAtt"][0]]["Properties"]["Domains"]


def test_the_allow_list_is_answered_first_and_every_other_name_gets_nxdomain():
    resources = synth()
    allow, catch_all = sorted(rules(resources), key=lambda rule: rule["Priority"])
    assert (allow["Action"], allow["FirewallDomainRedirectionAction"]) == ("ALLOW", "TRUST_REDIRECTION_DOMAIN")
    assert domain_list(resources, allow) == list(DEFAULT_ALLOWED_DOMAINS)
    assert (catch_all["Action"], catch_all["BlockResponse"]) == ("BLOCK", "NXDOMAIN")
    assert domain_list(resources, catch_all) == ["*"]


def test_in_alert_mode_every_other_name_is_answered_and_recorded():
    _, catch_all = sorted(rules(synth(mode=DnsFirewallMode.ALERT)), key=lambda rule: rule["Priority"])
    assert catch_all["Action"] == "ALERT"
    assert "BlockResponse" not in catch_all


def test_extra_domains_join_the_list_once_in_lower_case():
    resources = synth(extra_domains=["Data.Example.com", "*.amazonaws.com", "data.example.com"])
    allow = min(rules(resources), key=lambda rule: rule["Priority"])
    assert domain_list(resources, allow) == [*DEFAULT_ALLOWED_DOMAINS, "data.example.com"]


def test_the_association_is_on_the_vpc_and_a_destroy_may_delete_it():
    """Mutation protection "disallows modification or removal of the association" (CloudFormation reference,
    AWS::Route53Resolver::FirewallRuleGroupAssociation), a destroy's included."""
    resources = synth()
    association = [r for r in resources.values() if r["Type"] == "AWS::Route53Resolver::FirewallRuleGroupAssociation"]
    (association,) = association
    vpc = next(name for name, r in resources.items() if r["Type"] == "AWS::EC2::VPC")
    assert association["Properties"]["VpcId"] == {"Ref": vpc}
    assert association["Properties"]["MutationProtection"] == "DISABLED"


def test_the_functions_of_the_vpc_start_after_the_firewall_holds_and_go_before_it():
    resources = synth()
    (association,) = [
        name for name, r in resources.items() if r["Type"] == "AWS::Route53Resolver::FirewallRuleGroupAssociation"
    ]
    (function,) = [name for name, r in resources.items() if r["Type"] == "AWS::Lambda::Function"]
    assert association in resources[function]["DependsOn"]


@pytest.mark.parametrize(
    "props,message",
    [
        ({"allowed_domains": []}, "allowed_domains=.*at least one domain"),
        ({"allowed_domains": "example.com"}, "allowed_domains='example.com': a list of domains"),
        ({"extra_domains": ["*"]}, r"extra_domains='\*': a domain, not \*"),
        ({"extra_domains": ["exa mple.com"]}, "extra_domains='exa mple.com': a domain of letters"),
        ({"extra_domains": ["*.*.example.com"]}, r"extra_domains='\*\.\*\.example\.com'"),
        ({"mode": DnsFirewallMode.OFF}, "mode=.*BLOCK or ALERT"),
        ({"mode": "deny"}, "mode='deny': one of 'block', 'alert', 'off'"),
        ({"priority": 100}, "priority=100: an integer from 101 to 9899"),
        ({"subnets": "subnet-1"}, "subnets='subnet-1': a list of ec2.ISubnet"),
    ],
)
def test_wrong_props_are_refused(props, message):
    with pytest.raises(ConfigurationError, match=message):
        synth(**props)


def function_in(stack, id_, vpc, subnet):
    return lambda_.Function(
        stack,
        id_,
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context): pass"),
        vpc=vpc,
        vpc_subnets=ec2.SubnetSelection(subnets=[subnet]),
    )


def test_a_vpc_of_the_user_gets_the_firewall_and_only_the_subnets_given_wait_for_it():
    stack = cdk.Stack(cdk.App(), "S", env=ENV)
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=1)
    DnsFirewall(stack, "Dns", vpc=vpc, subnets=[vpc.private_subnets[0]])
    function_in(stack, "Given", vpc, vpc.private_subnets[0])
    function_in(stack, "Other", vpc, vpc.private_subnets[1])
    template = Template.from_stack(stack)
    association = only(template, "AWS::Route53Resolver::FirewallRuleGroupAssociation")
    assert association["Properties"]["VpcId"] == {"Ref": "Vpc8378EB38"}
    (name,) = resources_of(template, "AWS::Route53Resolver::FirewallRuleGroupAssociation")
    functions = resources_of(template, "AWS::Lambda::Function")
    waits = {fn: name in resource.get("DependsOn", []) for fn, resource in functions.items()}
    assert waits == {
        next(f for f in functions if f.startswith("Given")): True,
        next(f for f in functions if f.startswith("Other")): False,
    }
    assert len(resources_of(template, DOMAIN_LIST)) == 2


def test_the_default_list_is_refused_in_another_partition_and_a_list_of_its_own_is_not():
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="cn-north-1", account="123456789012"))
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=1)
    with pytest.raises(ConfigurationError, match="allowed_domains='default': the domains of partition aws-cn"):
        DnsFirewall(stack, "Dns", vpc=vpc)
    DnsFirewall(stack, "Own", vpc=vpc, allowed_domains=["amazonaws.com.cn", "*.amazonaws.com.cn"])
