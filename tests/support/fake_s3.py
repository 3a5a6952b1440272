"""A local S3 for the dataset staging program's tests: one bucket served path style on 127.0.0.1, checking every
request's signature with botocore's own ``S3SigV4Auth`` (from the headers the request says it signed, as S3 does), with
the faults a test asks for; and the archives and files the tests stage."""

import contextlib
import datetime
import hashlib
import io
import os
import tarfile
import threading
import urllib.parse
import xml.sax.saxutils
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, Iterator, List, Optional
from unittest import mock

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotocoreCredentials

from trainium_eks.manifests.jobs.dataset_staging_program import STAGED_MARKER

ACCESS_KEY = "ASIATESTACCESSKEY"
SECRET_KEY = "test/secret+key"
REGION = "eu-west-1"
BUCKET = "datasets"


def botocore_authorization(
    method: str, url: str, headers: Dict[str, str], when: datetime.datetime, token=None, region: str = REGION
) -> str:
    """The ``Authorization`` header botocore signs for the request, at ``when``."""
    request = AWSRequest(method=method, url=url, headers=dict(headers))
    with mock.patch("botocore.auth.get_current_datetime", return_value=when.replace(tzinfo=None)):
        S3SigV4Auth(BotocoreCredentials(ACCESS_KEY, SECRET_KEY, token), "s3", region).add_auth(request)
    return request.headers["Authorization"]


class FakeS3:
    """Objects of one bucket, served path style, with the faults a test asks for."""

    def __init__(self, public: bool = False) -> None:
        self.objects: Dict[str, bytes] = {}
        self.etags: Dict[str, str] = {}
        self.public = public
        self.page_size = 2
        self.cut: Dict[str, List[int]] = {}
        """key -> byte counts at which successive responses are cut off (Content-Length still announces the whole)."""
        self.throttle = 0
        """How many requests get 503 SlowDown before any is served."""
        self.expired = 0
        """How many requests get 400 ExpiredToken."""
        self.change_after_first: Optional[str] = None
        """A key whose content changes after its first response."""
        self.region = REGION
        """The bucket's region: a request signed for another gets the answer :attr:`wrong_region` names."""
        self.wrong_region = "AuthorizationHeaderMalformed"
        """How S3 answers a request signed for another region: ``AuthorizationHeaderMalformed`` (400, the region in
        the header and the body), ``301`` (the region in the header only), ``IllegalLocationConstraintException``
        (400, no region: a HEAD of the bucket names it)."""
        self.forbidden = 0
        """How many requests get 403 AccessDenied."""
        self.requests: List[Dict[str, str]] = []
        self.bad_signatures = 0
        self.tokens_seen: List[str] = []

    def put(self, key: str, data: bytes) -> None:
        self.objects[key] = data
        self.etags[key] = '"' + hashlib.md5(data).hexdigest() + '"'


