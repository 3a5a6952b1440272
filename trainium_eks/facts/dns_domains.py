"""The domains a training cluster's DNS must answer: AWS's endpoints, the registries and chart repositories the stacks
pull from, the seed data set's host, each with where that comes from.

A domain of a Route 53 Resolver DNS Firewall domain list "can optionally start with * (asterisk)", and otherwise holds
letters, digits and hyphens in labels of 1 to 255 characters in all (Route 53 developer guide, "Managing your own
domain lists"). The guide does not say whether ``*.example.com`` also matches ``example.com``, so the lists here hold
both where both are needed, and :func:`domain_allowed` reads ``*.example.com`` the stricter way: the names below
``example.com`` only. A registry's reference name is not the only name a pull resolves: the registry hands out tokens
from another host and redirects layers to a content network (HTTP redirects, each a query of its own; a CNAME chain
is trusted by the allow rule, :class:`~trainium_eks.constructs.dns_firewall.DnsFirewall`), so
:data:`REGISTRY_DOMAINS` lists every name a pull resolves that its source names. The AWS domains are those of the
``aws`` partition (the regions of :mod:`trainium_eks.facts.regions`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Tuple


@dataclass(frozen=True)
class DomainGroup:
    """The domains one service is reached by.

    :param what: The service.
    :param domains: Its domains, as a DNS Firewall domain list writes them.
    :param source: Where the domains come from.
    """

    what: str
    domains: Tuple[str, ...]
    source: str


AWS_ENDPOINTS = DomainGroup(
    "AWS service endpoints (EKS, EC2, ECR, S3, STS, FSx and EFS mount names, SSM, SQS, pricing), the EKS Auth API "
    "of the Pod Identity agent and other dual-stack endpoints, and the S3 buckets behind ECR's layers, Docker Hub's "
    "and Quay's storage and registry.k8s.io's AWS mirrors",
    ("amazonaws.com", "*.amazonaws.com", "api.aws", "*.api.aws"),
    "AWS General Reference, 'AWS service endpoints': '<service>.<region>.amazonaws.com', and its dual-stack endpoints "
    "'<service>.<region>.api.aws'; botocore's endpoint rule set of eks-auth (the API the EKS Pod Identity agent calls) "
    "resolves to 'https://eks-auth.{Region}.{PartitionResult#dualStackDnsSuffix}' whenever the partition supports dual "
    "stack, 'api.aws' in partition aws (botocore data/partitions.json); ECR user guide, 'Amazon ECR interface VPC "
    "endpoints': image layers are in the S3 bucket 'prod-<region>-starport-layer-bucket'",
)

VPC_NAMES = DomainGroup(
    "The VPC's own host names, which the Resolver answers itself and DNS Firewall filters too",
    ("*.compute.internal", "ec2.internal", "*.ec2.internal"),
    "Route 53 developer guide, 'Route 53 Resolver DNS Firewall': 'It can also block requests for public or private "
    "Amazon EC2 instance names'; Amazon VPC user guide, 'DNS attributes for your VPC': private host names "
    "'ip-<address>.<region>.compute.internal', and 'ip-<address>.ec2.internal' in us-east-1",
)

REGISTRY_DOMAINS: Mapping[str, DomainGroup] = {
    "docker.io": DomainGroup(
        "Docker Hub",
        (
            "registry-1.docker.io",
            "auth.docker.io",
            "production.cloudfront.docker.com",
            "production.cloudflare.docker.com",
            "docker-images-prod.6aa30f8b08e16409b46e0173d6de2f56.r2.cloudflarestorage.com",
        ),
        "Docker docs, 'Allowlist for Docker Desktop' (docs.docker.com/desktop/setup/allow-list, docker/docs "
        "content/manuals/desktop/setup/allow-list.md): registry-1.docker.io 'Docker Pull/Push', auth.docker.io "
        "'Authentication', production.cloudfront.docker.com 'Docker Pull/Push'; the Cloudflare host and the R2 bucket "
        "('Docker Pull/Push (Personal plan / Anonymous)') were listed until docker/docs#25304 (2026-06-08) and are "
        "kept for registries still redirecting there",
    ),
    "public.ecr.aws": DomainGroup(
        "Amazon ECR Public",
        ("public.ecr.aws", "d2glxqk2uabbnd.cloudfront.net", "d5l0dvt14r5h8.cloudfront.net"),
        "EKS Anywhere docs, 'Domains' (aws/eks-anywhere docs/content/en/docs/getting-started/nutanix/domains.md): "
        "public.ecr.aws, d2glxqk2uabbnd.cloudfront.net 'for EKS Anywhere and EKS Distro ECR container images', "
        "d5l0dvt14r5h8.cloudfront.net 'for EKS Anywhere package ECR container images'; docker/sbx-releases#525 shows a "
        "public.ecr.aws layer redirected to https://d2glxqk2uabbnd.cloudfront.net/v2/...",
    ),
    "ghcr.io": DomainGroup(
        "GitHub Container Registry (images and OCI charts; ghcr.io is its own token service)",
        ("ghcr.io", "pkg-containers.githubusercontent.com"),
        "GitHub docs, self-hosted runners' communication: 'Needed for downloading or publishing packages or "
        "containers to GitHub Packages: ... pkg-containers.githubusercontent.com, ghcr.io'",
    ),
    "quay.io": DomainGroup(
        "Quay (etcd's image)",
        ("quay.io", "*.quay.io"),
        "OpenShift docs, 'Configuring your firewall' (openshift/openshift-docs modules/configuring-firewall.adoc): "
        "quay.io 'Provides core container images'; 'You can use the wildcard *.quay.io instead of cdn0[1-2].quay.io "
        "in your allowlist'; its S3 hosts (quayio-production-s3.s3.amazonaws.com) are AWS endpoints",
    ),
    "nvcr.io": DomainGroup(
        "NVIDIA NGC (the NVIDIA device plugin)",
        ("nvcr.io", "authn.nvidia.com", "ngc.download.nvidia.com"),
        "NVIDIA/enroot doc/cmd/import.md: credentials of nvcr.io's token service 'machine authn.nvidia.com'; "
        "ngc.download.nvidia.com from a user's report (NVIDIA/cloud-native-docs#84: 'not enough to just allow "
        "firewall access to nvcr.io but to ngc.download.nvidia.com as well'); NVIDIA publishes no list",
    ),
    "registry.k8s.io": DomainGroup(
        "Kubernetes' registry (JobSet's image)",
        ("registry.k8s.io", "*.pkg.dev"),
        "kubernetes/registry.k8s.io cmd/archeio/docs/request-handling.md: a manifest request is redirected to 'a "
        "region specific Artifact Registry backend' (<region>-docker.pkg.dev, cmd/archeio/main.go), a layer asked from "
        "an AWS address to prod-registry-k8s-io-<region>.s3.dualstack.<region>.amazonaws.com "
        "(internal/app/buckets.go); docs/debugging.md: 'you will need connectivity to several domains'",
    ),
}
"""What a pull from each registry (by its reference name, ``docker.io`` for short names) resolves, besides AWS's
endpoints."""

CHART_REPOSITORY_DOMAINS: Mapping[str, DomainGroup] = {
    "volcano-sh.github.io": DomainGroup(
        "Volcano's Helm repository: its index, and the chart archives it links on GitHub's releases",
        ("volcano-sh.github.io", "github.com", "release-assets.githubusercontent.com", "objects.githubusercontent.com"),
        "volcano-sh/helm-charts index.yaml: 'urls: - https://github.com/volcano-sh/helm-charts/releases/download/"
        "volcano-1.15.0/volcano-1.15.0.tgz'; GitHub docs, self-hosted runners' communication: 'Needed for "
        "downloading release assets: release-assets.githubusercontent.com' (objects.githubusercontent.com before)",
    ),
}
"""What the kubectl provider's Helm resolves for each HTTPS chart repository (OCI ones are registries)."""

