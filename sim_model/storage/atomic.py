"""Write a file or a directory so that a crash leaves the old state or the new one, never half.

Every local write that replaces or creates a finished file goes through `write_file` (and its
`write_bytes` / `write_text` forms); directories are swapped in whole by `replace_dir` /
`move_dir_into_place` / `swap_dir` (the one directory swap; storage.publish_dir uses it too). What they guarantee:

- the new content is written under a hidden temporary name in the same directory (with the same
  suffix, so writers that choose a format by suffix work), then renamed onto the target: readers
  see the old file or the new one, and an exception in the writer leaves the old one untouched;
- the data is fsynced before the rename and the directory after it, so the rename cannot
  outlive the data across a power cut;
- modes come from the umask, as for any file a program creates (0644 under umask 022), never
  the 0600 of `tempfile.mkstemp` or a library's own temporary files.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

StrPath = str | os.PathLike[str]
FSYNC_EACH_MAX = 256  # files in a tree above which one syncfs replaces per-file fsyncs
_UMASK_LOCK = threading.Lock()


class NoExclusiveCreate(OSError):
    """`write_file(..., exclusive=True)` on a filesystem without hard links (no atomic
    create-if-absent there); the original error is its __cause__."""


def umask() -> int:
    """The process umask, read without changing it where Linux allows (/proc), else briefly set."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _UMASK_LOCK:  # os.umask can only be read by setting it
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def write_file(path: StrPath, write: Callable[[Path], object] | bytes | str, *,
               exclusive: bool = False) -> bool:
    """Write `path` whole, atomically. `write` is the content, or a callback that creates the
    file at the temporary path it is given.

    The temporary file is fsynced, given the umask's mode, then renamed onto `path` (with
    `exclusive`: hard-linked, which fails if `path` exists; then the existing file is kept and
    False returned; a filesystem without hard links raises NoExclusiveCreate rather than fall
    back to a rename, which would let the last writer win); the directory is fsynced last. If `write` raises, `path` is untouched and
    the temporary file removed. Returns True when `path` now holds the new content.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{uuid.uuid4().hex[:12]}.tmp{path.suffix}")
    try:
        if callable(write):
            write(tmp)
            if not tmp.is_file():
                raise FileNotFoundError(f"the writer of {path} did not create {tmp.name}")
        else:
            payload = write.encode() if isinstance(write, str) else write
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
        _settle_file(tmp, umask())
        if exclusive:
            try:
                os.link(tmp, path)  # atomic, and fails if `path` exists
            except FileExistsError:
                return False
            except OSError as error:
                raise NoExclusiveCreate(error.errno, error.strerror, str(path)) from error
        else:
            os.replace(tmp, path)
        fsync_dir(path.parent)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(path: StrPath, data: bytes) -> None:
    write_file(path, data)


def write_text(path: StrPath, text: str) -> None:
    """Atomically replace a text file (UTF-8)."""
    write_file(path, text.encode("utf-8"))


def replace_dir(target: StrPath, write: Callable[[Path], None]) -> Path:
    """Call write(tmp_dir), then swap tmp_dir in as `target` (`move_dir_into_place`). A crash
    leaves the old directory or the new one (or, between the two renames, the old one under a
    hidden `.old` name); an exception in `write` leaves `target` untouched."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{uuid.uuid4().hex[:12]}")
    tmp.mkdir()  # not mkdtemp: that makes it 0700 whatever the umask says
    try:
        write(tmp)
        move_dir_into_place(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def move_dir_into_place(new: StrPath, dest: StrPath) -> None:
    """Make the finished directory `new` the directory `dest`, replacing any old one.

    Everything under `new` gets the umask's modes (libraries that build through temporary files
    leave 0600/0700 behind) and is fsynced; then two renames swap it in, so a complete copy is
    on disk at every instant, the old one removed only after; the parent is fsynced last.
    """
    settle_tree(new)
    swap_dir(new, dest)


def swap_dir(new: StrPath, dest: StrPath) -> None:
    """Rename the settled directory `new` to `dest`. An old `dest` is first renamed aside to a
    hidden `.<name>.<id>.old` (what storage.remove_stale_staging sweeps) and removed only after,
    so a complete copy is on disk at every instant; the parent is fsynced before that removal."""
    new, dest = Path(new), Path(dest)
    old = None
    if dest.exists():
        old = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:12]}.old")
        os.replace(dest, old)
    os.replace(new, dest)
    fsync_dir(dest.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def fsync_dir(path: StrPath) -> None:
    """Make the directory's entries (a rename, a new name) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _settle_file(path: Path, mask: int) -> None:
    """Give `path` the mode `mask` gives a new file (executable if it was) and flush it to disk."""
    _give_mode(path, mask)
    _fsync(path)


def _give_mode(path: Path, mask: int) -> None:
    current = path.stat().st_mode
    if stat.S_ISDIR(current):
        wanted = 0o777 & ~mask
    else:
        wanted = (0o777 if current & stat.S_IXUSR else 0o666) & ~mask
    if stat.S_IMODE(current) != wanted:
        os.chmod(path, wanted)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def settle_tree(root: StrPath) -> None:
    """Modes from the umask for everything under `root`, and all of it flushed to disk: file by
    file for a small tree (a checkpoint, a LeRobot dataset), with one syncfs of the filesystem
    for a large one (a Zarr store of one chunk file per frame), where per-file fsyncs would
    cost a disk round trip each."""
    root = Path(root)
    mask = umask()
    folders: list[Path] = []
    files: list[Path] = []
    for top, _, names in os.walk(root):
        folders.append(Path(top))
        files.extend(Path(top, n) for n in names if not Path(top, n).is_symlink())
    for path in [*folders, *files]:
        _give_mode(path, mask)
    if len(files) > FSYNC_EACH_MAX and _syncfs(root):
        return
    for path in files:
        _fsync(path)
    for path in folders:
        fsync_dir(path)


def _syncfs(path: Path) -> bool:
    """syncfs(2): flush the filesystem holding `path`; False where it is unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except (OSError, AttributeError):
        return False
    try:
        return hasattr(libc, "syncfs") and libc.syncfs(fd) == 0
    finally:
        os.close(fd)
