#!/usr/bin/env python3
"""Read, from each registry, the digest that every image pin of ``trainium_eks/facts/versions.py`` resolves to now,
and compare it with the pinned one.

    make pin-digests                        # or: python scripts/pin_digests.py [--region us-west-2]

For each pin it prints the digest the registry serves for the tag (for a multi-platform tag, its index: what a node's
pull resolves), the digest in ``versions.py``, and ``same``, ``DIFFERENT`` (the tag was moved or rebuilt since), ``new``
(no digest pinned yet) or the error. It changes nothing: copy a digest into ``versions.py`` with the date it was read.
It needs the registries (Docker Hub, public.ecr.aws, quay.io, nvcr.io), and AWS credentials for the image in the EKS
registry of ``--region`` (boto3's ``ecr:GetAuthorizationToken``); without them that line says so. Exit status 1 when a
pinned digest differs or a registry could not be read.

The protocol is the OCI distribution specification's (``HEAD /v2/<name>/manifests/<tag>``, the digest in the
``Docker-Content-Digest`` header) with the token authentication of the Docker registry (a ``401`` whose
``WWW-Authenticate: Bearer realm=...,service=...,scope=...`` names where an anonymous pull token is issued).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainium_eks.facts import versions  # noqa: E402
from trainium_eks.facts.regions import eks_registry  # noqa: E402

MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
"""Index types first: a multi-platform tag answers with its index, whose digest is what a pull resolves."""

DOCKER_HUB = "registry-1.docker.io"
TIMEOUT_SECONDS = 20


def registry_and_name(repository: str, region: str) -> Tuple[str, str]:
    """The registry host and repository name of an :class:`~trainium_eks.facts.versions.ImagePin` repository
    (``docker.io/x`` is Docker Hub's ``registry-1.docker.io``; a path without a host is in the EKS registry of
    ``region``)."""
    first, _, rest = repository.partition("/")
    if "." not in first and ":" not in first:
        return eks_registry(region), repository
    if first == "docker.io":
        return DOCKER_HUB, rest
    return first, rest


def _challenge(header: str) -> Tuple[str, Dict[str, str]]:
    scheme, _, params = header.partition(" ")
    return scheme.lower(), dict(re.findall(r'(\w+)="([^"]*)"', params))


def manifest_digest(
    base_url: str,
    name: str,
    tag: str,
    *,
    basic_credentials: Optional[Callable[[], str]] = None,
    opener: Callable = urllib.request.urlopen,
) -> str:
    """The ``Docker-Content-Digest`` of ``name:tag`` at the registry ``base_url`` (``https://host``), fetching an
    anonymous bearer token when the registry asks for one, or sending ``basic_credentials()`` when it asks for
    basic authentication."""
    url = f"{base_url}/v2/{name}/manifests/{tag}"
    headers = {"Accept": MANIFEST_TYPES}
    for _ in range(2):
        request = urllib.request.Request(url, method="HEAD", headers=headers)
        try:
            with opener(request, timeout=TIMEOUT_SECONDS) as response:
                digest = response.headers.get("Docker-Content-Digest")
                if not digest or not versions.IMAGE_DIGEST.fullmatch(digest):
                    raise RuntimeError(f"{url}: no sha256 Docker-Content-Digest in the answer ({digest!r})")
                return digest
        except urllib.error.HTTPError as error:
            if error.code != 401 or "Authorization" in headers:
                raise RuntimeError(f"{url}: HTTP {error.code} {error.reason}") from None
            scheme, params = _challenge(error.headers.get("WWW-Authenticate", ""))
            if scheme == "bearer" and params.get("realm"):
                query = {k: v for k, v in params.items() if k in ("service", "scope")}
                token_url = f"{params['realm']}?{urllib.parse.urlencode(query)}"
                with opener(urllib.request.Request(token_url), timeout=TIMEOUT_SECONDS) as answer:
                    body = json.load(answer)
                headers["Authorization"] = f"Bearer {body.get('token') or body.get('access_token')}"
            elif scheme == "basic" and basic_credentials is not None:
                headers["Authorization"] = f"Basic {basic_credentials()}"
            else:
                raise RuntimeError(f"{url}: the registry asks for {scheme or 'an unknown'} authentication") from None
    raise RuntimeError(f"{url}: refused after authentication")


def ecr_credentials(region: str) -> Callable[[], str]:
    """Basic credentials for the EKS registry of ``region`` from ``ecr:GetAuthorizationToken`` (boto3)."""

    def credentials() -> str:
        import boto3

        data = boto3.client("ecr", region_name=region).get_authorization_token()["authorizationData"][0]
        return data["authorizationToken"]

    return credentials


def image_pins() -> Mapping[str, versions.ImagePin]:
    """Every :class:`~trainium_eks.facts.versions.ImagePin` of ``versions.py``, by name."""
    return {name: pin for name, pin in vars(versions).items() if isinstance(pin, versions.ImagePin)}


def compare(
    pins: Mapping[str, versions.ImagePin],
    *,
    region: str,
    base_urls: Optional[Mapping[str, str]] = None,
    opener: Callable = urllib.request.urlopen,
) -> List[Tuple[str, str, str, str]]:
    """(pin name, image, digest read or the error, verdict) for every pin; ``base_urls`` maps a registry host to
    the URL to ask instead of ``https://<host>``."""
    rows = []
    for name, pin in sorted(pins.items()):
        host, repository = registry_and_name(pin.repository, region)
        base = (base_urls or {}).get(host, f"https://{host}")
        basic = ecr_credentials(region) if host == eks_registry(region) else None
        try:
            read = manifest_digest(base, repository, pin.tag, basic_credentials=basic, opener=opener)
        except Exception as error:  # every failure is a line of the table, not the end of the run
            rows.append((name, f"{pin.repository}:{pin.tag}", str(error), "ERROR"))
            continue
        verdict = "new" if pin.digest is None else "same" if read == pin.digest else "DIFFERENT"
        rows.append((name, f"{pin.repository}:{pin.tag}", read, verdict))
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--region", default="us-west-2", help="region of the EKS registry (default: us-west-2)")
    args = parser.parse_args(argv)
    rows = compare(image_pins(), region=args.region)
    for name, image, digest, verdict in rows:
        pinned = image_pins()[name].digest or "-"
        print(f"{verdict:9}  {name:24}  {image}\n           read:   {digest}\n           pinned: {pinned}")
    return 1 if any(verdict in ("DIFFERENT", "ERROR") for *_, verdict in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
