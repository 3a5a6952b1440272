"""Every name a stack's pulls and downloads resolve is answered by the stack's DNS firewall: the registries of every
image its manifests and held jobs run, the repositories of its Helm charts, the hosts its pods download from. Read
from the synthesized template itself, so an image, chart or download added anywhere fails here until its domains are
on the list (:mod:`trainium_eks.facts.dns_domains`). What the charts' own templates run is checked on the real Helm
releases (``tests/e2e/test_deploy.py``)."""

import json
import re
from typing import Any, Dict, Iterator, List, Tuple
from urllib.parse import urlparse

import botocore.session
import pytest

from tests.support.apps import BUCKET_CONTEXT, COMPOSER_TRAINING, KUBEFLOW_TRAINING, TRAINIUM_EKS, stack_template
from tests.support.dns_firewall import allowed_domains, unanswered
from tests.support.manifests import applied_objects
from trainium_eks.facts.dns_domains import CHART_REPOSITORY_DOMAINS, domain_allowed
from trainium_eks.facts.regions import AZ_IDS_BY_REGION

HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"
URL = re.compile(r"https?://([a-z0-9-]+(?:\.[a-z0-9-]+)+)(?=[/:\s\"']|$)")
"""A URL with a host name (not a program's placeholder such as ``https://{host}``)."""
PSEUDO_PARAMETERS = {"${AWS::URLSuffix}": "amazonaws.com", "${AWS::AccountId}": "123456789012"}
"""What CloudFormation resolves the pseudo parameters of an image reference to (partition aws)."""
CASES = [
    (TRAINIUM_EKS, {}),
    (TRAINIUM_EKS, BUCKET_CONTEXT),
    (KUBEFLOW_TRAINING, {}),
    (KUBEFLOW_TRAINING, {"kubeflowAcceleratedType": "g5.12xlarge"}),
    (COMPOSER_TRAINING, {}),
    (TRAINIUM_EKS, {"provisioning": "node-group"}),
]


def _walk(value: Any) -> Iterator[Tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def unanswered_names(template) -> Dict[str, List[str]]:
    """What needs a name the template's DNS firewall does not answer (``image <ref>``, ``chart <repository>``,
    ``download <host>``) -> those names; ``unknown:<it>`` for a registry or chart repository whose names the library
    does not know. Everything the template pulls or downloads is a key, answered or not."""
    allowed = allowed_domains(template.to_json())
    found: Dict[str, List[str]] = {}
    for obj in applied_objects(template).values():
        for key, value in _walk(obj):
            if key == "image" and isinstance(value, str):
                for parameter, resolved in PSEUDO_PARAMETERS.items():
                    value = value.replace(parameter, resolved)
                found[f"image {value}"] = unanswered(allowed, value)
        for host in URL.findall(json.dumps(obj)):
            found[f"download {host}"] = [] if domain_allowed(allowed, host) else [host]
    for resource in template.to_json()["Resources"].values():
        if resource["Type"].startswith(HELM_CHART):
            repository = resource["Properties"]["Repository"]
            host = urlparse(repository).hostname
            if repository.startswith("oci://"):
                found[f"chart {repository}"] = unanswered(allowed, f"{host}/chart")
            else:
                group = CHART_REPOSITORY_DOMAINS.get(host)
                names = group.domains if group else (f"unknown:{host}",)
                found[f"chart {repository}"] = [name for name in names if not domain_allowed(allowed, name)]
    return found


@pytest.mark.parametrize("stack,context", CASES, ids=lambda v: v if isinstance(v, str) else ",".join(v) or "default")
def test_every_name_the_stack_pulls_or_downloads_from_is_answered(stack, context):
    found = unanswered_names(stack_template(stack, **context))
    assert any(what.startswith("image ") for what in found) and any(what.startswith("chart ") for what in found)
    assert {what: names for what, names in found.items() if names} == {}


def test_the_seed_data_sets_host_is_what_kubeflow_training_downloads_from():
    found = unanswered_names(stack_template(KUBEFLOW_TRAINING))
    assert [what for what in found if what.startswith("download ")] == ["download www.cs.toronto.edu"]


def test_a_name_of_an_attackers_zone_is_not_answered():
    allowed = allowed_domains(stack_template(TRAINIUM_EKS).to_json())
    assert not domain_allowed(allowed, "c2VjcmV0.tunnel.attacker.example")


def test_an_image_of_a_registry_the_library_does_not_know_is_not_answered():
    allowed = allowed_domains(stack_template(TRAINIUM_EKS).to_json())
    assert unanswered(allowed, "registry.example.com/team/trainer:1") == ["unknown:registry.example.com"]
    assert unanswered(allowed, "ghcr.io/team/trainer:1") == []


AWS_CLIENTS = {
    "eks-auth": "the EKS Pod Identity agent, for every Pod Identity role (Karpenter, the CNI, the CSI drivers, "
    "CloudWatch, the training pods)",
    "eks": "the kubectl handler, Karpenter, the nodes' bootstrap",
    "sts": "every SDK's credential chain",
    "ec2": "Karpenter, the VPC CNI, the CSI drivers",
    "ssm": "Karpenter's AMI parameters",
    "sqs": "Karpenter's interruption queue",
    "iam": "Karpenter's instance profiles",
    "ecr": "the kubelet's credential provider",
    "s3": "the training pods, the staging Jobs",
    "fsx": "the FSx CSI driver",
    "efs": "the EFS CSI driver",
    "logs": "the CloudWatch agent, Fluent Bit",
    "cloudwatch": "the CloudWatch agent",
}
"""The AWS APIs that something in a stack's VPC calls (botocore's service names), with who calls them."""


@pytest.mark.parametrize("region", sorted(AZ_IDS_BY_REGION))
def test_every_aws_api_the_clusters_components_call_is_answered_where_the_sdk_resolves_it(region):
    """Resolved by botocore's own endpoint rule sets (the rules every AWS SDK shares): EKS Auth, for one, is
    ``eks-auth.<region>.api.aws`` by default, not an amazonaws.com name."""
    allowed = allowed_domains(stack_template(TRAINIUM_EKS).to_json())
    session = botocore.session.get_session()
    hosts = {
        service: urlparse(session.create_client(service, region_name=region).meta.endpoint_url).hostname
        for service in AWS_CLIENTS
    }
    hosts["pricing"] = urlparse(session.create_client("pricing", region_name="us-east-1").meta.endpoint_url).hostname
    assert {service: host for service, host in hosts.items() if not domain_allowed(allowed, host)} == {}
    assert hosts["eks-auth"] == f"eks-auth.{region}.api.aws"
