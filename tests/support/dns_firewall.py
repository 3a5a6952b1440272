"""The DNS firewall of a synthesized template, and which of an image's names it does not answer."""

from __future__ import annotations

from typing import Any, List, Mapping

from trainium_eks.facts.dns_domains import domain_allowed, image_registry, registry_domains


def allowed_domains(template: Mapping[str, Any]) -> List[str]:
    """The domains of the allow rule of the template's one DNS firewall rule group (the template as JSON)."""
    resources = template["Resources"]
    (group,) = [r for r in resources.values() if r["Type"] == "AWS::Route53Resolver::FirewallRuleGroup"]
    (allow,) = [rule for rule in group["Properties"]["FirewallRules"] if rule["Action"] == "ALLOW"]
    return resources[allow["FirewallDomainListId"]["Fn::GetAtt"][0]]["Properties"]["Domains"]


def unanswered(allowed: List[str], image: str) -> List[str]:
    """The names a pull of ``image`` resolves that ``allowed`` does not match (``unknown:<registry>`` for a registry
    whose names the library does not know)."""
    registry = image_registry(image)
    names = registry_domains(registry) or (f"unknown:{registry}",)
    return [name for name in names if not domain_allowed(allowed, name)]
