"""Dataset staging: copy a dataset from S3 or HTTPS onto the shared volume, once, with Python's standard library only.

This file is a program as well as a module: the staging Job
(:class:`~trainium_eks.manifests.jobs.dataset_staging.DatasetStagingChart`) runs it with the release image's Python in
isolated mode (``python3 -I -B``), so that nothing of the training image, and no package at all, runs beside the
pod's credentials and its internet egress.

    python3 dataset_staging_program.py <destination> <source> signed|unsigned <sha256 or -> <region or ->

- ``s3://bucket/key.tar`` (``.tar``, ``.tar.gz``, ``.tgz``): streamed from S3 and unpacked as it arrives.
- ``s3://bucket/prefix/``: every object under the prefix copied to its path below the prefix.
- ``https://host/path/archive.tar.gz``: downloaded, its SHA-256 checked, and only then unpacked.

``signed`` requests carry an AWS Signature Version 4 (:func:`sign`) made with the pod's EKS Pod Identity credentials
(:class:`Credentials`); ``unsigned`` reads a public bucket without any. S3 is reached at its regional endpoint
``https://<bucket>.s3.<region>.amazonaws.com`` (path style for a bucket name with dots, whose names a virtual host's
certificate does not cover), or at ``AWS_ENDPOINT_URL_S3`` (path style) when that is set. The region is the one given,
else ``AWS_REGION``, else us-east-1; a bucket elsewhere is followed to the region S3 names (:meth:`S3._open`).

Archives are unpacked with :mod:`tarfile`'s ``data`` filter (no absolute paths, no links or files outside the
destination, no device files, no set-user-ID bits). The data lands in a work folder beside the destination and is
moved into place at the end, then the marker ``.staged`` is written: a run that finds the marker stages nothing, and a
copy cut short is never taken for the dataset.

Exit status: 0 when the dataset is staged (now or before); 3 when it never will be with these arguments (the archive's
SHA-256 differs, S3 answers 400 or 404, the object changed while it was read, a key or archive member would land
outside the destination); 2 on a usage error; 1 on anything else, which the Job retries: a network failure after every
retry, no credentials yet (a pod created before its Pod Identity association has none), S3's 403 (a policy not yet in
effect).
"""

import datetime
import functools
import hashlib
import hmac
import http.client
import ipaddress
import json
import os
import random
import shutil
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ElementTree

STAGED_MARKER = ".staged"
"""File written last into a staged dataset; its presence means the copy is complete."""

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
"""The payload hash of a request without a body, which S3 requires in ``x-amz-content-sha256``."""

CHUNK = 1 << 20
"""Bytes read at a time."""

TIMEOUT_SECONDS = 60
"""Socket timeout of every connection."""

ATTEMPTS = 6
"""Tries of one request (the first and five retries) before the run fails and the Job retries it."""

BACKOFF_SECONDS = 1.0
"""Base of the exponential back-off between tries, with full jitter, capped at :data:`BACKOFF_CAP_SECONDS`."""

BACKOFF_CAP_SECONDS = 20.0
"""The longest pause between two tries."""

RETRIED_STATUSES = (500, 502, 503, 504)
"""HTTP statuses that are retried: S3's ``InternalError`` and ``SlowDown`` (503) among them."""

REFRESH_SECONDS = 15 * 60
"""Credentials that expire within this are fetched again before the next request (botocore's advisory refresh)."""

CREDENTIAL_HOSTS = ("localhost", "169.254.170.2", "169.254.170.23", "fd00:ec2::23")
"""Hosts a plain-HTTP container credentials URL may name besides loopback addresses: the ones botocore's
``ContainerMetadataFetcher`` accepts (the ECS and EKS Pod Identity agents' link-local addresses)."""

CREDENTIAL_RETRIED_STATUSES = (429, *RETRIED_STATUSES)
"""Statuses of the credentials endpoint that are retried: the Pod Identity agent throttles with 429."""

REGION_ERRORS = ("AuthorizationHeaderMalformed", "PermanentRedirect", "IllegalLocationConstraintException")
"""S3 error codes that say the bucket is in another region than the request's (besides a 301, 302 or 307), as
botocore's ``S3RegionRedirectorv2.redirect_from_error`` reads them (an opt-in region's bucket, or a request from one,
gets ``IllegalLocationConstraintException``)."""

