"""Directories that appear whole: built in `staging_dir`, moved into place by `publish_dir`.

Locally by rename (the tree fsynced first, two renames when an old copy is replaced, so a
complete copy is on disk at every instant); on S3 by an upload whose validity markers go last
(s3_objects.upload_tree), so a reader never trusts half a directory. `build_and_publish` is the
whole round for a dataset written by a library that only writes local directories.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from schemas.errors import SpecError
from sim_model.storage import atomic
from sim_model.storage import s3_objects as remote
from sim_model.storage.paths import exists
from sim_model.storage.uri import local_path, on_s3

log = logging.getLogger(__name__)

# s3:// targets are staged on local disk here. A writer killed mid-write leaves its directory
# behind; each process sweeps leftovers older than STALE_STAGING_S once, so they do not pile up.
STAGING_ROOT = Path(tempfile.gettempdir()) / "iws-staging"
STALE_STAGING_S = 6 * 3600
_swept = False


def staging_dir(uri: str) -> str:
    """A fresh local path to build `uri` in before `publish_dir` moves it into place: a hidden
    sibling for a local `uri`, a local temporary directory for an s3:// one."""
    if on_s3(uri):
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
    if on_s3(uri):
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
    # The files reach the disk before its name does, and its name before the caller
    # writes its commit (a part record): a power cut cannot leave a commit naming data that was lost.
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
    atomic.swap_dir(src, dst)  # two renames keep a complete copy on disk at every instant
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


def remove_stale_staging(uri: str) -> int:
    """Delete leftovers of local writers that died mid-write (hidden '.*.tmp' / '.*.old' entries).
    S3 has none: its writers stage on local disk (see workers.writer for orphaned uploads)."""
    if on_s3(uri):
        return 0
    path = local_path(uri)
    if not path.is_dir():
        return 0
    stale = [p for p in path.iterdir() if p.name.startswith(".") and p.name.endswith((".tmp", ".old"))]
    for p in stale:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return len(stale)


def build_and_publish(dest: str, *, overwrite: bool, write: Callable[[Path], object]) -> str:
    """Call write(local_dir) to build `dest` on local disk, then publish it to `dest` (s3://:
    uploaded with its validity markers, LeRobot's meta/info.json or a Zarr root's
    .zgroup/.zattrs, last, so that a reader never finds half a dataset it would trust)."""
    if exists(dest) and not overwrite:
        raise SpecError(f"{dest} already exists; choose a new destination or pass --overwrite.")
    staged = staging_dir(dest)  # a local path whose name is dest's last component
    try:
        write(Path(staged))
    except BaseException:
        discard_staged(staged)
        raise
    publish_dir(staged, dest, replace=True)
    log.info("uploaded the export to %s", dest)
    return dest
