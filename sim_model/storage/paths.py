"""Reading, writing, listing and removing files at local paths and s3:// URIs, one API for both.

The local half is below; the s3:// half is s3_objects.py (boto3, retries with backoff, clear
errors). Other schemes are refused with a message naming the ones that work (uri.py).

Commit markers are written with `write_new`, which creates a file only if it does not exist yet
and says whether this call created it: locally a hard link of a fully written temp file (atomic,
fails if the name exists; a filesystem without hard links is refused), on S3 a conditional PUT
(If-None-Match: *). The output's lease (workers/lease.py) also needs compare-and-swap:
`read_versioned` / `replace_if` / `remove_if`, on S3 with If-Match on the ETag, locally under an
exclusive flock. Directories are built and published by publish.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from schemas.errors import SpecError
from sim_model.storage import atomic
from sim_model.storage import s3_objects as remote
from sim_model.storage.uri import join, local_path, on_s3


def exists(uri: str) -> bool:
    return remote.exists(uri) if on_s3(uri) else local_path(uri).exists()


def is_file(uri: str) -> bool:
    """Whether a file (an object, on S3) of exactly this name exists; a directory is not one."""
    return remote.is_file(uri) if on_s3(uri) else local_path(uri).is_file()


def read_text(uri: str) -> str:
    text = try_read_text(uri)
    if text is None:
        raise FileNotFoundError(f"{uri} does not exist")
    return text


def try_read_text(uri: str) -> str | None:
    """The file's text, or None if it does not exist. Bytes that are not UTF-8 read as U+FFFD, so
    that a damaged file fails where it is parsed, which names it, not here."""
    data = try_read_bytes(uri)
    return None if data is None else data.decode(errors="replace")


def try_read_bytes(uri: str) -> bytes | None:
    """The file's bytes, or None if it does not exist."""
    if on_s3(uri):
        return remote.try_read_bytes(uri)
    try:
        return local_path(uri).read_bytes()
    except FileNotFoundError:
        return None


def read_many(uris: list[str]) -> list[str | None]:
    """try_read_text of each URI (in parallel on S3, where each read is a round trip)."""
    if uris and on_s3(uris[0]):
        return remote.read_many(uris)
    return [try_read_text(u) for u in uris]


def list_names(uri: str, suffix: str = "") -> list[str]:
    """Names directly under `uri` ending in `suffix`, sorted; [] when `uri` does not exist.
    Locally, hidden names are left out: they are the temporary files and staging directories
    that files and directories are written through (sim_model.storage.atomic, publish)."""
    if on_s3(uri):
        return remote.list_names(uri, suffix)
    path = local_path(uri)
    if not path.is_dir():
        return []
    return sorted(p.name for p in path.iterdir() if p.name.endswith(suffix) and not p.name.startswith("."))


def list_files(uri: str) -> list[str]:
    """Every file below `uri`, at any depth, sorted ([] when `uri` does not exist); on S3 one
    paginated listing, not a request per entry."""
    if on_s3(uri):
        return remote.list_files(uri)
    path = local_path(uri)
    if not path.is_dir():
        return []
    return sorted(join(uri, p.relative_to(path).as_posix()) for p in path.rglob("*") if p.is_file())


def file_sizes(uri: str) -> dict[str, int]:
    """Size in bytes of every file below `uri`, at any depth, by its path relative to `uri`
    ('/'-separated; hidden names included: zarr's .zarray and .zattrs are data); {} when `uri`
    does not exist. On S3 one paginated listing. What a part or an export recorded it wrote is
    checked against this (pipeline/generate/verify.py)."""
    if on_s3(uri):
        return remote.file_sizes(uri)
    path = local_path(uri)
    if not path.is_dir():
        return {}
    sizes = {}
    for p in path.rglob("*"):
        try:
            if p.is_file():
                sizes[p.relative_to(path).as_posix()] = p.stat().st_size
        except FileNotFoundError:  # removed while listing (a writer's temp file)
            continue
    return sizes


def children_with(uri: str, name: str) -> set[str]:
    """Names of the directories directly under `uri` that hold a file `name` (one listing on S3)."""
    if on_s3(uri):
        return remote.children_with(uri, name)
    path = local_path(uri)
    if not path.is_dir():
        return set()
    return {p.name for p in path.iterdir() if (p / name).is_file()}


def write_atomic(uri: str, data: str | bytes) -> None:
    """Write a whole file so that a crash leaves the old content or the new, never half of it."""
    payload = data.encode() if isinstance(data, str) else data
    if on_s3(uri):
        remote.write_object(uri, payload)
        return
    atomic.write_file(local_path(uri), payload)