def serve(handler_class) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@contextlib.contextmanager
def fake_s3_server() -> Iterator[FakeS3]:
    """A :class:`FakeS3` served on 127.0.0.1 (its ``endpoint``) while the context lasts."""
    fake = FakeS3()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def send(self, status: int, body: bytes, headers: Optional[Dict[str, str]] = None) -> None:
            self.send_response(status)
            for name, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def error(self, status: int, code: str) -> None:
            self.send(status, f"<Error><Code>{code}</Code></Error>".encode(), {"Connection": "close"})

        def verified(self) -> bool:
            authorization = self.headers.get("Authorization")
            fake.requests.append(dict(self.headers))
            if fake.public:
                return True
            if authorization is None:
                return False
            signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
            headers = {name: self.headers[name] for name in signed if name != "host"}
            when = datetime.datetime.strptime(self.headers["x-amz-date"], "%Y%m%dT%H%M%SZ")
            fake.tokens_seen.append(self.headers.get("x-amz-security-token"))
            expected = botocore_authorization(
                "GET",
                f"http://{self.headers['Host']}{self.path}",
                headers,
                when,
                self.headers.get("x-amz-security-token"),
                authorization.split("Credential=")[1].split("/")[2],
            )
            if expected != authorization:
                fake.bad_signatures += 1
                return False
            return True

        def elsewhere(self) -> None:
            named = {"x-amz-bucket-region": fake.region, "Connection": "close"}
            if fake.wrong_region == "301":
                return self.send(301, b"<Error><Code>PermanentRedirect</Code></Error>", named)
            if fake.wrong_region == "IllegalLocationConstraintException":
                return self.error(400, "IllegalLocationConstraintException")
            body = f"<Error><Code>AuthorizationHeaderMalformed</Code><Region>{fake.region}</Region></Error>"
            return self.send(400, body.encode(), named)

        def do_HEAD(self):
            fake.requests.append({"HEAD": self.path, **dict(self.headers)})
            self.send_response(403)
            self.send_header("x-amz-bucket-region", fake.region)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):
            if not self.verified():
                return self.error(403, "SignatureDoesNotMatch")
            scope = (self.headers.get("Authorization") or "").split("Credential=")[-1].split("/")
            if len(scope) > 2 and scope[2] != fake.region:
                return self.elsewhere()
            if fake.forbidden:
                fake.forbidden -= 1
                return self.error(403, "AccessDenied")
            if fake.throttle:
                fake.throttle -= 1
                return self.error(503, "SlowDown")
            if fake.expired:
                fake.expired -= 1
                return self.error(400, "ExpiredToken")
            parts = urllib.parse.urlsplit(self.path)
            bucket, _, key = parts.path.lstrip("/").partition("/")
            if bucket != BUCKET:
                return self.error(404, "NoSuchBucket")
            if not key:
                return self.list(urllib.parse.parse_qs(parts.query, keep_blank_values=True))
            key = urllib.parse.unquote(key)
            if key not in fake.objects:
                return self.error(404, "NoSuchKey")
            if self.headers.get("If-Match") not in (None, fake.etags[key]):
                return self.error(412, "PreconditionFailed")
            data = fake.objects[key]
            start = int(self.headers["Range"].split("=")[1].rstrip("-")) if "Range" in self.headers else 0
            headers = {"ETag": fake.etags[key], "Connection": "close"}
            status = 200
            if start:
                status = 206
                headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            body = data[start:]
            if key == fake.change_after_first:
                fake.change_after_first = None
                fake.put(key, data + b"changed")
            cuts = fake.cut.get(key)
            if cuts:
                cut = cuts.pop(0) - start
                self.send_response(status)
                for name, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body[:cut])
                self.wfile.flush()
                self.close_connection = True
                return
            self.send(status, body, headers)

        def list(self, query):
            assert query["list-type"] == ["2"] and query["encoding-type"] == ["url"]
            prefix = query["prefix"][0]
            keys = sorted(key for key in fake.objects if key.startswith(prefix))
            start = int(query.get("continuation-token", ["0"])[0])
            page = keys[start : start + fake.page_size]
            more = start + fake.page_size < len(keys)
            contents = "".join(
                f"<Contents><Key>{xml.sax.saxutils.escape(urllib.parse.quote_plus(key, safe='/'))}</Key></Contents>"
                for key in page
            )
            token = f"<NextContinuationToken>{start + fake.page_size}</NextContinuationToken>" if more else ""
            body = (
                '<?xml version="1.0" encoding="UTF-8"?>'
                '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>{contents}{token}</ListBucketResult>"
            ).encode()
            self.send(200, body, {"Connection": "close"})

    server = serve(Handler)
    fake.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def tarball(files: Dict[str, bytes], mode: str = "w:gz", top: str = "bert") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


SHARDS = {f"hdf5/training_{index}.hdf5": os.urandom(300_000 + index) for index in range(3)}


def staged_files(destination: Path) -> Dict[str, bytes]:
    return {
        str(path.relative_to(destination)): path.read_bytes()
        for path in destination.rglob("*")
        if path.is_file() and path.name != STAGED_MARKER
    }