USAGE = "usage: dataset_staging_program.py <destination> <source> signed|unsigned <sha256 or -> <region or ->"


class Refused(Exception):
    """A failure that no retry with the same arguments can mend (exit status 3)."""


class Unavailable(Exception):
    """A failure that a later run may not meet (exit status 1, which the Job retries)."""


def is_credentials_host(host):
    """Whether a plain-HTTP credentials URL may name ``host``: a loopback address or :data:`CREDENTIAL_HOSTS`."""
    if host in CREDENTIAL_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Credentials:
    """The pod's AWS credentials from the container credentials endpoint (EKS Pod Identity).

    The endpoint is ``AWS_CONTAINER_CREDENTIALS_FULL_URI``, with the token of ``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE``
    (read again at every fetch: the kubelet rotates it) in the ``Authorization`` header, as EKS sets them for a pod
    of a service account that has a Pod Identity association. Credentials are fetched again when they expire within
    :data:`REFRESH_SECONDS`, or when S3 says they have expired.
    """

    def __init__(self, environ, clock=time.time, sleep=time.sleep):
        self.url = environ.get("AWS_CONTAINER_CREDENTIALS_FULL_URI", "")
        self.token_file = environ.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "")
        self.clock = clock
        self.sleep = sleep
        self.current = None
        self.expires = 0.0
        parts = urllib.parse.urlsplit(self.url)
        if not self.url or not self.token_file:
            raise Unavailable(
                "no Pod Identity credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI and "
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE must be set (a Pod Identity association for the Job's "
                "service account), or stage a public bucket with unsigned"
            )
        if parts.scheme != "https" and not (parts.scheme == "http" and is_credentials_host(parts.hostname)):
            raise Refused(f"the credentials URL {self.url} is neither HTTPS nor a container credentials address")

    def get(self, force=False):
        """``(access key, secret key, session token)``, fetched when there are none, they are about to expire or
        ``force`` is true."""
        if force or self.current is None or self.expires - self.clock() < REFRESH_SECONDS:
            self._fetch()
        return self.current

    def _fetch(self):
        with open(self.token_file) as file:
            token = file.read().strip()
        request = urllib.request.Request(self.url, headers={"Authorization": token})
        try:
            body = retried(
                lambda: _read_all(request), f"credentials from {self.url}", CREDENTIAL_RETRIED_STATUSES, self.sleep
            )
        except urllib.error.HTTPError as error:
            raise Unavailable(f"no credentials from {self.url}: HTTP {error.code} {error.reason}") from error
        document = json.loads(body)
        self.current = (document["AccessKeyId"], document["SecretAccessKey"], document.get("Token"))
        expiration = document.get("Expiration")
        self.expires = (
            datetime.datetime.fromisoformat(expiration.replace("Z", "+00:00")).timestamp()
            if expiration
            else self.clock() + 3600
        )


def _read_all(request):
    with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
        return response.read()


def retried(call, what, statuses=RETRIED_STATUSES, sleep=time.sleep):
    """``call()``, tried again after a connection error or an HTTP status of ``statuses``, up to :data:`ATTEMPTS`
    times in all with exponential back-off and full jitter (AWS Architecture Blog, "Exponential Backoff And Jitter").
    Any other HTTP error raises at once."""
    for attempt in range(ATTEMPTS):
        try:
            return call()
        except urllib.error.HTTPError as error:
            if error.code not in statuses or attempt == ATTEMPTS - 1:
                raise
            reason = f"HTTP {error.code}"
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as error:
            if attempt == ATTEMPTS - 1:
                raise
            reason = f"{type(error).__name__}: {error}"
        pause = random.uniform(0, min(BACKOFF_CAP_SECONDS, BACKOFF_SECONDS * 2**attempt))
        print(f"{what}: {reason}; trying again in {pause:.1f} s", flush=True)
        sleep(pause)
    raise AssertionError("unreachable")


def _hmac(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sign(method, url, headers, credentials, region, now, service="s3"):
    """The headers of a request to S3 with AWS Signature Version 4 added (``x-amz-date``, ``x-amz-content-sha256``
    for an empty body, ``x-amz-security-token`` with a session token, ``Authorization``), as botocore's
    ``S3SigV4Auth`` makes them: every header given is signed, the URL's path is the canonical URI as it stands (S3's
    keys are encoded once, by :meth:`S3.object_url`), and the query's pairs are sorted as they stand (Amazon S3 API
    Reference, "Authenticating Requests: Using the Authorization Header (AWS Signature Version 4)").

    :param url: The request's URL, its path and query already percent-encoded.
    :param headers: Headers to send and sign besides the ones added (``Range``, ``If-Match``).
    :param credentials: ``(access key, secret key, session token or None)``.
    :param now: The request's time, a UTC :class:`datetime.datetime`.
    """
    access_key, secret_key, token = credentials
    parts = urllib.parse.urlsplit(url)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    signed = {name.lower(): " ".join(str(value).split()) for name, value in headers.items()}
    signed["host"] = parts.netloc
    signed["x-amz-date"] = amz_date
    signed["x-amz-content-sha256"] = EMPTY_SHA256
    if token:
        signed["x-amz-security-token"] = token
    names = sorted(signed)
    pairs = sorted(pair.partition("=")[::2] for pair in parts.query.split("&") if pair)
    query = "&".join(f"{name}={value}" for name, value in pairs)
    canonical = "\n".join(
        [
            method,
            parts.path or "/",
            query,
            "".join(f"{name}:{signed[name]}\n" for name in names),
            ";".join(names),
            EMPTY_SHA256,
        ]
    )
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(("AWS4" + secret_key).encode(), day), region), service), "aws4_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    result = dict(headers)
    for name in ("x-amz-date", "x-amz-content-sha256", "x-amz-security-token"):
        if name in signed:
            result[name] = signed[name]
    result["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return result


def encode(text, safe):
    """``text`` percent-encoded as UTF-8, keeping the unreserved characters and ``safe``."""
    return urllib.parse.quote(text, safe=safe)


class S3:
    """Reads from one bucket: :meth:`get` (a whole object, or from an offset) and :meth:`list` (every key under a
    prefix). Signed with ``credentials`` (a :class:`Credentials`), or unsigned when it is None.

    :param endpoint: ``AWS_ENDPOINT_URL_S3``, reached path style; None for S3's regional endpoint.
    """

    def __init__(self, bucket, region, credentials, endpoint=None, clock=None, sleep=time.sleep):
        self.bucket = bucket
        self.credentials = credentials
        self.endpoint = endpoint
        self.clock = clock or (lambda: datetime.datetime.now(datetime.timezone.utc))
        self.sleep = sleep
        self.address(region)

    def address(self, region):
        """Reach the bucket in ``region``."""
        self.region = region
        if self.endpoint or "." in self.bucket:
            base = self.endpoint.rstrip("/") if self.endpoint else f"https://s3.{region}.amazonaws.com"
            self.bucket_url = f"{base}/{encode(self.bucket, '')}"
            self.key_base = self.bucket_url + "/"
        else:
            self.bucket_url = f"https://{self.bucket}.s3.{region}.amazonaws.com/"
            self.key_base = self.bucket_url

    def object_url(self, key):
        """The URL of ``key``, encoded as botocore encodes a key: everything but ``/``, ``~`` and the unreserved
        characters."""
        return self.key_base + encode(key, "/~")

    def _open(self, target, headers):
        """The response to a GET of ``target()`` (the URL, which changes with the bucket's region), signed afresh at
        every try. Credentials S3 calls expired are fetched again once. A bucket in another region than the one
        given is reached there, once: S3 answers a 301, 302 or 307, or an error of :data:`REGION_ERRORS`, naming the
        region in ``x-amz-bucket-region`` or the error's ``Region``; when it names none, a HEAD of the bucket says
        (botocore: ``botocore/utils.py``, ``S3RegionRedirectorv2``). A 403 may be a Pod Identity association or
        policy not yet in effect, so it fails the run for the Job to retry (:class:`Unavailable`); any other 4xx is
        :class:`Refused`."""
        fetched = moved = False
        while True:
            url = target()
            try:
                return retried(functools.partial(self._request, url, headers), url, sleep=self.sleep)
            except urllib.error.HTTPError as error:
                code, region = s3_error(error)
                if code in ("ExpiredToken", "RequestExpired") and self.credentials is not None and not fetched:
                    fetched = True
                    self.credentials.get(force=True)
                    continue
                moving = error.code in (301, 302, 307) or code in REGION_ERRORS
                if moving and not region:
                    region = self.head_region()
                if moving and region and region != self.region and not moved:
                    moved = True
                    print(f"s3://{self.bucket} is in {region}, not {self.region}", flush=True)
                    self.address(region)
                    continue
                if error.code == 412:
                    raise Refused(
                        f"{url} changed while it was read (its ETag is no longer the one first read)"
                    ) from error
                if error.code == 403:
                    raise Unavailable(f"S3 refused GET {url}: HTTP 403 {code or error.reason}") from error
                if 400 <= error.code < 500:
                    raise Refused(f"S3 refused GET {url}: HTTP {error.code} {code or error.reason}") from error
                raise

    def head_region(self):
        """The bucket's region as S3 names it in ``x-amz-bucket-region`` of an unsigned HEAD of the bucket (an answer
        of any status carries it), or None."""
        request = urllib.request.Request(self.bucket_url, method="HEAD")
        try:
            with S3_OPENER.open(request, timeout=TIMEOUT_SECONDS) as response:
                return response.headers.get("x-amz-bucket-region")
        except urllib.error.HTTPError as error:
            return error.headers.get("x-amz-bucket-region") if error.headers is not None else None
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError):
            return None

    def _request(self, url, headers):
        sent = dict(headers)
        if self.credentials is not None:
            sent = sign("GET", url, sent, self.credentials.get(), self.region, self.clock())
        return S3_OPENER.open(urllib.request.Request(url, headers=sent), timeout=TIMEOUT_SECONDS)

    def get(self, key, offset=0, etag=None):
        """The response to a GET of ``key``, from byte ``offset`` on, only while its ETag is ``etag`` when given."""
        headers = {}
        if offset:
            headers["Range"] = f"bytes={offset}-"
        if etag:
            headers["If-Match"] = etag
        return self._open(lambda: self.object_url(key), headers)

    def list(self, prefix):
        """Every key under ``prefix``, page by page (ListObjectsV2, up to 1,000 keys a page)."""
        token = None
        while True:
            query = {"list-type": "2", "prefix": prefix, "encoding-type": "url"}
            if token:
                query["continuation-token"] = token
            with self._open(lambda query=query: self.bucket_url + _query(query), {}) as response:
                keys, token = listing_page(response.read())
            yield from keys
            if not token:
                return


