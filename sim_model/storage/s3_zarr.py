"""s3:// locations for the episode store: zarr's FsspecStore over s3fs, with a fail-fast check.

Credentials and endpoint come from the standard AWS chain (AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE and ~/.aws, web identity (IRSA), instance
profiles; AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL for S3-compatible servers). Nothing here reads,
stores or logs a secret: storage_options pass through to s3fs untouched except for addressing.

Before zarr touches the store, one HeadBucket request checks that the endpoint answers, the
credentials are accepted and the bucket exists, so a wrong setup fails in about a second with a
message that names the URI and the fix, not deep inside zarr's concurrent reads after retries.
"""

from __future__ import annotations

import logging
from typing import Any

from schemas import SpecError
from sim_model.storage.s3 import CREDENTIALS_HELP, endpoint_of
from sim_model.storage.uri import bucket_of

log = logging.getLogger(__name__)


def s3_storage_options(storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """s3fs options: the caller's, plus path-style addressing when a custom endpoint is set.

    S3-compatible servers (SeaweedFS, MinIO, Ceph) serve buckets as paths, not subdomains;
    botocore only picks path style by itself for IP-address endpoints. On AWS proper (no
    endpoint set) botocore's default stays. Credentials are deliberately not resolved here.
    """
    options = dict(storage_options or {})
    if endpoint_of(options):
        config = dict(options.get("config_kwargs") or {})
        config["s3"] = {"addressing_style": "path", **(config.get("s3") or {})}
        options["config_kwargs"] = config
    return options


def open_s3_store(location: str, *, read_only: bool,
                  storage_options: dict[str, Any] | None) -> Any:
    """A zarr FsspecStore at an s3:// location, after checking that it can be reached."""
    from zarr.storage import FsspecStore

    options = s3_storage_options(storage_options)
    bucket = bucket_of(location)
    try:
        store = FsspecStore.from_url(location, storage_options=options, read_only=read_only)
    except (TypeError, ValueError) as error:  # an option s3fs does not take
        raise SpecError(f"storage_options for {location} are not valid s3fs options: {error}") from None
    check_bucket(store.fs, location, bucket, endpoint_of(options))
    return store


def check_bucket(fs: Any, location: str, bucket: str, endpoint: str | None) -> None:
    """One HeadBucket through the store's own client; SpecError naming URI and fix on failure."""
    from zarr.core.sync import sync

    try:
        sync(fs._call_s3("head_bucket", Bucket=bucket))
    except Exception as error:  # s3fs translates ClientErrors into OSError subclasses
        raise SpecError(_describe(error, location, bucket, endpoint)) from None
    log.debug("s3 bucket %s reachable at %s", bucket, endpoint or "AWS")


def _describe(error: Exception, location: str, bucket: str, endpoint: str | None) -> str:
    """What went wrong reaching `location`, and how to fix it (never includes credentials)."""
    from botocore import exceptions as boto

    where = f"S3 endpoint {endpoint}" if endpoint else "AWS S3"
    if isinstance(error, boto.NoCredentialsError | boto.PartialCredentialsError):
        return f"no AWS credentials were found for {location}; {CREDENTIALS_HELP}."
    if isinstance(error, boto.EndpointConnectionError | boto.ConnectTimeoutError
                  | boto.ProxyConnectionError):
        hint = ("check AWS_ENDPOINT_URL (or storage_options endpoint_url) and that the server "
                "is running" if endpoint else "check the network, or set AWS_ENDPOINT_URL for an "
                "S3-compatible server")
        return f"cannot reach the {where} for {location} ({error}); {hint}."
    if isinstance(error, FileNotFoundError):
        return (f"bucket '{bucket}' does not exist at the {where} ({location}); create it first "
                f"(e.g. `aws s3 mb s3://{bucket}`) or fix the bucket name in the URI.")
    if isinstance(error, PermissionError):
        return (f"the {where} refused access to bucket '{bucket}' ({location}): the credentials "
                f"were rejected or lack s3:ListBucket/GetObject/PutObject on it; {CREDENTIALS_HELP}.")
    return f"checking {location} at the {where} failed: {type(error).__name__}: {error}"
