"""scripts/pin_digests.py against a registry on 127.0.0.1 that speaks the distribution protocol and its token
authentication."""

import base64
import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from tests.support.apps import REPO
from trainium_eks.facts import versions

SPEC = importlib.util.spec_from_file_location("pin_digests", REPO / "scripts" / "pin_digests.py")
pin_digests = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(pin_digests)

INDEX = "sha256:" + "1" * 64
MOVED = "sha256:" + "2" * 64
TOKEN = "pull-token"
ECR_AUTH = base64.b64encode(b"AWS:secret").decode()


class Registry(BaseHTTPRequestHandler):
    """Manifests by (name, tag); ``/token`` issues a pull token for ``scope``; ``ecr/*`` asks for basic auth."""

    manifests = {}
    seen = []

    def log_message(self, *_):
        pass

    def do_GET(self):
        url = urlparse(self.path)
        assert url.path == "/token"
        query = parse_qs(url.query)
        self.seen.append(("token", query["service"][0], query["scope"][0]))
        body = json.dumps({"token": TOKEN}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self):
        _, _, rest = self.path.partition("/v2/")
        name, _, tag = rest.partition("/manifests/")
        self.seen.append(("head", name, self.headers.get("Accept", "").split(",")[0]))
        auth = self.headers.get("Authorization")
        if name.startswith("ecr/"):
            allowed = auth == f"Basic {ECR_AUTH}"
            challenge = 'Basic realm="ecr"'
        else:
            allowed = auth == f"Bearer {TOKEN}"
            host = f"http://127.0.0.1:{self.server.server_port}"
            challenge = f'Bearer realm="{host}/token",service="registry.test",scope="repository:{name}:pull"'
        if not allowed:
            self.send_response(401)
            self.send_header("WWW-Authenticate", challenge)
            self.end_headers()
            return
        digest = self.manifests.get((name, tag))
        self.send_response(200 if digest else 404)
        if digest:
            self.send_header("Docker-Content-Digest", digest)
        self.end_headers()


@pytest.fixture()
def registry():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Registry.manifests, Registry.seen = {}, []
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def pin(repository, tag, digest=None):
    source = "test" if digest else versions.DIGEST_NOT_READ
    return versions.ImagePin(repository, tag, "test", "2026-12-01", digest=digest, digest_source=source)


def test_a_tag_is_read_with_an_anonymous_token_and_compared_with_its_pin(registry):
    Registry.manifests = {("library/python", "3.12"): INDEX, ("neuron/plugin", "1.0"): MOVED, ("etcd", "v3"): INDEX}
    pins = {
        "SAME": pin("docker.io/library/python", "3.12", INDEX),
        "MOVED": pin("public.ecr.aws/neuron/plugin", "1.0", INDEX),
        "NEW": pin("quay.io/etcd", "v3"),
        "GONE": pin("quay.io/etcd", "v4"),
    }
    urls = {"registry-1.docker.io": registry, "public.ecr.aws": registry, "quay.io": registry}
    rows = {
        name: (digest, verdict)
        for name, _, digest, verdict in pin_digests.compare(pins, region="us-west-2", base_urls=urls)
    }
    assert rows["SAME"] == (INDEX, "same")
    assert rows["MOVED"] == (MOVED, "DIFFERENT")
    assert rows["NEW"] == (INDEX, "new")
    assert rows["GONE"][1] == "ERROR" and "HTTP 404" in rows["GONE"][0]
    assert ("token", "registry.test", "repository:library/python:pull") in Registry.seen
    accepts = {accept for kind, _, accept in Registry.seen if kind == "head"}
    assert accepts == {"application/vnd.oci.image.index.v1+json"}, "an index first: what a node's pull resolves"


def test_the_eks_registry_is_read_with_ecr_credentials(registry):
    Registry.manifests = {("ecr/plugin", "v1"): INDEX}
    digest = pin_digests.manifest_digest(registry, "ecr/plugin", "v1", basic_credentials=lambda: ECR_AUTH)
    assert digest == INDEX
    with pytest.raises(RuntimeError, match="basic authentication"):
        pin_digests.manifest_digest(registry, "ecr/plugin", "v1")


def test_hosts_and_names_of_the_pins():
    assert pin_digests.registry_and_name("docker.io/library/python", "us-west-2") == (
        "registry-1.docker.io",
        "library/python",
    )
    assert pin_digests.registry_and_name("quay.io/coreos/etcd", "us-west-2") == ("quay.io", "coreos/etcd")
    host, name = pin_digests.registry_and_name(versions.EFA_DEVICE_PLUGIN.repository, "us-east-1")
    assert host.endswith(".dkr.ecr.us-east-1.amazonaws.com") and name == "eks/aws-efa-k8s-device-plugin"
    assert set(pin_digests.image_pins()) >= {"JOB_RELEASE_IMAGE", "KARPENTER_CONTROLLER", "NEURON_DEVICE_PLUGIN"}
