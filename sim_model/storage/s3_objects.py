"""The s3:// half of paths.py and publish.py: the same operations on objects, through boto3.

S3 has no directories and no rename, so:

- a "directory" is a key prefix; it exists when some object lies under `<key>/`;
- `write_object` is one PUT: an object is visible whole or not at all;
- `write_new` is a conditional PUT (`If-None-Match: *`): of two writers exactly one creates the
  object, the other gets 412 PreconditionFailed (409 ConditionalRequestConflict, which AWS sends
  while a competing conditional write is in flight, is retried until one of the two answers);
- `replace_if` / `remove_if` are a PUT / DELETE with `If-Match: <ETag>` (compare-and-swap, for
  the output lease): 412 when the object changed since it was read;
- a directory is staged on local disk and uploaded by `upload_tree` with its validity markers
  last (root `.zgroup`/`.zattrs`/`zarr.json`, LeRobot's `meta/info.json`): until they arrive,
  readers reject the tree ("not a Zarr store", "no meta/info.json") rather than half-trust it.

Retries with backoff are botocore's (s3.client); errors a user can fix (missing bucket,
rejected credentials, unreachable endpoint) become SpecErrors naming the URI and the fix.
"""

from __future__ import annotations

import fnmatch
import logging
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from schemas import SpecError
from sim_model.storage import s3

log = logging.getLogger(__name__)

# Written last on upload, removed first on delete: these make a tree readable as a dataset.
MARKERS = (".zgroup", "zarr.json", ".zattrs", "meta/info.json")
THREADS = 16
CONFLICT_RETRIES = 20


def _call(uri: str, operation: str, *, missing_ok: bool = False, **kwargs: Any) -> Any:
    """client.<operation>(**kwargs); None for a missing key if `missing_ok`; SpecError otherwise."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return getattr(s3.client(), operation)(**kwargs)
    except ClientError as error:
        if missing_ok and s3.is_missing(error):
            return None
        raise SpecError(s3.describe(error, uri)) from None
    except BotoCoreError as error:
        raise SpecError(s3.describe(error, uri)) from None


def _keys(uri: str) -> Iterator[str]:
    """Every key under `uri/`."""
    return (key for key, _ in _sized_keys(uri))


def _sized_keys(uri: str) -> Iterator[tuple[str, int]]:
    """(key, size in bytes) of every object under `uri/`."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = s3.split(uri)
    prefix = f"{key}/" if key else ""
    pages = s3.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    try:
        for page in pages:
            yield from ((o["Key"], int(o["Size"])) for o in page.get("Contents", []))
    except (ClientError, BotoCoreError) as error:  # raised lazily, while paging
        raise SpecError(s3.describe(error, uri)) from None


def exists(uri: str) -> bool:
    bucket, key = s3.split(uri)
    if key and _call(uri, "head_object", missing_ok=True, Bucket=bucket, Key=key) is not None:
        return True
    return next(_keys(uri), None) is not None


def is_file(uri: str) -> bool:
    """Whether an object of exactly this key exists (one HEAD)."""
    bucket, key = s3.split(uri)
    return bool(key) and _call(uri, "head_object", missing_ok=True, Bucket=bucket, Key=key) is not None


def try_read_bytes(uri: str) -> bytes | None:
    bucket, key = s3.split(uri)
    response = _call(uri, "get_object", missing_ok=True, Bucket=bucket, Key=key)
    return None if response is None else response["Body"].read()


def try_read_text(uri: str) -> str | None:
    """The object's text (bytes that are not UTF-8 read as U+FFFD), or None if it does not exist."""
    data = try_read_bytes(uri)
    return None if data is None else data.decode(errors="replace")


def read_many(uris: list[str]) -> list[str | None]:
    """Many small objects at once (part records): one GET each, in parallel threads."""
    if len(uris) < 2:
        return [try_read_text(u) for u in uris]
    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(try_read_text, uris))


def list_names(uri: str, suffix: str = "") -> list[str]:
    """Direct children of `uri` that hold objects. A flat listing, not a delimiter one: some
    S3-compatible servers (SeaweedFS) keep reporting a prefix after its last object is deleted."""
    _, key = s3.split(uri)
    start = len(key) + 1 if key else 0
    names = {k[start:].split("/", 1)[0] for k in _keys(uri)}
    return sorted(n for n in names if n and n.endswith(suffix))


def children_with(uri: str, name: str) -> set[str]:
    """Direct children of `uri` holding an object `<child>/<name>` (one flat listing)."""
    _, key = s3.split(uri)
    start = len(key) + 1 if key else 0
    found = set()
    for k in _keys(uri):
        child, _, rest = k[start:].partition("/")
        if rest == name:
            found.add(child)
    return found


def write_object(uri: str, payload: bytes) -> None:
    bucket, key = s3.split(uri)
    _call(uri, "put_object", Bucket=bucket, Key=key, Body=payload)


def write_new(uri: str, payload: bytes) -> bool:
    """Create the object unless it exists (If-None-Match: *). True if this call created it."""
    return create(uri, payload) is not None


def create(uri: str, payload: bytes) -> str | None:
    """Create the object unless it exists (If-None-Match: *): its ETag, or None if it existed."""
    bucket, key = s3.split(uri)
    response = _conditional(uri, "put_object", Bucket=bucket, Key=key, Body=payload, IfNoneMatch="*")
    return None if response is None else str(response["ETag"])


def read_versioned(uri: str) -> tuple[str, str] | None:
    """The object's text and ETag, or None if it does not exist."""
    bucket, key = s3.split(uri)
    response = _call(uri, "get_object", missing_ok=True, Bucket=bucket, Key=key)
    return None if response is None else (response["Body"].read().decode(), str(response["ETag"]))


