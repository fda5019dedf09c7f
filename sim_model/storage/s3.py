"""boto3 access to s3:// objects: one retrying client per process, clear errors, cached downloads.

Shared by checkpoint loading (sim_model.checkpoint) and file storage (s3_objects.py); the episode
store reads s3:// through s3fs instead (s3_zarr.py). Credentials and endpoint come from the
standard AWS chain (environment, profiles, web identity, instance metadata; AWS_ENDPOINT_URL or
AWS_ENDPOINT_URL_S3 for S3-compatible servers, which then get path-style addressing). Nothing
here reads, stores or logs a secret.

Retries are botocore's "standard" mode: exponential backoff with jitter on throttling (503
SlowDown), 5xx, and connection errors, 8 attempts in all (AWS_RETRY_MODE / AWS_MAX_ATTEMPTS
override both). Checks that must fail fast (`check_bucket`) use a second client with 2 attempts
and short timeouts, so a wrong setup is reported in seconds, not after minutes of backoff.

`fetch` downloads an object or a prefix once into a local cache (IWS_CACHE_DIR, else
$XDG_CACHE_HOME/iws or ~/.cache/iws) under a key made of the URI and every object's ETag, so a
changed object is fetched again and an unchanged one never twice.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from schemas import SpecError
from sim_model.storage.uri import bucket_of, is_s3

log = logging.getLogger(__name__)

__all__ = ["check_bucket", "client", "describe", "fetch", "is_missing", "is_s3", "split"]

CREDENTIALS_HELP = ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, a Kubernetes "
                    "Secret, an instance profile or IRSA role; see docs/cluster.md)")
MAX_ATTEMPTS = 8
# Settings that change which client is right; the cache key is a hash of their values.
_CLIENT_ENV = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
               "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE",
               "AWS_SHARED_CREDENTIALS_FILE", "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS")
_DENIED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
           "AllAccessDisabled", "403"}
_DENIED_REASONS = {
    "InvalidAccessKeyId": "the server does not know this access key id",
    "SignatureDoesNotMatch": "the secret access key does not match the access key id",
    "ExpiredToken": "the session token has expired",
}
_clients: dict[tuple[int, bool, str], Any] = {}
_lock = threading.Lock()


def endpoint_of(storage_options: dict[str, Any]) -> str | None:
    """The custom S3 endpoint in effect, if any (options first, then the AWS variables)."""
    client_kwargs = storage_options.get("client_kwargs") or {}
    return (storage_options.get("endpoint_url") or client_kwargs.get("endpoint_url")
            or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"))


def split(uri: str) -> tuple[str, str]:
    """'s3://bucket/a/b/' -> ('bucket', 'a/b')."""
    bucket = bucket_of(uri)
    rest = uri.split("://", 1)[1]
    return bucket, rest.split("/", 1)[1].strip("/") if "/" in rest else ""


def client(*, fast: bool = False) -> Any:
    """This process's S3 client for the current AWS settings (thread-safe, reused).

    fast=True: 2 attempts and 5 s connect timeout, for checks that must fail quickly."""
    settings = hashlib.sha256(repr([os.environ.get(v) for v in _CLIENT_ENV]).encode()).hexdigest()
    key = (os.getpid(), fast, settings)  # a forked process builds its own
    with _lock:  # boto3 sessions are not thread-safe to create
        if key not in _clients:
            _clients[key] = _make_client(fast)
        return _clients[key]


def forget_clients() -> None:
    """Drop cached clients (tests that change AWS settings call this; settings are also keyed)."""
    with _lock:
        _clients.clear()


def _make_client(fast: bool) -> Any:
    import boto3
    from botocore.config import Config

    attempts = 2 if fast else int(os.environ.get("AWS_MAX_ATTEMPTS", MAX_ATTEMPTS))
    retries = {"mode": os.environ.get("AWS_RETRY_MODE", "standard"), "max_attempts": attempts}
    # S3-compatible servers serve buckets as paths; AWS proper keeps botocore's default.
    addressing = {"addressing_style": "path"} if endpoint_of({}) else {}
    config = Config(retries=retries, s3=addressing, connect_timeout=5 if fast else 20,
                    read_timeout=20 if fast else 120, max_pool_connections=32)
    return boto3.session.Session().client("s3", config=config)


def error_code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def is_missing(error: Exception) -> bool:
    """A ClientError that means "no such key" (404 on HEAD, NoSuchKey on GET)."""
    return error_code(error) in ("NoSuchKey", "404", "NotFound")


def describe(error: Exception, uri: str) -> str:
    """What went wrong reaching `uri`, and how to fix it (never includes credentials)."""
    from botocore import exceptions as boto

    bucket = bucket_of(uri)
    endpoint = endpoint_of({})
    where = f"S3 endpoint {endpoint}" if endpoint else "AWS S3"
    code = error_code(error)
    if isinstance(error, boto.NoCredentialsError | boto.PartialCredentialsError):
        return f"no AWS credentials were found for {uri}; {CREDENTIALS_HELP}."
    if isinstance(error, boto.EndpointConnectionError | boto.ConnectTimeoutError
                  | boto.ProxyConnectionError | boto.ReadTimeoutError):
        hint = ("check AWS_ENDPOINT_URL and that the server is running" if endpoint else
                "check the network, or set AWS_ENDPOINT_URL for an S3-compatible server")
        return f"cannot reach the {where} for {uri} ({error}); {hint}."
    if code == "NoSuchBucket":
        return (f"bucket '{bucket}' does not exist at the {where} ({uri}); create it first "
                f"(e.g. `aws s3 mb s3://{bucket}`) or fix the bucket name in the URI.")
    if code in _DENIED:
        reason = _DENIED_REASONS.get(code, "the credentials were rejected or lack "
                                     "s3:ListBucket/GetObject/PutObject/DeleteObject on bucket "
                                     f"'{bucket}'")
        return f"the {where} refused access to {uri} ({code}: {reason}); {CREDENTIALS_HELP}."
    if is_missing(error):
        return f"{uri} does not exist at the {where}; check the URI."
    return f"S3 request for {uri} at the {where} failed: {type(error).__name__}: {error}"


def check_bucket(uri: str) -> None:
    """One HeadBucket with the fast client; SpecError naming the URI and the fix on failure."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, _ = split(uri)
    try:
        try:
            client(fast=True).head_bucket(Bucket=bucket)
        except ClientError as error:
            if error_code(error) in ("404", "NotFound"):  # HeadBucket has no body: 404 = no bucket
                error.response["Error"]["Code"] = "NoSuchBucket"
                raise
            if error_code(error) != "403":
                raise
            # A bare 403 says nothing more; a listing's error body names the reason.
            client(fast=True).list_objects_v2(Bucket=bucket, MaxKeys=1)
    except (ClientError, BotoCoreError) as error:
        raise SpecError(describe(error, uri)) from None


