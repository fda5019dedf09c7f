"""A group's commit (workers/parts.py) and the storage primitives under it, without Ray: the
part record is created once, after the part's files, by exactly one of racing writers; a loser
with the same data takes the winner's record, one with other data is refused; a record is
trusted only with paths inside the output; exclusive creates never silently overwrite. Local
disk and a real S3 server."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from pipeline.pusht.features import pusht_features
from schemas import JobSpec, SpecError
from sim_model import storage
from sim_model.data.store import EpisodeStore
from tests.fixtures.store import make_pusht_episode
from tests.workers.jobs import job_dict
from workers import parts
from workers.writer import CommitConflict, episode_record

FEATURES = pusht_features(resolution=16)


def _job(out: str) -> JobSpec:
    return JobSpec.model_validate(job_dict("model", {"images": ["x.png"]}, out, output={"path": out}))


def _group(out: str, variant: int = 0, size: int = 3):
    episodes = [make_pusht_episode(FEATURES, i + variant, 5, episode_id=f"tiny-{i:06d}") for i in range(size)]
    shard = storage.join(out, "dataset", "shards", "00000000.zarr")
    return episodes, [episode_record(e, i, shard) for i, e in enumerate(episodes)]


def test_racing_writers_of_one_group_commit_it_once(out: str) -> None:
    """Both write the part's files (the same bytes: a retried group replays the same batch); one
    conditional create wins, and both end with the winner's record."""
    job = _job(out)
    results: list[object] = [None, None]
    barrier = threading.Barrier(2)

    def write(i: int) -> None:
        episodes, records = _group(out)
        barrier.wait()
        results[i] = parts.write_part(out, job, 0, episodes, records, FEATURES)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    standing = parts.read_parts_of(out, 0)
    assert standing is not None and results[0] == results[1] == standing
    assert [r.episode_id for r in standing.records or ()] == ["tiny-000000", "tiny-000001", "tiny-000002"]
    assert list(parts.committed_records(out)) == ["tiny-000000", "tiny-000001", "tiny-000002"]
    shard = EpisodeStore.open(storage.join(out, "dataset", "shards", "00000000.zarr"))
    assert [shard.episode(i).checksum() for i in range(3)] == [r.checksum for r in standing.records or ()]

    episodes, records = _group(out, variant=7)  # another run made other frames for the group
    with pytest.raises(CommitConflict, match="first commit stands"):
        parts.write_part(out, job, 0, episodes, records, FEATURES)
    assert parts.read_parts_of(out, 0) == standing


def test_a_group_that_grew_replaces_its_record(out: str) -> None:
    job = _job(out)
    episodes, records = _group(out, size=2)
    first = parts.write_part(out, job, 0, episodes, records, FEATURES)
    episodes, records = _group(out, size=3)
    grown = parts.write_part(out, job, 0, episodes, records, FEATURES, previous=first)
    assert parts.read_parts_of(out, 0) == grown and len(parts.committed_records(out)) == 3


@pytest.mark.parametrize("path", ["../job.json", "/etc/passwd", "dataset/../../x", "manifest.json"])
def test_a_part_record_naming_a_file_outside_its_part_is_refused(tmp_path: Path, path: str) -> None:
    """Issue 34: a path read from a record must stay inside the output's datasets. A resume
    checks the files a part record lists; one naming another place is refused with the file named."""
    out = str(tmp_path / "out")
    episodes, records = _group(out)
    part = parts.write_part(out, _job(out), 0, episodes, records, FEATURES)
    marker = Path(parts.marker_uri(out, 0))
    marker.write_text(part.model_copy(update={"files": {**(part.files or {}), path: 3}}).model_dump_json())
    with pytest.raises(SpecError, match=f"{marker}.*{path}"):
        parts.read_parts(out)


def test_a_part_record_committing_another_groups_episodes_is_refused(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    episodes, records = _group(out)
    part = parts.write_part(out, _job(out), 0, episodes, records, FEATURES)
    marker = Path(parts.marker_uri(out, 4))
    marker.write_text(part.model_copy(update={"key": 4}).model_dump_json())  # holds episodes 0..2
    with pytest.raises(SpecError, match=f"{marker}.*episode 0"):
        parts.read_parts(out)


def test_publish_fails_loudly_when_the_staged_copy_vanished(tmp_path: Path) -> None:
    """What another run's start-up cleanup did to a writer mid-write: its staging directory is
    gone when it publishes. That used to return False, and the commit was written anyway."""
    target = str(tmp_path / "dataset" / "shards" / "00000000.zarr")
    staged = storage.staging_dir(target)
    EpisodeStore.write_packed(staged, FEATURES, [make_pusht_episode(FEATURES, 0, 4)])
    storage.remove_tree(staged)
    with pytest.raises(SpecError, match="vanished before it was published"):
        storage.publish_dir(staged, target, replace=True)
    assert not Path(target).exists()


def test_a_shard_reaches_the_disk_before_its_commit(tmp_path: Path, monkeypatch) -> None:
    """Every file and directory of a group's shard, and the entry that names it, are fsynced
    before its part record is created: after a power cut a commit never names data that was only
    in the page cache."""
    synced: set[tuple[int, int]] = set()
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        info = os.fstat(fd)
        synced.add((info.st_dev, info.st_ino))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    out = str(tmp_path / "out")
    episodes, records = _group(out)
    parts.write_part(out, _job(out), 0, episodes, records, FEATURES)
    shard = Path(out) / "dataset" / "shards" / "00000000.zarr"
    paths = [shard, shard.parent, *shard.rglob("*")]
    assert len(paths) > 5
    unsynced = [p for p in paths if (p.stat().st_dev, p.stat().st_ino) not in synced]
    assert not unsynced, f"not fsynced before the commit: {unsynced}"


def test_write_new_never_silently_overwrites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a filesystem without hard links (vfat, some FUSE and SMB mounts) `os.link` fails with
    EPERM or EOPNOTSUPP. None can be mounted in this sandbox, so os.link is made to fail the way
    it fails there; every other call is real."""
    uri = str(tmp_path / "parts" / "00000000.json")
    assert storage.write_new(uri, "first") and not storage.write_new(uri, "second")

    def no_hard_links(src: object, dst: object, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(os, "link", no_hard_links)
    with pytest.raises(SpecError, match="hard links"):
        storage.write_new(uri, "second")
    assert Path(uri).read_text() == "first", "an existing commit was overwritten"
    with pytest.raises(SpecError, match="hard links"):
        storage.write_new(str(tmp_path / "parts" / "00000002.json"), "new")
    with pytest.raises(SpecError, match="hard links"):  # refused before a job starts
        storage.ensure_writable_dir(str(tmp_path / "other-output"))
