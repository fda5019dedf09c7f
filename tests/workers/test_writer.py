"""Episode writer and storage primitives without Ray: a commit marker never points at data that
is not there, a marker whose data went missing is withdrawn, exclusive creates never silently
overwrite, and cleanup needs the output's lease. Local disk and a real S3 server."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest

from pipeline.pusht.features import pusht_features
from schemas import SpecError
from sim_model import storage
from sim_model.data.store import EpisodeStore
from tests.fixtures.store import make_pusht_episode
from workers import lease
from workers.lease import LeaseLost
from workers.writer import (
    EpisodeNotStored,
    commit,
    committed_records,
    drop_commits_without_data,
    read_commit,
    remove_orphan_uploads,
    stage_episode,
)

FEATURES = pusht_features(resolution=16)


@pytest.fixture(params=["local", "s3"])
def out(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "out")
    return request.getfixturevalue("s3_env").url("out")


def _episode(index: int):
    return make_pusht_episode(FEATURES, index, 6, episode_id=f"ep-{index:06d}")


def test_publish_fails_loudly_when_the_staged_copy_vanished(tmp_path: Path) -> None:
    """What another run's start-up cleanup did to a writer mid-write: its staging directory is
    gone when it publishes. That used to return False, and the marker was written anyway."""
    target = str(tmp_path / "episodes" / "ep-000000")
    staged = storage.staging_dir(target)
    EpisodeStore.create(staged, FEATURES).append(_episode(0))
    storage.remove_tree(staged)
    with pytest.raises(SpecError, match="vanished before it was published"):
        storage.publish_dir(staged, target, replace=True)
    assert not Path(target).exists()


def test_episode_data_reaches_the_disk_before_its_marker(tmp_path: Path, monkeypatch) -> None:
    """Every file and directory of a staged episode, and the entry that names it, are fsynced
    before `stage_episode` returns the record to commit: after a power cut a marker never names
    data that was only in the page cache."""
    synced: set[tuple[int, int]] = set()
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        info = os.fstat(fd)
        synced.add((info.st_dev, info.st_ino))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    out = tmp_path / "out"
    record = stage_episode(str(out), _episode(0), 0, FEATURES)
    stored = Path(record.uri)
    paths = [stored, stored.parent, *stored.rglob("*")]
    assert len(paths) > 5
    unsynced = [p for p in paths if (p.stat().st_dev, p.stat().st_ino) not in synced]
    assert not unsynced, f"not fsynced before the commit: {unsynced}"


def test_no_marker_is_written_for_data_that_is_not_there(out: str) -> None:
    record = stage_episode(out, _episode(0), 0, FEATURES)
    storage.remove_tree(record.uri)  # removed between upload and commit
    with pytest.raises(EpisodeNotStored, match="ep-000000"):
        commit(out, record)
    assert read_commit(out, "ep-000000") is None
    record = stage_episode(out, _episode(0), 0, FEATURES)  # a retry stores and commits it
    assert commit(out, record) == read_commit(out, "ep-000000")


def test_markers_whose_data_is_missing_are_withdrawn(out: str, caplog: pytest.LogCaptureFixture) -> None:
    records = [commit(out, stage_episode(out, _episode(i), i, FEATURES)) for i in range(3)]
    storage.remove_tree(records[1].uri)  # the state issue 13 found: a marker, no episode
    with lease.hold(out, job="tiny") as held, caplog.at_level(logging.WARNING):
        kept = drop_commits_without_data(out, committed_records(out), held)
    assert sorted(kept) == ["ep-000000", "ep-000002"]
    assert sorted(committed_records(out)) == ["ep-000000", "ep-000002"]
    assert "ep-000001" in caplog.text and "regenerated" in caplog.text


@pytest.mark.parametrize("uri", ["{out}/episodes/..", "{out}/episodes/.", "/", "{out}/episodes/ep-000000"])
def test_a_marker_naming_a_foreign_store_is_refused_and_deletes_nothing(tmp_path: Path, uri: str) -> None:
    """Issue 34: a marker whose data is missing is withdrawn, its store deleted; a `uri` ending
    in '/..' made that store the whole output. A path read from a marker must name the
    episode's own store, inside OUT/episodes/."""
    out = tmp_path / "out"
    records = [commit(str(out), stage_episode(str(out), _episode(i), i, FEATURES)) for i in range(2)]
    (out / "job.json").write_text("{}")
    marker = out / "commits" / "ep-000001.json"
    foreign = records[1].model_copy(update={"uri": uri.format(out=out), "checksum": "0" * 64})
    marker.write_text(foreign.model_dump_json())
    before = _files(out)
    with lease.hold(str(out), job="tiny") as held, pytest.raises(SpecError, match=str(marker)):
        drop_commits_without_data(str(out), committed_records(str(out)), held)
    with pytest.raises(SpecError, match="not one iws wrote"):
        read_commit(str(out), "ep-000001")
    assert _files(out) == before


def _files(root: Path) -> list[Path]:
    """Everything under `root` but the lease's lock file."""
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.name != ".lease.json.lock")


def test_a_marker_holding_another_episodes_record_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    records = [commit(str(out), stage_episode(str(out), _episode(i), i, FEATURES)) for i in range(2)]
    marker = out / "commits" / "ep-000001.json"
    marker.write_text(records[0].model_dump_json())  # its paths would be episode 0's
    with pytest.raises(SpecError, match=f"{marker}.*holds the record of 'ep-000000'"):
        committed_records(str(out))


def test_write_new_never_silently_overwrites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a filesystem without hard links (vfat, some FUSE and SMB mounts) `os.link` fails with
    EPERM or EOPNOTSUPP. None can be mounted in this sandbox, so os.link is made to fail the way
    it fails there; every other call is real."""
    uri = str(tmp_path / "commits" / "a.json")
    assert storage.write_new(uri, "first") and not storage.write_new(uri, "second")

    def no_hard_links(src: object, dst: object, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(os, "link", no_hard_links)
    with pytest.raises(SpecError, match="hard links"):
        storage.write_new(uri, "second")
    assert Path(uri).read_text() == "first", "an existing marker was overwritten"
    with pytest.raises(SpecError, match="hard links"):
        storage.write_new(str(tmp_path / "commits" / "b.json"), "new")
    with pytest.raises(SpecError, match="hard links"):  # refused before a job starts
        storage.ensure_writable_dir(str(tmp_path / "other-output"))


def test_orphan_uploads_are_removed_only_under_the_lease(s3_env) -> None:
    """S3: another driver's finished but uncommitted upload must survive a driver that does not
    own the output."""
    out = s3_env.url("out")
    first = lease.acquire(out, job="tiny")
    upload = stage_episode(out, _episode(0), 0, FEATURES)  # finished, not committed yet
    second = lease.acquire(out, job="tiny", take_over=True)  # the output changed hands
    with pytest.raises(LeaseLost):
        remove_orphan_uploads(out, [], first)
    assert storage.exists(upload.uri)
    assert remove_orphan_uploads(out, [], second) == 1
    assert not storage.exists(upload.uri)
    second.release()