def _query(pairs):
    return "?" + "&".join(f"{encode(name, '-_.~')}={encode(value, '-_.~')}" for name, value in sorted(pairs.items()))


def s3_error(error):
    """``(Code, the bucket's region)`` of an S3 error response, each None when it says none."""
    region = error.headers.get("x-amz-bucket-region") if error.headers is not None else None
    try:
        body = error.read()
        root = ElementTree.fromstring(body) if body else None
    except (ElementTree.ParseError, OSError, http.client.HTTPException):
        root = None
    if root is None:
        return None, region
    return root.findtext("Code"), region or root.findtext("Region")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: a signed request must not go, with its signature, where S3 did not send it."""

    def redirect_request(self, *args, **kwargs):
        return None


S3_OPENER = urllib.request.build_opener(_NoRedirect)
"""The opener of every S3 request: a redirect is an error that :meth:`S3._open` reads."""


def listing_page(body):
    """``(keys, continuation token or None)`` of one ListObjectsV2 page requested with ``encoding-type=url`` (S3
    encodes each key as a form value; botocore decodes it with ``unquote_plus``)."""
    root = ElementTree.fromstring(body)
    namespace = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    keys = [urllib.parse.unquote_plus(item.findtext(f"{namespace}Key")) for item in root.iter(f"{namespace}Contents")]
    truncated = root.findtext(f"{namespace}IsTruncated") == "true"
    token = root.findtext(f"{namespace}NextContinuationToken") if truncated else None
    if truncated and not token:
        raise Refused("S3 said the listing is truncated without a continuation token")
    return keys, token


def folder_prefix(prefix):
    """The prefix of a folder's keys: ``prefix`` ending in ``/`` (as ``aws s3 sync`` reads ``s3://bucket/data``: the
    keys below ``data/``, not ``data-old/``), or the empty prefix of a whole bucket."""
    return prefix if not prefix or prefix.endswith("/") else prefix + "/"


def relative_path(prefix, key):
    """Where ``key`` (listed under the folder prefix ``prefix``) goes below the destination: its path after the
    prefix; None for a folder marker (a key ending in ``/``). A key with an empty, ``.`` or ``..`` segment, or a NUL,
    would land elsewhere or nowhere, and is refused."""
    if not key.startswith(prefix):
        raise Refused(f"the listing of {prefix!r} returned the key {key!r}")
    rest = key[len(prefix) :]
    if not rest or rest.endswith("/"):
        return None
    segments = rest.split("/")
    if any(segment in ("", ".", "..") for segment in segments) or "\0" in rest:
        raise Refused(f"the key {key!r} would not land below the destination")
    return os.path.join(*segments)


class ResumingBody:
    """A readable body of an S3 object that resumes where it was cut: when the connection breaks, or ends before the
    length the response announced, the rest is read with a ranged GET that S3 answers only while the object's ETag is
    the first response's (``If-Match``; 412 otherwise), up to :data:`ATTEMPTS` times in a row without progress."""

    def __init__(self, s3, key, sleep=time.sleep):
        self.s3 = s3
        self.key = key
        self.sleep = sleep
        self.response = s3.get(key)
        self.etag = self.response.headers.get("ETag")
        length = self.response.headers.get("Content-Length")
        self.length = int(length) if length is not None else None
        self.offset = 0
        self.failures = 0

    def read(self, size=CHUNK):
        """Up to ``size`` bytes (at most :data:`CHUNK` when ``size`` is negative); empty at the object's end."""
        while True:
            try:
                chunk = self.response.read(size if size is not None and size >= 0 else CHUNK)
            except (http.client.HTTPException, ConnectionError, TimeoutError, OSError) as error:
                chunk, broken = b"", f"{type(error).__name__}: {error}"
            else:
                broken = None
            if chunk:
                self.offset += len(chunk)
                self.failures = 0
                return chunk
            if broken is None and (self.length is None or self.offset >= self.length):
                return b""
            self.failures += 1
            if self.failures >= ATTEMPTS:
                raise ConnectionError(
                    f"s3://{self.s3.bucket}/{self.key} broke off at byte {self.offset} {ATTEMPTS} times"
                )
            reason = broken or f"the body ended at byte {self.offset} of {self.length}"
            print(f"s3://{self.s3.bucket}/{self.key}: {reason}; resuming", flush=True)
            self.response.close()
            self.sleep(random.uniform(0, min(BACKOFF_CAP_SECONDS, BACKOFF_SECONDS * 2**self.failures)))
            self.response = self.s3.get(self.key, offset=self.offset, etag=self.etag)
            first = self.response.headers.get("Content-Range", "").partition(" ")[2].partition("-")[0]
            if self.response.status != 206 or first != str(self.offset):
                raise Refused(
                    f"S3 answered a read from byte {self.offset} with HTTP {self.response.status}, not that range"
                )

    def close(self):
        self.response.close()