def write_new(uri: str, data: str | bytes) -> bool:
    """Create the file with `data` unless it exists; True if this call created it. Exactly one of
    several concurrent writers gets True; the file is never half-visible.

    Locally the file is written and fsynced under a temporary name, then hard-linked to `uri`:
    link() is atomic and fails if the name exists. Where the filesystem has no hard links this
    refuses (SpecError) rather than fall back to a rename, which would let the last writer win.
    On S3: a conditional PUT (If-None-Match: *)."""
    return create_versioned(uri, data) is not None


def create_versioned(uri: str, data: str | bytes) -> str | None:
    """`write_new` that returns the new file's version (see `read_versioned`), None if it existed."""
    payload = data.encode() if isinstance(data, str) else data
    if on_s3(uri):
        return remote.create(uri, payload)
    path = local_path(uri)
    try:
        created = atomic.write_file(path, payload, exclusive=True)  # a hard link: fails if present
    except atomic.NoExclusiveCreate as error:
        raise SpecError(_no_exclusive_create(path, error)) from None
    return _version(payload) if created else None


def _no_exclusive_create(path: Path, error: OSError) -> str:
    return (f"cannot create {path} exclusively: hard links fail on this filesystem "
            f"({error.strerror or error}). iws creates part records (commits) and the output lease by "
            "hard-linking a finished temporary file, the exclusive create that is atomic on a "
            "local filesystem, and will not fall back to overwriting. Put the output on a "
            "filesystem with hard links (ext4, xfs, btrfs, tmpfs, NFS) or on s3://.")


def read_versioned(uri: str) -> tuple[str, str] | None:
    """The file's text and its version (S3: the ETag; locally: a digest of its bytes), or None."""
    if on_s3(uri):
        return remote.read_versioned(uri)
    try:
        payload = local_path(uri).read_bytes()
    except FileNotFoundError:
        return None
    return payload.decode(), _version(payload)


def replace_if(uri: str, data: str | bytes, version: str) -> str | None:
    """Compare-and-swap: replace the file with `data` if it still is `version`. Returns the new
    version, or None when the file changed or vanished meanwhile. S3: a PUT with If-Match.
    Locally: compare and replace under an exclusive flock that every replace_if / remove_if of
    this file takes (flock is atomic on local filesystems and on NFSv4)."""
    payload = data.encode() if isinstance(data, str) else data
    if on_s3(uri):
        return remote.replace_if(uri, payload, version)
    with _exclusive(local_path(uri)):
        current = read_versioned(uri)
        if current is None or current[1] != version:
            return None
        write_atomic(uri, payload)
    return _version(payload)


def remove_if(uri: str, version: str) -> bool:
    """Delete the file if it still is `version` (compare-and-swap, as `replace_if`); True if it did."""
    if on_s3(uri):
        return remote.remove_if(uri, version)
    path = local_path(uri)
    with _exclusive(path):
        current = read_versioned(uri)
        if current is None or current[1] != version:
            return False
        path.unlink()
    return True


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    import fcntl

    fd = os.open(path.parent / f".{path.name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _version(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()[:32]


def remove_tree(uri: str) -> None:
    """Delete a directory (s3://: every object under the prefix) and everything in it."""
    if on_s3(uri):
        remote.remove_prefix(uri)
    else:
        shutil.rmtree(local_path(uri), ignore_errors=True)


def remove_file(uri: str) -> None:
    if on_s3(uri):
        remote.remove_object(uri)
    else:
        local_path(uri).unlink(missing_ok=True)


def ensure_writable_dir(uri: str) -> None:
    """Create `uri` if needed and prove we can write there; SpecError naming the problem otherwise.
    For s3:// this is the fail-fast preflight: bucket, credentials, conditional writes."""
    if on_s3(uri):
        remote.ensure_writable(uri)
        return
    path = local_path(uri)
    if path.exists() and not path.is_dir():
        raise SpecError(f"output path {path} exists and is not a directory; choose another output.path.")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-probe-{uuid.uuid4().hex[:8]}"
        write_new(str(probe), b"ok")  # also proves the exclusive create that markers rely on
        probe.unlink()
    except OSError as error:
        raise SpecError(f"output path {path} is not writable ({error.strerror or error}); choose a "
                        "directory you can write to in output.path or with --output.") from None


def fetch(uri: str) -> Path:
    """A local path to read `uri` from: itself if local, else a cached download (file or prefix)."""
    if not on_s3(uri):
        return local_path(uri)
    from sim_model.storage import s3

    return s3.fetch(uri)


def glob(pattern: str) -> list[str]:
    """Files matching `pattern` (globbing only the last component for s3://), sorted."""
    if on_s3(pattern):
        return remote.glob(pattern)
    import glob as globlib

    return sorted(globlib.glob(pattern))
