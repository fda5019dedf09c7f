"""Every path a generation job reads or writes goes through here, so that s3:// can be added in one
place. Today only local paths are supported; a URI with a scheme is refused with a clear message.

Commit markers are written with `write_new`: for local files an atomic rename (a concurrent
duplicate writes identical bytes, so last-writer-wins is harmless); on S3 this becomes a
conditional put (If-None-Match: *).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

from schemas.errors import SpecError


def is_remote(uri: str) -> bool:
    return "://" in uri


def local_path(uri: str) -> Path:
    """The local filesystem path of `uri`; SpecError for schemes we do not support yet."""
    if is_remote(uri):
        scheme = uri.split("://", 1)[0]
        raise SpecError(f"'{uri}': {scheme}:// locations are not supported yet; use a local path "
                        "(s3:// outputs arrive in a later release).")
    return Path(uri)


def join(root: str, *parts: str) -> str:
    """Join path parts the way the root's scheme does (only '/' separators)."""
    return "/".join([root.rstrip("/"), *parts])


def exists(uri: str) -> bool:
    return local_path(uri).exists()


def read_text(uri: str) -> str:
    return local_path(uri).read_text()


def list_names(uri: str, suffix: str = "") -> list[str]:
    """Names directly under `uri` ending in `suffix`, sorted; [] when `uri` does not exist."""
    path = local_path(uri)
    if not path.is_dir():
        return []
    return sorted(p.name for p in path.iterdir() if p.name.endswith(suffix))


def write_atomic(uri: str, data: str | bytes) -> None:
    """Write a whole file so that a crash leaves the old content or the new, never half of it."""
    path = local_path(uri)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_new(uri: str, data: str | bytes) -> None:
    """Write a commit marker; the object must not be half-visible. See the module docstring."""
    write_atomic(uri, data)


def staging_dir(uri: str) -> str:
    """A fresh sibling directory to build `uri` in before `publish_dir` moves it into place."""
    path = local_path(uri)
    path.parent.mkdir(parents=True, exist_ok=True)
    return str(path.parent / f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")


def publish_dir(staged: str, uri: str, *, replace: bool) -> bool:
    """Move a staged directory to `uri`. If `uri` exists: replace it, or (replace=False) keep it and
    discard the staged copy. Returns whether the staged copy was published."""
    src, dst = local_path(staged), local_path(uri)
    if dst.exists():
        if not replace:
            shutil.rmtree(src, ignore_errors=True)
            return False
        # Two renames keep a complete copy on disk at every instant.
        old = dst.parent / f".{dst.name}.{uuid.uuid4().hex[:12]}.old"
        os.replace(dst, old)
        os.replace(src, dst)
        shutil.rmtree(old, ignore_errors=True)
        return True
    try:
        os.replace(src, dst)
    except OSError:  # a concurrent writer published first; its copy is byte-identical
        shutil.rmtree(src, ignore_errors=True)
        return False
    return True


def remove_tree(uri: str) -> None:
    shutil.rmtree(local_path(uri), ignore_errors=True)


def remove_stale_staging(uri: str) -> int:
    """Delete leftovers of writers that died mid-write (hidden '.*.tmp' / '.*.old' entries)."""
    path = local_path(uri)
    if not path.is_dir():
        return 0
    stale = [p for p in path.iterdir() if p.name.startswith(".") and p.name.endswith((".tmp", ".old"))]
    for p in stale:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return len(stale)


def ensure_writable_dir(uri: str) -> None:
    """Create `uri` if needed and prove we can write there; SpecError naming the problem otherwise."""
    path = local_path(uri)
    if path.exists() and not path.is_dir():
        raise SpecError(f"output path {path} exists and is not a directory; choose another output.path.")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-probe-{uuid.uuid4().hex[:8]}"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as error:
        raise SpecError(f"output path {path} is not writable ({error.strerror or error}); choose a "
                        "directory you can write to in output.path or with --output.") from None
