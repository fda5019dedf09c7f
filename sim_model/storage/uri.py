"""Where a location points: a local path or a URL; the one list of S3 schemes; whether one
location lies inside another."""

from __future__ import annotations

import posixpath
from pathlib import Path

from schemas.errors import SpecError

SCHEMES = ("s3://", "s3a://")


def is_s3(location: str) -> bool:
    return location.startswith(SCHEMES)


def is_remote(uri: str) -> bool:
    return "://" in uri


def is_url(location: str) -> bool:
    """A URL zarr opens through fsspec (s3://, memory://, ...); file:// counts as a local path."""
    return "://" in location and not location.startswith("file://")


def check_scheme(uri: str) -> None:
    """SpecError for a URI scheme iws cannot read or write."""
    if is_remote(uri) and not uri.startswith(SCHEMES):
        scheme = uri.split("://", 1)[0]
        raise SpecError(f"'{uri}': {scheme}:// locations are not supported; use a local path or an "
                        "s3:// URI (S3-compatible servers via AWS_ENDPOINT_URL).")


def local_path(uri: str) -> Path:
    """The local filesystem path of `uri`; SpecError for a URI (use the functions below)."""
    check_scheme(uri)
    if is_remote(uri):
        raise SpecError(f"'{uri}' is an s3:// location, but this step needs a local path.")
    return Path(uri)


def join(root: str, *parts: str) -> str:
    """Join path parts the way the root's scheme does (only '/' separators)."""
    return "/".join([root.rstrip("/"), *parts])


def bucket_of(location: str) -> str:
    """'s3://bucket/prefix/x.zarr' -> 'bucket'."""
    bucket = location.split("://", 1)[1].split("/", 1)[0]
    if not bucket:
        raise SpecError(f"{location} names no bucket; use s3://<bucket>/<prefix>/<name>.zarr")
    return bucket


def on_s3(uri: str) -> bool:
    """True for an s3:// URI, False for a local path; SpecError for any other scheme."""
    check_scheme(uri)
    return uri.startswith(SCHEMES)


def resolved(location: str) -> str:
    """Where `location` really points: a local path made absolute with '..' and symlinks
    resolved; an s3:// URI as s3://bucket/key with '.', '..' and repeated '/' collapsed the way
    a path's are (S3 keys have no such segments, but a '..' read from a record or typed in an
    argument must not hide where it leads). SpecError for another scheme."""
    check_scheme(location)
    if is_s3(location):
        return "s3://" + posixpath.normpath("/" + location.split("://", 1)[1]).lstrip("/")
    return str(Path(location).expanduser().resolve())


def is_inside(root: str, location: str) -> bool:
    """Whether `location` lies strictly below `root`, both `resolved`; a local path and an s3://
    URI are never inside each other."""
    outer, inner = resolved(root), resolved(location)
    if is_s3(outer) != is_s3(inner):
        return False
    return inner != outer and inner.startswith(outer.rstrip("/") + "/")


def overlap(a: str, b: str) -> bool:
    """Whether `a` and `b` are one location or one lies inside the other."""
    return resolved(a) == resolved(b) or is_inside(a, b) or is_inside(b, a)