# -- cached downloads ----------------------------------------------------------------------------

def cache_root() -> Path:
    base = os.environ.get("IWS_CACHE_DIR") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "iws"
    return Path(base)


def _objects(uri: str, names: Sequence[str] | None) -> list[tuple[str, str, str]]:
    """(relative path, key, ETag) of the objects to fetch: `names` under the prefix; else the
    object `uri` itself (relative path ''), else everything under the prefix."""
    from botocore.exceptions import ClientError

    bucket, key = split(uri)
    s3 = client()
    if names is not None:
        found = []
        for name in names:
            try:
                head = s3.head_object(Bucket=bucket, Key=f"{key}/{name}")
            except ClientError as error:
                raise SpecError(describe(error, f"{uri.rstrip('/')}/{name}")) from None
            found.append((name, f"{key}/{name}", head["ETag"]))
        return found
    try:
        return [("", key, s3.head_object(Bucket=bucket, Key=key)["ETag"])] if key else []
    except ClientError as error:
        if not is_missing(error):
            raise SpecError(describe(error, uri)) from None
    prefix = f"{key}/" if key else ""
    found = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        found += [(o["Key"][len(prefix):], o["Key"], o["ETag"]) for o in page.get("Contents", [])]
    if not found:
        raise SpecError(f"{uri} does not exist (no object or prefix of that name); check the URI.")
    return found


def fetch(uri: str, *, names: Sequence[str] | None = None, kind: str = "files") -> Path:
    """A local copy of the object or prefix at `uri` (only `names` under it, if given).

    Returns CACHE/<kind>/<digest>/<basename>: a file for one object, else a directory. Downloaded
    into a temporary sibling and renamed, so a crash never leaves a partial copy in the cache.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    objects = _objects(uri, names)
    digest = hashlib.sha256(repr((uri, sorted(objects))).encode()).hexdigest()[:24]
    base = split(uri)[1].rsplit("/", 1)[-1] or split(uri)[0]
    home = cache_root() / kind / digest
    if (home / base).exists():
        return home / base
    home.parent.mkdir(parents=True, exist_ok=True)
    tmp = home.parent / f".{digest}.{uuid.uuid4().hex[:8]}.tmp"
    bucket = split(uri)[0]
    try:
        for rel, key, _ in objects:
            target = tmp / base / rel if rel else tmp / base
            target.parent.mkdir(parents=True, exist_ok=True)
            client().download_file(bucket, key, str(target))
        try:
            os.replace(tmp, home)
        except OSError:  # another process finished the same download first
            pass
    except (ClientError, BotoCoreError) as error:
        raise SpecError(describe(error, uri)) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("fetched %s (%d objects) into %s", uri, len(objects), home)
    return home / base
