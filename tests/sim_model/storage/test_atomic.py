"""sim_model.storage.atomic: whole-file and whole-directory writes with umask modes, fsync, and the old
state kept when the writer fails."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from sim_model import storage
from sim_model.storage import atomic


@pytest.fixture
def umask_022() -> Iterator[None]:
    before = os.umask(0o022)
    yield
    os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def leftovers(folder: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


def private_file(tmp: Path) -> None:
    """A writer that creates its file the way tempfile.mkstemp and many libraries do: 0600."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("new")


def test_files_get_the_modes_the_umask_gives(tmp_path: Path, umask_022: None) -> None:
    atomic.write_text(tmp_path / "a.json", "{}")
    atomic.write_file(tmp_path / "b.txt", private_file)
    assert mode(tmp_path / "a.json") == mode(tmp_path / "b.txt") == 0o644
    os.umask(0o027)
    assert atomic.umask() == 0o027
    atomic.write_bytes(tmp_path / "a.json", b"[]")  # a replaced file too
    assert mode(tmp_path / "a.json") == 0o640 and (tmp_path / "a.json").read_bytes() == b"[]"
    assert leftovers(tmp_path, {"a.json", "b.txt"}) == []


def test_a_writer_that_fails_midway_leaves_the_old_content(tmp_path: Path) -> None:
    target = tmp_path / "report.png"
    target.write_text("old")

    def crash(tmp: Path) -> None:
        assert tmp.parent == tmp_path and tmp.suffix == ".png"  # same directory, same suffix
        tmp.write_text("half of the ne")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic.write_file(target, crash)
    assert target.read_text() == "old" and leftovers(tmp_path, {"report.png"}) == []
    with pytest.raises(FileNotFoundError, match="did not create"):
        atomic.write_file(target, lambda tmp: None)
    assert target.read_text() == "old"


def test_exclusive_create_never_overwrites(tmp_path: Path) -> None:
    assert atomic.write_file(tmp_path / "marker.json", "first", exclusive=True)
    assert not atomic.write_file(tmp_path / "marker.json", "second", exclusive=True)
    assert (tmp_path / "marker.json").read_text() == "first"
    assert leftovers(tmp_path, {"marker.json"}) == []


def test_directories_swap_whole_with_umask_modes(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "model"

    def checkpoint(version: str):
        def write(folder: Path) -> None:
            (folder / "weights").mkdir()
            private_file(folder / "weights" / "model.bin")  # as lerobot leaves its videos: 0600
            (folder / "config.json").write_text(version)
        return write

    atomic.replace_dir(target, checkpoint("v1"))
    assert mode(target) == mode(target / "weights") == 0o755
    assert mode(target / "weights" / "model.bin") == mode(target / "config.json") == 0o644

    def crash(folder: Path) -> None:
        (folder / "config.json").write_text("v2, half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic.replace_dir(target, crash)
    assert (target / "config.json").read_text() == "v1"
    atomic.replace_dir(target, checkpoint("v2"))
    assert (target / "config.json").read_text() == "v2"
    assert leftovers(tmp_path, {"model"}) == []


def test_a_large_tree_is_flushed_and_given_modes_too(tmp_path: Path, umask_022: None) -> None:
    new = tmp_path / "new.zarr"
    new.mkdir(mode=0o700)
    for i in range(atomic.FSYNC_EACH_MAX + 5):  # one syncfs instead of a fsync per file
        private_file(new / f"{i}.0.0")
    atomic.move_dir_into_place(new, tmp_path / "dataset.zarr")
    moved = tmp_path / "dataset.zarr"
    assert not new.exists() and mode(moved) == 0o755
    assert {mode(p) for p in moved.iterdir()} == {0o644}


def test_job_outputs_written_through_storage_get_umask_modes(tmp_path: Path, umask_022: None) -> None:
    """Markers, the lease, manifest.json: these were 0600 when made through mkstemp."""
    storage.write_atomic(str(tmp_path / "manifest.json"), "{}")
    assert storage.write_new(str(tmp_path / "commits" / "ep-0.json"), "{}")
    assert not storage.write_new(str(tmp_path / "commits" / "ep-0.json"), "{...}")
    assert mode(tmp_path / "manifest.json") == mode(tmp_path / "commits" / "ep-0.json") == 0o644
    assert leftovers(tmp_path / "commits", {"ep-0.json"}) == []


def test_a_swap_cut_between_its_renames_leaves_a_copy_the_sweep_removes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One directory swap (atomic.swap_dir) serves checkpoints, exports and published episodes:
    cut after the old copy is renamed aside, a complete copy is still on disk under the hidden
    name that storage.remove_stale_staging sweeps."""
    target = tmp_path / "ep-0"
    target.mkdir()
    (target / "data").write_text("old")
    new = tmp_path / ".ep-0.0123456789ab.tmp"  # as storage.staging_dir names it
    new.mkdir()
    (new / "data").write_text("new")
    real_replace, calls = os.replace, []

    def cut_after_first(src: object, dst: object) -> None:
        calls.append(dst)
        if len(calls) == 2:
            raise OSError("power cut")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", cut_after_first)
    with pytest.raises(OSError, match="power cut"):
        atomic.swap_dir(new, target)
    monkeypatch.undo()
    aside = [p for p in tmp_path.iterdir() if p.name.endswith(".old")]
    assert len(aside) == 1 and (aside[0] / "data").read_text() == "old"
    assert storage.remove_stale_staging(str(tmp_path)) == 2  # the staged copy and the old one
    assert list(tmp_path.iterdir()) == []


def test_list_files_finds_every_file_at_any_depth(tmp_path: Path) -> None:
    from sim_model import storage

    for name in ("a/b/c.parquet", "a/d.json", "e.txt"):
        (tmp_path / "root" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "root" / name).write_text("x")
    root = str(tmp_path / "root")
    assert storage.list_files(root) == [f"{root}/a/b/c.parquet", f"{root}/a/d.json", f"{root}/e.txt"]
    assert storage.list_files(str(tmp_path / "missing")) == []
