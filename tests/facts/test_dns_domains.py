"""The DNS Firewall domain facts: how a list matches a name, which registry an image is pulled from, what a domain
list accepts."""

import pytest

from trainium_eks.facts.dns_domains import (
    DEFAULT_ALLOWED_DOMAINS,
    REGISTRY_DOMAINS,
    domain_allowed,
    domain_pattern_problem,
    image_registry,
    registry_domains,
)


@pytest.mark.parametrize(
    "domains,name,allowed",
    [
        (["example.com"], "example.com", True),
        (["example.com"], "EXAMPLE.com.", True),
        (["example.com"], "www.example.com", False),
        (["*.example.com"], "www.example.com", True),
        (["*.example.com"], "a.b.example.com", True),
        (["*.example.com"], "example.com", False),
        (["*.example.com"], "badexample.com", False),
        (["*.example.com"], "example.com.attacker.net", False),
        (["*"], "anything.at.all", True),
        ([], "example.com", False),
    ],
)
def test_a_domain_list_matches_a_name_exactly_or_below_a_wildcard(domains, name, allowed):
    assert domain_allowed(domains, name) is allowed


@pytest.mark.parametrize(
    "image,registry",
    [
        ("python:3.12", "docker.io"),
        ("volcanosh/vc-scheduler:v1.15.1", "docker.io"),
        ("docker.io/library/python:3.12", "docker.io"),
        ("public.ecr.aws/neuron/neuron-device-plugin:2.31.0.0", "public.ecr.aws"),
        ("602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/x:v1", "602401143452.dkr.ecr.us-west-2.amazonaws.com"),
        ("localhost/x", "localhost"),
        ("registry:5000/x", "registry:5000"),
    ],
)
def test_an_image_is_pulled_from_the_registry_its_runtime_reads(image, registry):
    assert image_registry(image) == registry


def test_an_ecr_registry_of_an_account_is_its_own_name_and_an_unknown_registry_has_none():
    ecr = "602401143452.dkr.ecr.us-west-2.amazonaws.com"
    assert registry_domains(ecr) == (ecr,)
    assert registry_domains("registry.example.com") is None
    assert registry_domains("docker.io") == REGISTRY_DOMAINS["docker.io"].domains


def test_every_default_domain_is_one_a_domain_list_accepts_and_none_is_everything():
    assert [d for d in DEFAULT_ALLOWED_DOMAINS if domain_pattern_problem(d)] == []
    assert len(set(DEFAULT_ALLOWED_DOMAINS)) == len(DEFAULT_ALLOWED_DOMAINS)
    assert not domain_allowed(DEFAULT_ALLOWED_DOMAINS, "data.attacker.example")
    assert not domain_allowed(DEFAULT_ALLOWED_DOMAINS, "in-addr.arpa")


@pytest.mark.parametrize(
    "value,problem",
    [
        ("example.com", None),
        ("*.example.com", None),
        ("xn--bcher-kva.example", None),
        ("*", "not *"),
        ("", "a domain such as"),
        (None, "a domain such as"),
        ("ex_ample.com", "letters, digits and '-'"),
        ("*.*.example.com", "letters, digits and '-'"),
        ("a.*.example.com", "letters, digits and '-'"),
        ("-example.com", "letters, digits and '-'"),
        ("a" * 64 + ".com", "letters, digits and '-'"),
        (".".join(["abcdefgh"] * 29), "letters, digits and '-'"),
    ],
)
def test_a_domain_a_list_refuses_is_named_with_why(value, problem):
    reason = domain_pattern_problem(value)
    assert (reason is None) if problem is None else (problem in reason)
