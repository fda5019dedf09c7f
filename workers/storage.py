"""Every path a generation job reads or writes goes through here: local paths and s3:// URIs.

The local half is below; the s3:// half is workers/storage_s3.py (boto3, retries with backoff,
clear errors). Other schemes are refused with a message naming the ones that work.

Commit markers are written with `write_new`, which creates a file only if it does not exist yet
and says whether this call created it: locally a hard link of a fully written temp file (atomic,
fails if the name exists; a filesystem without hard links is refused), on S3 a conditional PUT
(If-None-Match: *). The output's lease (workers/lease.py) also needs compare-and-swap:
`read_versioned` / `replace_if` / `remove_if`, on S3 with If-Match on the ETag, locally under an
exclusive flock. Directories are built in `staging_dir` and moved into place by `publish_dir`:
locally by rename, on S3 by an upload whose validity markers go last, so a reader never trusts
half a directory.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from schemas.errors import SpecError
from sim_model import atomic
from workers import storage_s3 as remote

SCHEMES = ("s3://", "s3a://")
# s3:// targets are staged on local disk here. A writer killed mid-write leaves its directory
# behind; each process sweeps leftovers older than STALE_STAGING_S once, so they do not pile up.
STAGING_ROOT = Path(tempfile.gettempdir()) / "iws-staging"
STALE_STAGING_S = 6 * 3600
_swept = False


def is_remote(uri: str) -> bool:
    return "://" in uri


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


def exists(uri: str) -> bool:
    return remote.exists(uri) if _s3(uri) else local_path(uri).exists()


def read_text(uri: str) -> str:
    text = try_read_text(uri)
    if text is None:
        raise FileNotFoundError(f"{uri} does not exist")
    return text


def try_read_text(uri: str) -> str | None:
    """The file's text, or None if it does not exist."""
    if _s3(uri):
        return remote.try_read_text(uri)
    try:
        return local_path(uri).read_text()
    except FileNotFoundError:
        return None


def read_many(uris: list[str]) -> list[str | None]:
    """try_read_text of each URI (in parallel on S3, where each read is a round trip)."""
    if uris and _s3(uris[0]):
        return remote.read_many(uris)
    return [try_read_text(u) for u in uris]


def list_names(uri: str, suffix: str = "") -> list[str]:
    """Names directly under `uri` ending in `suffix`, sorted; [] when `uri` does not exist."""
    if _s3(uri):
        return remote.list_names(uri, suffix)
    path = local_path(uri)
    if not path.is_dir():
        return []
    return sorted(p.name for p in path.iterdir() if p.name.endswith(suffix))


def children_with(uri: str, name: str) -> set[str]:
    """Names of the directories directly under `uri` that hold a file `name` (one listing on S3)."""
    if _s3(uri):
        return remote.children_with(uri, name)
    path = local_path(uri)
    if not path.is_dir():
        return set()
    return {p.name for p in path.iterdir() if (p / name).is_file()}


def write_atomic(uri: str, data: str | bytes) -> None:
    """Write a whole file so that a crash leaves the old content or the new, never half of it."""
    payload = data.encode() if isinstance(data, str) else data
    if _s3(uri):
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
    if _s3(uri):
        return remote.create(uri, payload)
    path = local_path(uri)
    try:
        created = atomic.write_file(path, payload, exclusive=True)  # a hard link: fails if present
    except atomic.NoExclusiveCreate as error:
        raise SpecError(_no_exclusive_create(path, error)) from None
    return _version(payload) if created else None


def _no_exclusive_create(path: Path, error: OSError) -> str:
    return (f"cannot create {path} exclusively: hard links fail on this filesystem "
            f"({error.strerror or error}). iws creates commit markers and the output lease by "
            "hard-linking a finished temporary file, the exclusive create that is atomic on a "
            "local filesystem, and will not fall back to overwriting. Put the output on a "
            "filesystem with hard links (ext4, xfs, btrfs, tmpfs, NFS) or on s3://.")


def read_versioned(uri: str) -> tuple[str, str] | None:
    """The file's text and its version (S3: the ETag; locally: a digest of its bytes), or None."""
    if _s3(uri):
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
    if _s3(uri):
        return remote.replace_if(uri, payload, version)
    with _exclusive(local_path(uri)):
        current = read_versioned(uri)
        if current is None or current[1] != version:
            return None
        write_atomic(uri, payload)
    return _version(payload)


def remove_if(uri: str, version: str) -> bool:
    """Delete the file if it still is `version` (compare-and-swap, as `replace_if`); True if it did."""
    if _s3(uri):
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