def replace_if(uri: str, payload: bytes, etag: str) -> str | None:
    """PUT with If-Match: the new ETag, or None if the object changed or vanished since `etag`."""
    bucket, key = s3.split(uri)
    response = _conditional(uri, "put_object", Bucket=bucket, Key=key, Body=payload, IfMatch=etag)
    return None if response is None else str(response["ETag"])


def remove_if(uri: str, etag: str) -> bool:
    """DELETE with If-Match: True if the object was still `etag` and is now gone."""
    bucket, key = s3.split(uri)
    return _conditional(uri, "delete_object", Bucket=bucket, Key=key, IfMatch=etag) is not None


def _conditional(uri: str, operation: str, **kwargs: Any) -> Any | None:
    """client.<operation>(**kwargs) with an If-* condition: the response, or None when the
    condition failed (412) or the key is gone (404). 409 (a competing conditional write in
    flight) is retried with backoff."""
    from botocore.exceptions import BotoCoreError, ClientError

    for attempt in range(CONFLICT_RETRIES):
        try:
            return getattr(s3.client(), operation)(**kwargs)
        except ClientError as error:
            code = s3.error_code(error)
            if code in ("PreconditionFailed", "412") or s3.is_missing(error):
                return None
            if code not in ("ConditionalRequestConflict", "409"):
                raise SpecError(s3.describe(error, uri)) from None
            time.sleep(min(0.05 * 2**attempt, 2.0))  # the other writer's request is in flight
        except BotoCoreError as error:
            raise SpecError(s3.describe(error, uri)) from None
    raise SpecError(f"{uri}: the S3 server kept answering 409 ConditionalRequestConflict; retry later.")


def remove_object(uri: str) -> None:
    bucket, key = s3.split(uri)
    _call(uri, "delete_object", Bucket=bucket, Key=key)


def remove_prefix(uri: str) -> int:
    """Delete every object under `uri/`, validity markers first. Returns how many."""
    bucket, _ = s3.split(uri)
    keys = sorted(_keys(uri), key=lambda k: not any(k.endswith("/" + m) for m in MARKERS))
    for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
        batch = [{"Key": k} for k in keys[start:start + 1000]]
        response = _call(uri, "delete_objects", Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
        if response.get("Errors"):
            first = response["Errors"][0]
            raise SpecError(f"deleting under {uri} failed for {len(response['Errors'])} objects "
                            f"(first: {first.get('Key')}: {first.get('Code')} {first.get('Message')}).")
    return len(keys)


def upload_tree(local: Path, uri: str) -> int:
    """Upload every file under `local` to `uri/<relative path>`, validity markers last."""
    from boto3.exceptions import S3UploadFailedError
    from boto3.s3.transfer import TransferConfig
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = s3.split(uri)
    files = sorted(p for p in local.rglob("*") if p.is_file())
    rel = {p: p.relative_to(local).as_posix() for p in files}
    last = sorted((p for p in files if rel[p] in MARKERS), key=lambda p: MARKERS.index(rel[p]))
    first = [p for p in files if p not in last]
    transfer = TransferConfig(use_threads=False)  # parallel across files instead

    def put(path: Path) -> None:
        s3.client().upload_file(str(path), bucket, f"{key}/{rel[path]}", Config=transfer)

    try:
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(put, first))
        for path in last:
            put(path)
    except (ClientError, BotoCoreError) as error:
        raise SpecError(s3.describe(error, uri)) from None
    except S3UploadFailedError as error:  # boto3 wraps the ClientError of a managed upload
        cause = error.__context__ if isinstance(error.__context__, ClientError) else error
        raise SpecError(s3.describe(cause, uri)) from None
    return len(files)


def list_files(uri: str) -> list[str]:
    """Every object under `uri/`, as s3:// URIs, sorted (one paginated listing)."""
    bucket, _ = s3.split(uri)
    return sorted(f"s3://{bucket}/{key}" for key in _keys(uri))


def file_sizes(uri: str) -> dict[str, int]:
    """Size in bytes of every object under `uri/`, by its path relative to `uri` (one listing)."""
    _, key = s3.split(uri)
    start = len(key) + 1 if key else 0
    return {k[start:]: size for k, size in _sized_keys(uri)}


def glob(pattern: str) -> list[str]:
    """s3:// URIs matching a glob in their last path component ('s3://b/init/*.png')."""
    parent, _, name = pattern.rpartition("/")
    return sorted(f"{parent}/{n}" for n in list_names(parent) if fnmatch.fnmatch(n, name))


def ensure_writable(uri: str) -> None:
    """Preflight for an output prefix: the bucket answers our credentials, a conditional PUT
    works, and a second one is refused (group commits rely on that)."""
    s3.check_bucket(uri)
    probe = f"{uri.rstrip('/')}/.iws-write-probe-{uuid.uuid4().hex[:8]}"
    if not write_new(probe, b"probe"):
        raise SpecError(f"{probe} existed before it was written; is another process probing?")
    try:
        if write_new(probe, b"probe"):
            log.warning("the S3 server at %s ignores If-None-Match: two writers of one episode "
                        "could both commit it (harmless for identical retries, but conflicts "
                        "between different writers go undetected)", s3.endpoint_of({}) or "AWS")
        if replace_if(probe, b"probe", '"0123456789abcdef0123456789abcdef"') is not None:
            log.warning("the S3 server at %s ignores If-Match: two runs taking over one output's "
                        "expired lease at the same moment could both succeed", s3.endpoint_of({}) or "AWS")
    finally:
        remove_object(probe)
