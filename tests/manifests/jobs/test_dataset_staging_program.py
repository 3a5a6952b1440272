"""The dataset staging program against a local S3 (:mod:`tests.support.fake_s3`: path style, on 127.0.0.1, checking
every request's signature with botocore's own ``S3SigV4Auth``, as S3 checks it), a local container credentials
endpoint as EKS Pod Identity's agent serves it, and a local HTTPS site; and run as the staging Job runs it
(``python3 -I -B``). Faults are the servers': bodies cut short, throttling, credentials that expire, an object that
changes while it is read, a bucket in another region."""

import datetime
import functools
import hashlib
import io
import ipaddress
import json
import os
import ssl
import subprocess
import sys
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import List, Tuple

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.fake_s3 import (
    ACCESS_KEY,
    BUCKET,
    REGION,
    SECRET_KEY,
    SHARDS,
    botocore_authorization,
    fake_s3_server,
    serve,
    staged_files,
    tarball,
)
from trainium_eks.manifests.jobs import dataset_staging_program as program
from trainium_eks.manifests.jobs.dataset_staging_program import (
    S3,
    STAGED_MARKER,
    Credentials,
    Refused,
    listing_page,
    relative_path,
    sign,
)

TOKEN_FILE_TEXT = "pod-identity-token-1"

WHEN = datetime.datetime(2026, 12, 7, 13, 5, 9, tzinfo=datetime.timezone.utc)


@pytest.mark.parametrize(
    "url",
    [
        "https://datasets.s3.eu-west-1.amazonaws.com/bert/wikicorpus.tar",
        "https://s3.eu-west-1.amazonaws.com/my.data.set/a%20b/c%2Bd~e%25f/%C3%BC.txt",
        "https://datasets.s3.eu-west-1.amazonaws.com/?continuation-token=1%2Fab%2B%3D%3D&encoding-type=url"
        "&list-type=2&prefix=x%20y%2F",
        "http://127.0.0.1:8123/datasets?list-type=2&prefix=",
    ],
)
@pytest.mark.parametrize("token", [None, "session/token+=="])
def test_the_signature_is_botocores(url, token):
    headers = {"Range": "bytes=100-", "If-Match": '"0123abcd"'}
    signed = sign("GET", url, headers, (ACCESS_KEY, SECRET_KEY, token), REGION, WHEN)
    sent = {name: value for name, value in signed.items() if name != "Authorization"}
    assert signed["Authorization"] == botocore_authorization("GET", url, sent, WHEN, token)
    assert signed["x-amz-content-sha256"] == hashlib.sha256(b"").hexdigest()
    assert ("x-amz-security-token" in signed) == (token is not None)


