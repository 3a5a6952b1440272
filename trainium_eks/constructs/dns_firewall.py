"""DnsFirewall: a Route 53 Resolver DNS Firewall that answers only the domains a training cluster needs."""

from __future__ import annotations

from enum import Enum
from typing import List, Optional, Sequence, Tuple

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_route53resolver as resolver
from constructs import Construct, DependencyGroup

from trainium_eks.core.cost import stack_region
from trainium_eks.core.validation import Problems, check_implements, check_integer, coerce_enum, implements
from trainium_eks.facts.dns_domains import DEFAULT_ALLOWED_DOMAINS, domain_pattern_problem
from trainium_eks.facts.regions import partition_of


class DnsFirewallMode(Enum):
    """What the DNS firewall does with a query for a domain outside its allow-list."""

    BLOCK = "block"
    """Answer ``NXDOMAIN``: the query never leaves the Route 53 Resolver."""
    ALERT = "alert"
    """Answer it as usual and record the query as an alert (in the Resolver's query logs, where the VPC has them):
    to learn what a workload needs before blocking."""
    OFF = "off"
    """No DNS firewall (the stacks build none)."""


DEFAULT_ASSOCIATION_PRIORITY = 1000
"""The rule group's priority among the rule groups associated with the VPC, lowest first: "between 100 and 9900
(excluding 100 and 9900)" (CloudFormation reference, AWS::Route53Resolver::FirewallRuleGroupAssociation, ``Priority``).
Default of :class:`DnsFirewall`."""

ALLOW_RULE_PRIORITY = 100
"""Priority of the allow rule in the rule group: it is evaluated first."""

CATCH_ALL_RULE_PRIORITY = 200
"""Priority of the rule that blocks (or alerts on) every other domain."""