def extract_tarball(stream, work):
    """Unpacks the tar stream (plain, gzip, bzip2 or xz) into ``work`` as it is read, with the ``data`` filter."""
    try:
        with tarfile.open(fileobj=stream, mode="r|*") as archive:
            archive.extractall(work, filter="data")
    except tarfile.FilterError as error:
        raise Refused(f"the archive holds {error}") from error
    except tarfile.ReadError as error:
        raise Refused(f"not a tar archive: {error}") from error


def write_new(path, stream):
    """Writes ``stream`` into a new file ``path`` (never through a link, never over a file); returns its size."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    size = 0
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(descriptor, "wb") as file:
        while True:
            chunk = stream.read(CHUNK)
            if not chunk:
                return size
            file.write(chunk)
            size += len(chunk)


def copy_prefix(s3, prefix, work, sleep=time.sleep):
    """Copies every object under ``prefix`` into ``work``; returns the number of objects."""
    count = 0
    prefix = folder_prefix(prefix)
    for key in s3.list(prefix):
        path = relative_path(prefix, key)
        if path is None:
            continue
        body = ResumingBody(s3, key, sleep=sleep)
        try:
            write_new(os.path.join(work, path), body)
        finally:
            body.close()
        count += 1
    if count == 0:
        raise Refused(f"no object under s3://{s3.bucket}/{prefix}")
    return count


def download(url, path, expected, sleep=time.sleep):
    """Downloads ``url`` into ``path`` (tried again whole after a network failure) and checks its SHA-256."""

    def attempt():
        digest = hashlib.sha256()
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response, open(path, "wb") as file:
            while True:
                chunk = response.read(CHUNK)
                if not chunk:
                    break
                digest.update(chunk)
                file.write(chunk)
        return digest.hexdigest()

    actual = retried(attempt, url, sleep=sleep)
    if actual != expected:
        raise Refused(f"sha256 of {url} is {actual}, expected {expected}: not staged")


def move_into_place(work, destination):
    """Moves what ``work`` holds to ``destination`` (a single top-level folder becomes the destination, as the
    tutorial's tarball's), replacing whatever was there, then writes the marker."""
    entries = os.listdir(work)
    if not entries:
        raise Refused("the archive holds no file")
    only = os.path.join(work, entries[0]) if len(entries) == 1 else None
    content = only if only is not None and os.path.isdir(only) and not os.path.islink(only) else work
    shutil.rmtree(destination, ignore_errors=True)
    os.rename(content, destination)
    shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(destination, STAGED_MARKER), "w"):
        pass


def stage(destination, source, signed, sha256, region, environ, sleep=time.sleep):
    """Stages ``source`` into ``destination`` unless its marker is there; returns a line that says what was done."""
    if os.path.exists(os.path.join(destination, STAGED_MARKER)):
        return f"already staged: {destination}"
    work = os.path.join(os.path.dirname(destination), ".staging-" + os.path.basename(destination))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if source.startswith("https://"):
        archive = os.path.join(os.path.dirname(destination), ".archive-" + os.path.basename(destination))
        try:
            download(source, archive, sha256, sleep=sleep)
            with open(archive, "rb") as file:
                extract_tarball(file, work)
        finally:
            if os.path.exists(archive):
                os.remove(archive)
    else:
        bucket, _, key = source[len("s3://") :].partition("/")
        credentials = Credentials(environ, sleep=sleep) if signed else None
        if region == "-":
            region = environ.get("AWS_REGION") or "us-east-1"
        s3 = S3(bucket, region, credentials, endpoint=environ.get("AWS_ENDPOINT_URL_S3"), sleep=sleep)
        if key.endswith((".tar", ".tar.gz", ".tgz")):
            body = ResumingBody(s3, key, sleep=sleep)
            try:
                extract_tarball(body, work)
            finally:
                body.close()
        else:
            copy_prefix(s3, key, work, sleep=sleep)
    move_into_place(work, destination)
    files = sum(len(names) for _, _, names in os.walk(destination)) - 1
    size = sum(
        os.path.getsize(os.path.join(folder, name)) for folder, _, names in os.walk(destination) for name in names
    )
    return f"staged {source} into {destination}: {files} files, {size} bytes"


def main(argv, environ):
    if len(argv) != 5 or argv[2] not in ("signed", "unsigned") or not argv[0].startswith("/"):
        print(USAGE, file=sys.stderr)
        return 2
    destination, source, mode, sha256, region = argv
    if not source.startswith(("s3://", "https://")) or (source.startswith("https://") and len(sha256) != 64):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        print(stage(destination, source, mode == "signed", sha256, region, environ), flush=True)
    except Refused as error:
        print(f"not staged: {error}", file=sys.stderr, flush=True)
        return 3
    except Unavailable as error:
        print(f"not staged yet: {error}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], os.environ))