def staging_dir(uri: str) -> str:
    """A fresh local path to build `uri` in before `publish_dir` moves it into place: a hidden
    sibling for a local `uri`, a local temporary directory for an s3:// one."""
    if _s3(uri):
        _sweep_stale_staging()
        STAGING_ROOT.mkdir(parents=True, exist_ok=True)
        name = uri.rstrip("/").rsplit("/", 1)[-1]
        return str(Path(tempfile.mkdtemp(dir=STAGING_ROOT)) / name)
    path = local_path(uri)
    path.parent.mkdir(parents=True, exist_ok=True)
    return str(path.parent / f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")


def publish_dir(staged: str, uri: str, *, replace: bool) -> bool:
    """Move a staged directory to `uri`. If `uri` exists: replace it, or (replace=False) keep it and
    discard the staged copy. Returns whether the staged copy was published; raises if publishing
    failed, never reporting a failure as "someone else published first"."""
    if _s3(uri):
        try:
            if remote.exists(uri):
                if not replace:
                    return False
                remote.remove_prefix(uri)  # validity markers first: readers stop trusting it
            remote.upload_tree(Path(staged), uri)
            return True
        finally:
            discard_staged(staged)
    src, dst = local_path(staged), local_path(uri)
    if not src.is_dir():
        raise SpecError(f"the staged copy {src} of {dst} vanished before it was published: another "
                        "process removed it (a second run cleaning up this output?). Nothing was "
                        "committed for it; rerun the job to make it again.")
    # The episode's files reach the disk before its name does, and its name before the caller
    # writes a commit marker: a power cut cannot leave a marker naming data that was lost.
    atomic.settle_tree(src)
    if not dst.exists():
        try:
            os.replace(src, dst)
            atomic.fsync_dir(dst.parent)
            return True
        except OSError as error:  # a concurrent writer published first, or a real failure
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not dst.exists():
                raise
    if not replace:
        shutil.rmtree(src, ignore_errors=True)
        return False
    # Two renames keep a complete copy on disk at every instant.
    old = dst.parent / f".{dst.name}.{uuid.uuid4().hex[:12]}.old"
    os.replace(dst, old)
    os.replace(src, dst)
    atomic.fsync_dir(dst.parent)
    shutil.rmtree(old, ignore_errors=True)
    return True


def discard_staged(staged: str) -> None:
    """Delete a staged directory (and the temporary directory holding it, for s3:// targets)."""
    path = Path(staged)
    if path.parent.parent == STAGING_ROOT:
        path = path.parent
    shutil.rmtree(path, ignore_errors=True)


def _sweep_stale_staging() -> None:
    global _swept
    if _swept or not STAGING_ROOT.is_dir():
        return
    _swept = True
    cutoff = time.time() - STALE_STAGING_S
    for entry in STAGING_ROOT.iterdir():
        try:
            if entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:  # another process removed it first
            continue


def remove_tree(uri: str) -> None:
    """Delete a directory (s3://: every object under the prefix) and everything in it."""
    if _s3(uri):
        remote.remove_prefix(uri)
    else:
        shutil.rmtree(local_path(uri), ignore_errors=True)


def remove_file(uri: str) -> None:
    if _s3(uri):
        remote.remove_object(uri)
    else:
        local_path(uri).unlink(missing_ok=True)


def remove_stale_staging(uri: str) -> int:
    """Delete leftovers of local writers that died mid-write (hidden '.*.tmp' / '.*.old' entries).
    S3 has none: its writers stage on local disk (see workers.writer for orphaned uploads)."""
    if _s3(uri):
        return 0
    path = local_path(uri)
    if not path.is_dir():
        return 0
    stale = [p for p in path.iterdir() if p.name.startswith(".") and p.name.endswith((".tmp", ".old"))]
    for p in stale:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return len(stale)


def ensure_writable_dir(uri: str) -> None:
    """Create `uri` if needed and prove we can write there; SpecError naming the problem otherwise.
    For s3:// this is the fail-fast preflight: bucket, credentials, conditional writes."""
    if _s3(uri):
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
    if not _s3(uri):
        return local_path(uri)
    from sim_model import s3

    return s3.fetch(uri)


def glob(pattern: str) -> list[str]:
    """Files matching `pattern` (globbing only the last component for s3://), sorted."""
    if _s3(pattern):
        return remote.glob(pattern)
    import glob as globlib

    return sorted(globlib.glob(pattern))


def remote_dataset_kind(uri: str) -> str:
    """'zarr', 'lerobot' or 'jsonl' for a dataset at an s3:// URI (see storage_s3.dataset_kind)."""
    check_scheme(uri)
    return remote.dataset_kind(uri)


def _s3(uri: str) -> bool:
    check_scheme(uri)
    return uri.startswith(SCHEMES)