def test_the_signature_of_the_s3_references_example():
    """Amazon S3 API Reference, "Examples: Signature Calculations in AWS Signature Version 4", GET Object."""
    signed = sign(
        "GET",
        "https://examplebucket.s3.amazonaws.com/test.txt",
        {"Range": "bytes=0-9"},
        ("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", None),
        "us-east-1",
        datetime.datetime(2013, 5, 24, tzinfo=datetime.timezone.utc),
    )
    assert signed["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )


def test_keys_are_encoded_as_botocore_encodes_them_and_the_addressing_follows_the_bucket_name():
    assert S3("plain", REGION, None).object_url("a b/c+d~e.txt") == (
        "https://plain.s3.eu-west-1.amazonaws.com/a%20b/c%2Bd~e.txt"
    )
    assert S3("with.dots", REGION, None).object_url("k") == "https://s3.eu-west-1.amazonaws.com/with.dots/k"
    assert S3("b", REGION, None, endpoint="http://127.0.0.1:9/").object_url("k") == "http://127.0.0.1:9/b/k"


@pytest.mark.parametrize(
    "key, path",
    [
        ("data/a.bin", "a.bin"),
        ("data/sub/b c.bin", os.path.join("sub", "b c.bin")),
        ("data/sub/", None),
        ("data/", None),
    ],
)
def test_a_key_lands_at_its_path_below_the_prefix(key, path):
    assert relative_path("data/", key) == path


@pytest.mark.parametrize("key", ["data/../x", "data//x", "data/./x", "data/a/../../x", "data/a\0b", "other/x"])
def test_a_key_that_would_land_elsewhere_is_refused(key):
    with pytest.raises(Refused):
        relative_path("data/", key)


def test_a_listing_page_decodes_its_keys_and_says_whether_more_follow():
    body = (
        b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<IsTruncated>true</IsTruncated><Contents><Key>a+b%2Bc%C3%BC</Key></Contents>"
        b"<NextContinuationToken>next/1</NextContinuationToken></ListBucketResult>"
    )
    assert listing_page(body) == (["a b+c\u00fc"], "next/1")
    last = body.replace(b"<IsTruncated>true", b"<IsTruncated>false")
    assert listing_page(last) == (["a b+c\u00fc"], None)


@pytest.fixture
def credentials_endpoint(tmp_path):
    """A container credentials endpoint: it answers only the token in the token file, with credentials whose
    expiry the test sets."""
    token_file = tmp_path / "eks-pod-identity-token"
    token_file.write_text(TOKEN_FILE_TEXT)
    state = {"expires_in": 3600.0, "fetches": [], "session": 0, "throttle": 0, "refuse": False}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            state["fetches"].append(self.headers.get("Authorization"))
            if state["throttle"]:
                state["throttle"] -= 1
                self.send_response(429)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if state["refuse"] or self.headers.get("Authorization") != token_file.read_text():
                self.send_response(401)
                self.end_headers()
                return
            state["session"] += 1
            expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=state["expires_in"])
            body = json.dumps(
                {
                    "AccessKeyId": ACCESS_KEY,
                    "SecretAccessKey": SECRET_KEY,
                    "Token": f"session-{state['session']}",
                    "AccountId": "123456789012",
                    "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = serve(Handler)
    environ = {
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": f"http://127.0.0.1:{server.server_address[1]}/v1/credentials",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(token_file),
    }
    yield environ, state, token_file
    server.shutdown()
    server.server_close()


@pytest.fixture
def s3():
    with fake_s3_server() as fake:
        yield fake


def run_stage(tmp_path, s3, source, environ, mode="signed", sha256="-", pauses=None):
    destination = tmp_path / "shared" / "datasets" / "bert"
    line = program.stage(
        str(destination),
        source,
        mode == "signed",
        sha256,
        REGION,
        {**environ, "AWS_ENDPOINT_URL_S3": s3.endpoint},
        sleep=(pauses if pauses is not None else []).append,
    )
    return destination, line


def test_a_tarball_is_streamed_unpacked_and_its_single_folder_becomes_the_destination(
    tmp_path, s3, credentials_endpoint
):
    environ, state, _ = credentials_endpoint
    s3.put("bert/wikicorpus.tar.gz", tarball(SHARDS))
    destination, line = run_stage(tmp_path, s3, f"s3://{BUCKET}/bert/wikicorpus.tar.gz", environ)
    assert staged_files(destination) == SHARDS
    assert (destination / STAGED_MARKER).exists()
    assert not list((tmp_path / "shared" / "datasets").glob(".staging-*"))
    assert line.startswith(f"staged s3://{BUCKET}/bert/wikicorpus.tar.gz into {destination}: 3 files")
    assert s3.bad_signatures == 0 and len(state["fetches"]) == 1
    assert s3.tokens_seen == ["session-1"]


def test_a_staged_dataset_is_not_staged_again(tmp_path, s3, credentials_endpoint):
    environ, _, _ = credentials_endpoint
    s3.put("bert/wikicorpus.tar", tarball(SHARDS, mode="w"))
    destination, _ = run_stage(tmp_path, s3, f"s3://{BUCKET}/bert/wikicorpus.tar", environ)
    requests = len(s3.requests)
    (destination / "kept").write_text("the first copy")
    _, line = run_stage(tmp_path, s3, f"s3://{BUCKET}/bert/wikicorpus.tar", environ)
    assert line == f"already staged: {destination}"
    assert len(s3.requests) == requests and (destination / "kept").exists()


def test_a_copy_cut_short_before_is_replaced_whole(tmp_path, s3, credentials_endpoint):
    environ, _, _ = credentials_endpoint
    s3.put("bert/wikicorpus.tar", tarball(SHARDS, mode="w"))
    leftovers = tmp_path / "shared" / "datasets"
    (leftovers / ".staging-bert" / "bert").mkdir(parents=True)
    (leftovers / ".staging-bert" / "bert" / "half").write_bytes(b"x")
    (leftovers / "bert").mkdir()
    (leftovers / "bert" / "old").write_bytes(b"y")
    destination, _ = run_stage(tmp_path, s3, f"s3://{BUCKET}/bert/wikicorpus.tar", environ)
    assert staged_files(destination) == SHARDS


def test_a_body_cut_off_is_resumed_from_where_it_broke_while_the_object_is_the_same(tmp_path, s3, credentials_endpoint):
    environ, _, _ = credentials_endpoint
    data = tarball(SHARDS)
    s3.put("bert/wikicorpus.tar.gz", data)
    s3.cut["bert/wikicorpus.tar.gz"] = [len(data) // 3, 2 * len(data) // 3]
    pauses: List[float] = []
    destination, _ = run_stage(tmp_path, s3, f"s3://{BUCKET}/bert/wikicorpus.tar.gz", environ, pauses=pauses)
    assert staged_files(destination) == SHARDS
    gets = [request for request in s3.requests if "Range" in request]
    assert [request["Range"] for request in gets] == [f"bytes={len(data) // 3}-", f"bytes={2 * len(data) // 3}-"]
    assert {request["If-Match"] for request in gets} == {s3.etags["bert/wikicorpus.tar.gz"]}
    assert len(pauses) == 2 and s3.bad_signatures == 0


def test_an_object_that_changes_while_it_is_read_is_refused_and_nothing_is_staged(tmp_path, s3, credentials_endpoint):
    environ, _, _ = credentials_endpoint
    data = tarball(SHARDS)
    s3.put("bert/wikicorpus.tar.gz", data)
    s3.cut["bert/wikicorpus.tar.gz"] = [len(data) // 2]
    s3.change_after_first = "bert/wikicorpus.tar.gz"
    with pytest.raises(Refused, match="changed while it was read"):
        run_stage(tmp_path, s3, f"s3://{BUCKET}/bert/wikicorpus.tar.gz", environ)
    assert not (tmp_path / "shared" / "datasets" / "bert").exists()


def test_throttling_is_waited_out_and_expired_credentials_are_fetched_again_once(tmp_path, s3, credentials_endpoint):
    environ, state, _ = credentials_endpoint
    s3.put("bert/wikicorpus.tar", tarball(SHARDS, mode="w"))
    s3.throttle = 2
    s3.expired = 1
    pauses: List[float] = []
    destination, _ = run_stage(tmp_path, s3, f"s3://{BUCKET}/bert/wikicorpus.tar", environ, pauses=pauses)
    assert staged_files(destination) == SHARDS
    assert len(pauses) == 2 and all(0 <= pause <= program.BACKOFF_CAP_SECONDS for pause in pauses)
    assert len(state["fetches"]) == 2 and s3.tokens_seen[-1] == "session-2"


def test_credentials_that_stay_expired_fail_the_run(tmp_path, s3, credentials_endpoint):
    environ, state, _ = credentials_endpoint
    s3.put("bert/wikicorpus.tar", tarball(SHARDS, mode="w"))
    s3.expired = 2
    with pytest.raises(Refused, match="ExpiredToken"):
        run_stage(tmp_path, s3, f"s3://{BUCKET}/bert/wikicorpus.tar", environ)
    assert len(state["fetches"]) == 2


@pytest.mark.parametrize(
    "answer, heads",
    [("AuthorizationHeaderMalformed", 0), ("301", 0), ("IllegalLocationConstraintException", 1)],
)
def test_a_bucket_in_another_region_is_read_there(tmp_path, s3, credentials_endpoint, answer, heads):
    """S3's answers to a request for a bucket elsewhere, as botocore's ``S3RegionRedirectorv2`` reads them: the region
    in ``x-amz-bucket-region`` (and the error's ``Region``), or, when the answer names none, in a HEAD of the bucket."""
    environ, _, _ = credentials_endpoint
    s3.region = "us-west-2"
    s3.wrong_region = answer
    s3.put("bert/wikicorpus.tar", tarball(SHARDS, mode="w"))
    destination, _ = run_stage(tmp_path, s3, f"s3://{BUCKET}/bert/wikicorpus.tar", environ)
    assert staged_files(destination) == SHARDS
    assert len([request for request in s3.requests if "HEAD" in request]) == heads
    scopes = [request["Authorization"].split("/")[2] for request in s3.requests if "HEAD" not in request]
    assert scopes == [REGION, "us-west-2"] and s3.bad_signatures == 0


def test_a_403_fails_the_run_for_the_job_to_retry_and_a_404_for_good(tmp_path, s3, credentials_endpoint):
    """A 403 may be an association or a policy not yet in effect (exit status 1); a missing key never appears by
    itself (3)."""
    environ, _, _ = credentials_endpoint
    environ = {**environ, "AWS_ENDPOINT_URL_S3": s3.endpoint}
    s3.put("bert/wikicorpus.tar", tarball(SHARDS, mode="w"))
    s3.forbidden = 1
    destination = str(tmp_path / "bert")
    assert program.main([destination, f"s3://{BUCKET}/bert/wikicorpus.tar", "signed", "-", REGION], environ) == 1
    assert program.main([destination, f"s3://{BUCKET}/bert/missing.tar", "signed", "-", REGION], environ) == 3
    assert program.main([destination, f"s3://{BUCKET}/bert/wikicorpus.tar", "signed", "-", REGION], environ) == 0


def test_a_throttled_credentials_endpoint_is_waited_out_and_its_refusal_is_no_s3_refusal(credentials_endpoint):
    environ, state, _ = credentials_endpoint
    state["throttle"] = 2
    pauses: List[float] = []
    assert Credentials(environ, sleep=pauses.append).get()[2] == "session-1"
    assert len(pauses) == 2
    state["refuse"] = True
    with pytest.raises(program.Unavailable, match="HTTP 401"):
        Credentials(environ, sleep=pauses.append).get()
    assert len(pauses) == 2, "a refusal is not retried"


def test_without_a_region_the_pods_aws_region_is_tried_first(tmp_path, s3, credentials_endpoint):
    environ, _, _ = credentials_endpoint
    s3.put("bert/wikicorpus.tar", tarball(SHARDS, mode="w"))
    destination = tmp_path / "bert"
    environ = {**environ, "AWS_ENDPOINT_URL_S3": s3.endpoint, "AWS_REGION": "ap-south-1"}
    program.stage(str(destination), f"s3://{BUCKET}/bert/wikicorpus.tar", True, "-", "-", environ)
    assert staged_files(destination) == SHARDS
    scopes = [request["Authorization"].split("/")[2] for request in s3.requests]
    assert scopes == ["ap-south-1", REGION]


def test_a_refusal_is_not_retried(tmp_path, s3, credentials_endpoint):
    environ, _, _ = credentials_endpoint
    with pytest.raises(Refused, match="HTTP 404 NoSuchKey"):
        run_stage(tmp_path, s3, f"s3://{BUCKET}/bert/missing.tar", environ)
    assert len(s3.requests) == 1


def test_throttling_that_does_not_end_fails_the_run_for_the_job_to_retry(tmp_path, s3, credentials_endpoint):
    environ, _, _ = credentials_endpoint
    s3.put("bert/wikicorpus.tar", tarball(SHARDS, mode="w"))
    s3.throttle = program.ATTEMPTS
    with pytest.raises(program.urllib.error.HTTPError):
        run_stage(tmp_path, s3, f"s3://{BUCKET}/bert/wikicorpus.tar", environ)
    assert len(s3.requests) == program.ATTEMPTS


def test_credentials_are_fetched_again_before_they_expire_with_the_token_file_read_anew(credentials_endpoint):
    environ, state, token_file = credentials_endpoint
    state["expires_in"] = program.REFRESH_SECONDS - 60
    credentials = Credentials(environ)
    assert credentials.get()[2] == "session-1"
    token_file.write_text("pod-identity-token-2")
    assert credentials.get()[2] == "session-2"
    assert state["fetches"] == [TOKEN_FILE_TEXT, "pod-identity-token-2"]
    state["expires_in"] = 3600.0
    credentials.get()
    assert credentials.get()[2] == "session-3" and len(state["fetches"]) == 3


@pytest.mark.parametrize(
    "url",
    ["http://example.com/v1/credentials", "http://169.254.169.254/latest/meta-data/", "ftp://127.0.0.1/x"],
)
def test_a_credentials_url_that_is_not_the_agents_is_refused(tmp_path, url):
    environ = {"AWS_CONTAINER_CREDENTIALS_FULL_URI": url, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(tmp_path)}
    with pytest.raises(Refused):
        Credentials(environ)


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.170.23/v1/credentials",
        "http://[fd00:ec2::23]/v1/credentials",
        "http://127.0.0.2:8080/v1/credentials",
        "http://[::1]/v1/credentials",
        "https://credentials.example.com/v1",
    ],
)
def test_the_pod_identity_agents_addresses_are_accepted(tmp_path, url):
    environ = {"AWS_CONTAINER_CREDENTIALS_FULL_URI": url, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(tmp_path)}
    assert Credentials(environ).url == url


def test_a_prefix_is_copied_page_by_page_with_each_key_at_its_path(tmp_path, s3, credentials_endpoint):
    environ, _, _ = credentials_endpoint
    files = {"a.bin": b"a", "sub/b c+d.bin": b"bc", "sub/\u00fc.bin": b"u", "sub/deeper/e.bin": b"e" * 5000}
    for name, data in files.items():
        s3.put(f"cifar/{name}", data)
    s3.put("cifar/", b"")
    s3.put("cifar/sub/", b"")
    s3.put("cifar-old/stale.bin", b"not this")
    destination, line = run_stage(tmp_path, s3, f"s3://{BUCKET}/cifar", environ)
    assert staged_files(destination) == files
    assert line.endswith(f"{len(files)} files, {sum(map(len, files.values()))} bytes")
    lists = [request for request in s3.requests if "Range" not in request]
    assert s3.bad_signatures == 0 and len(lists) > 3


def test_a_key_that_would_land_outside_the_destination_is_refused(tmp_path, s3, credentials_endpoint):
    environ, _, _ = credentials_endpoint
    s3.put("cifar/a.bin", b"a")
    s3.put("cifar/../escape.bin", b"x")
    with pytest.raises(Refused, match="would not land below the destination"):
        run_stage(tmp_path, s3, f"s3://{BUCKET}/cifar/", environ)
    assert not (tmp_path / "shared" / "datasets" / "escape.bin").exists()


def test_an_empty_prefix_is_refused(tmp_path, s3, credentials_endpoint):
    environ, _, _ = credentials_endpoint
    with pytest.raises(Refused, match="no object under"):
        run_stage(tmp_path, s3, f"s3://{BUCKET}/nothing/", environ)


def test_a_public_bucket_is_read_without_credentials(tmp_path, s3):
    s3.public = True
    s3.put("bert/wikicorpus.tar", tarball(SHARDS, mode="w"))
    destination, _ = run_stage(tmp_path, s3, f"s3://{BUCKET}/bert/wikicorpus.tar", {}, mode="unsigned")
    assert staged_files(destination) == SHARDS
    assert not any("Authorization" in request for request in s3.requests)


def test_signed_staging_without_pod_identity_fails_the_run_for_the_job_to_retry(tmp_path, s3):
    """A pod created before its service account's Pod Identity association has no credentials; a new pod may."""
    with pytest.raises(program.Unavailable, match="no Pod Identity credentials"):
        run_stage(tmp_path, s3, f"s3://{BUCKET}/bert/wikicorpus.tar", {})


def member(name: str, kind: bytes = tarfile.REGTYPE, target: str = "", data: bytes = b"x") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info


@pytest.mark.parametrize(
    "info",
    [
        member("../escape"),
        member("bert/link", tarfile.SYMTYPE, "/etc/passwd"),
        member("bert/link", tarfile.SYMTYPE, "../../escape"),
        member("bert/hard", tarfile.LNKTYPE, "../escape"),
        member("bert/device", tarfile.CHRTYPE),
    ],
    ids=["parent", "symlink-absolute", "symlink-parent", "hardlink", "device"],
)
def test_an_archive_member_that_would_land_outside_or_is_a_device_is_refused(tmp_path, s3, credentials_endpoint, info):
    environ, _, _ = credentials_endpoint
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.addfile(info, io.BytesIO(b"x") if info.type == tarfile.REGTYPE else None)
    s3.put("bad.tar", buffer.getvalue())
    with pytest.raises(Refused, match="the archive holds"):
        run_stage(tmp_path, s3, f"s3://{BUCKET}/bad.tar", environ)
    assert not (tmp_path / "shared" / "datasets" / "bert").exists()
    assert not (tmp_path / "escape").exists() and not (tmp_path / "shared" / "escape").exists()


def test_an_absolute_member_lands_below_the_destination(tmp_path, s3, credentials_endpoint):
    """The ``data`` filter strips a member's leading ``/`` (Python's tarfile documentation, "Extraction filters")."""
    environ, _, _ = credentials_endpoint
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.addfile(member("/etc/escape"), io.BytesIO(b"x"))
    s3.put("absolute.tar", buffer.getvalue())
    destination, _ = run_stage(tmp_path, s3, f"s3://{BUCKET}/absolute.tar", environ)
    assert staged_files(destination) == {"escape": b"x"}


def test_an_archive_without_a_file_is_refused(tmp_path, s3, credentials_endpoint):
    environ, _, _ = credentials_endpoint
    s3.put("empty.tar", tarball({}, mode="w"))
    with pytest.raises(Refused, match="no file"):
        run_stage(tmp_path, s3, f"s3://{BUCKET}/empty.tar", environ)


def self_signed_certificate(folder: Path) -> Tuple[Path, Path]:
    """A certificate for 127.0.0.1 that is its own authority, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    certificate_file, key_file = folder / "certificate.pem", folder / "key.pem"
    certificate_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return certificate_file, key_file


@pytest.fixture
def https_site(tmp_path, monkeypatch):
    """A folder served over HTTPS on 127.0.0.1, with a certificate this process trusts (``SSL_CERT_FILE``, which
    OpenSSL reads when the program's default context loads its authorities)."""
    site = tmp_path / "site"
    site.mkdir()
    certificate, key = self_signed_certificate(tmp_path)

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate))
    yield site, f"https://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_an_https_tarball_is_unpacked_only_when_its_sha256_is_the_one_given(tmp_path, https_site):
    site, base = https_site
    archive = tarball({"data_batch_1": b"batch", "batches.meta": b"meta"}, top="cifar-10-batches-py")
    (site / "cifar-10-python.tar.gz").write_bytes(archive)
    url = f"{base}/cifar-10-python.tar.gz"
    shared = tmp_path / "shared"
    with pytest.raises(Refused, match="expected 0000"):
        program.stage(str(shared / "cifar10"), url, False, "0" * 64, "-", {})
    assert not (shared / "cifar10").exists()
    line = program.stage(str(shared / "cifar10"), url, False, hashlib.sha256(archive).hexdigest(), "-", {})
    assert staged_files(shared / "cifar10") == {"data_batch_1": b"batch", "batches.meta": b"meta"}
    assert sorted(path.name for path in shared.iterdir()) == ["cifar10"], "no work folder, no archive left"
    assert line == f"staged {url} into {shared / 'cifar10'}: 2 files, 9 bytes"


def test_the_program_runs_as_the_job_runs_it(tmp_path, s3, credentials_endpoint):
    """``python3 -I -B <file> <arguments>``: isolated mode, no bytecode written, exit status 0 then 0 again."""
    environ, _, _ = credentials_endpoint
    s3.put("bert/wikicorpus.tar.gz", tarball(SHARDS))
    destination = tmp_path / "shared" / "datasets" / "bert"
    command = [
        sys.executable,
        "-I",
        "-B",
        program.__file__,
        str(destination),
        f"s3://{BUCKET}/bert/wikicorpus.tar.gz",
        "signed",
        "-",
        REGION,
    ]
    env = {**environ, "AWS_ENDPOINT_URL_S3": s3.endpoint, "PATH": os.environ.get("PATH", "")}
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert staged_files(destination) == SHARDS
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and again.stdout.strip() == f"already staged: {destination}"


def test_a_refusal_exits_with_status_3_and_a_usage_error_with_2(tmp_path, s3, credentials_endpoint):
    environ, _, _ = credentials_endpoint
    env = {**environ, "AWS_ENDPOINT_URL_S3": s3.endpoint}
    destination = str(tmp_path / "bert")
    assert program.main([destination, f"s3://{BUCKET}/missing.tar", "signed", "-", REGION], env) == 3
    assert program.main([destination, f"s3://{BUCKET}/missing.tar", "maybe", "-", REGION], env) == 2
    assert program.main(["relative", f"s3://{BUCKET}/missing.tar", "signed", "-", REGION], env) == 2
    assert program.main([destination, "https://example.com/a.tar", "unsigned", "-", REGION], env) == 2
    assert program.main([destination], env) == 2