class DnsFirewall(Construct):
    """A Route 53 Resolver DNS Firewall on ``vpc`` that answers only ``allowed_domains`` (and their CNAME chains).

    Why: every pod may query CoreDNS, which forwards names it does not own to the VPC's Route 53 Resolver, and the
    Resolver asks the internet's name servers. A query for ``<data>.attacker.example`` reaches the attacker's name
    server whatever the NetworkPolicies say, so DNS is a way out of the cluster for code in a training image. With
    this firewall every query through the VPC's Resolver (the nodes', the pods' through CoreDNS) for a name outside the
    list gets ``NXDOMAIN`` from the Resolver itself (:attr:`DnsFirewallMode.BLOCK`) and goes no further.

    The rule group holds two rules: ``ALLOW`` for the allow-list (:data:`ALLOW_RULE_PRIORITY`), whose CNAME chains are
    trusted (``TRUST_REDIRECTION_DOMAIN``: the owner of an allowed name chose where it points), then ``BLOCK`` with
    ``NXDOMAIN`` (or ``ALERT``) for ``*`` (:data:`CATCH_ALL_RULE_PRIORITY`). The association's mutation protection is
    off, so that a ``cdk destroy`` can remove it; the VPC's functions (aws-cdk-lib's ``Function`` in the VPC's
    subnets, the kubectl provider's among them) are created after it and deleted before it, through the subnets'
    ``internet_connectivity_established``, so every chart is pulled, and every manifest applied, with the firewall in
    place.

    It filters names, not connections: a pod that may connect to the internet (the dataset staging) can still reach
    an address it already knows; the NetworkPolicies decide where a pod may connect.

    :param vpc: The VPC. Required.
    :param allowed_domains: The domains answered, as DNS Firewall writes them (``example.com``, ``*.example.com`` for
        its subdomains). Default: :data:`~trainium_eks.facts.dns_domains.DEFAULT_ALLOWED_DOMAINS` (AWS's endpoints in
        the ``aws`` partition, the registries and chart repositories the library's stacks pull from, the seed data
        set's host); a stack in another partition (China, GovCloud) must give its own, since its endpoints are named
        otherwise (``amazonaws.com.cn``).
    :param extra_domains: More domains to answer, added to ``allowed_domains`` (a training image's own registry, a
        data set's host). Default: none.
    :param mode: :class:`DnsFirewallMode` ``BLOCK`` or ``ALERT`` (``OFF`` is for stacks, which then build none).
        Default: ``BLOCK``.
    :param subnets: The subnets whose functions must start after the firewall holds. Default: ``vpc``'s private
        subnets.
    :param priority: The association's priority among the VPC's rule groups. Default:
        :data:`DEFAULT_ASSOCIATION_PRIORITY`.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        vpc: ec2.IVpc,
        allowed_domains: Sequence[str] = DEFAULT_ALLOWED_DOMAINS,
        extra_domains: Sequence[str] = (),
        mode: DnsFirewallMode = DnsFirewallMode.BLOCK,
        subnets: Optional[Sequence[ec2.ISubnet]] = None,
        priority: int = DEFAULT_ASSOCIATION_PRIORITY,
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        check_implements(problems, "vpc", vpc, ec2.IVpc, "an ec2.IVpc")
        domains = list(
            dict.fromkeys(
                check_domains(problems, "allowed_domains", allowed_domains, empty=False)
                + check_domains(problems, "extra_domains", extra_domains)
            )
        )
        chosen = coerce_enum(problems, "mode", mode, DnsFirewallMode)
        if chosen is DnsFirewallMode.OFF:
            problems.add("mode", mode, "BLOCK or ALERT (a stack with the firewall off builds no DnsFirewall)")
        if subnets is not None and (
            not isinstance(subnets, (list, tuple)) or not all(implements(s, ec2.ISubnet) for s in subnets)
        ):
            problems.add("subnets", subnets, "a list of ec2.ISubnet")
        region = stack_region(self)
        if allowed_domains is DEFAULT_ALLOWED_DOMAINS and region and partition_of(region) != "aws":
            problems.add(
                "allowed_domains",
                "default",
                f"the domains of partition {partition_of(region)} (the default names the aws partition's endpoints, "
                f"amazonaws.com and api.aws; region {region} is elsewhere)",
            )
        check_integer(problems, "priority", priority, minimum=101, maximum=9899)
        problems.raise_if_any()

        self.mode: DnsFirewallMode = chosen
        self.domains: Tuple[str, ...] = tuple(domains)
        """The domains answered."""
        self.allowed_list = resolver.CfnFirewallDomainList(self, "Allowed", domains=list(domains))
        self.everything_list = resolver.CfnFirewallDomainList(self, "Everything", domains=["*"])
        catch_all = (
            {"action": "BLOCK", "block_response": "NXDOMAIN"}
            if chosen is DnsFirewallMode.BLOCK
            else {"action": "ALERT"}
        )
        self.rule_group = resolver.CfnFirewallRuleGroup(
            self,
            "Rules",
            firewall_rules=[
                resolver.CfnFirewallRuleGroup.FirewallRuleProperty(
                    action="ALLOW",
                    priority=ALLOW_RULE_PRIORITY,
                    firewall_domain_list_id=self.allowed_list.attr_id,
                    firewall_domain_redirection_action="TRUST_REDIRECTION_DOMAIN",
                ),
                resolver.CfnFirewallRuleGroup.FirewallRuleProperty(
                    priority=CATCH_ALL_RULE_PRIORITY,
                    firewall_domain_list_id=self.everything_list.attr_id,
                    **catch_all,
                ),
            ],
        )
        self.association = resolver.CfnFirewallRuleGroupAssociation(
            self,
            "Association",
            firewall_rule_group_id=self.rule_group.attr_id,
            vpc_id=vpc.vpc_id,
            priority=priority,
            mutation_protection="DISABLED",
        )
        for subnet in vpc.private_subnets if subnets is None else subnets:
            group = subnet.internet_connectivity_established
            if not isinstance(group, DependencyGroup):
                raise TypeError(f"{subnet.node.path}: internet_connectivity_established is not a DependencyGroup")
            group.add(self.association)


def check_domains(problems: Problems, setting: str, value: object, *, empty: bool = True) -> List[str]:
    """The domains of ``value`` (a list of strings, each a DNS Firewall domain), recording what is wrong."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        problems.add(setting, value, "a list of domains such as example.com or *.example.com")
        return []
    if not value and not empty:
        problems.add(setting, value, "at least one domain")
    wrong = [(item, domain_pattern_problem(item)) for item in value]
    for item, reason in wrong:
        if reason:
            problems.add(setting, item, reason)
    return [str(item).lower() for item, reason in wrong if not reason]