DATA_SET_DOMAINS = DomainGroup(
    "CIFAR-10, which the KubeflowTraining and ComposerTraining staging Jobs download",
    ("www.cs.toronto.edu",),
    "trainium_eks.workloads.cifar10_dataset.DATASET_URL",
)


def _union(groups: Iterable[DomainGroup]) -> Tuple[str, ...]:
    return tuple(dict.fromkeys(domain for group in groups for domain in group.domains))


DEFAULT_ALLOWED_DOMAINS: Tuple[str, ...] = _union(
    [AWS_ENDPOINTS, VPC_NAMES, *REGISTRY_DOMAINS.values(), *CHART_REPOSITORY_DOMAINS.values(), DATA_SET_DOMAINS]
)
"""Every domain of :data:`AWS_ENDPOINTS`, :data:`VPC_NAMES`, :data:`REGISTRY_DOMAINS`,
:data:`CHART_REPOSITORY_DOMAINS` and :data:`DATA_SET_DOMAINS`: what the DNS firewall answers by default."""

_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
DOMAIN_PATTERN = re.compile(rf"(\*\.)?{_LABEL}(\.{_LABEL})*")
"""A domain of a DNS Firewall domain list: labels of letters, digits and ``-``, optionally after ``*.``."""


def domain_pattern_problem(value: object) -> Optional[str]:
    """Why ``value`` is not a domain a DNS Firewall domain list accepts, or None."""
    if not isinstance(value, str) or not value:
        return "a domain such as example.com or *.example.com"
    if value == "*":
        return "a domain, not * (every name; that is the firewall's catch-all rule)"
    if len(value) > 255 or not DOMAIN_PATTERN.fullmatch(value.lower()):
        return "a domain of letters, digits and '-' in dot-separated labels, optionally after '*.'"
    return None


def domain_allowed(domains: Iterable[str], name: str) -> bool:
    """Whether a domain list of ``domains`` matches ``name``: an entry ``example.com`` matches that name only,
    ``*.example.com`` the names below it (not ``example.com`` itself), ``*`` every name."""
    name = name.lower().rstrip(".")
    for domain in domains:
        domain = domain.lower().rstrip(".")
        if domain == "*" or domain == name or (domain.startswith("*.") and name.endswith(domain[1:])):
            return True
    return False


def image_registry(image: str) -> str:
    """The registry of an image reference, as a container runtime reads it: its first part when that holds a ``.``
    or a ``:`` or is ``localhost``, otherwise ``docker.io``."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def registry_domains(registry: str) -> Optional[Tuple[str, ...]]:
    """The names a pull from ``registry`` resolves: the registry's own name for an ECR registry of an account
    (``<account>.dkr.ecr.<region>.amazonaws.com``, whose layers are on S3), otherwise :data:`REGISTRY_DOMAINS`'s; None
    for a registry the library does not know."""
    if registry.endswith(".amazonaws.com"):
        return (registry,)
    group = REGISTRY_DOMAINS.get(registry)
    return group.domains if group else None
