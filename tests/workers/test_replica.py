"""WorldModelReplica in-process (no Ray): rolling, committing a group with its part of the
datasets, idempotence."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from pipeline.generate.expand import expand, groups
from schemas import EpisodeRecord, JobSpec
from sim_model import storage
from sim_model.data.store import EpisodeStore
from tests.workers.jobs import job_dict
from workers import parts
from workers.init_frames import list_init_refs, load_init
from workers.parts import committed_records
from workers.replica import WorldModelReplica

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def replica_job(tmp_path: Path, tiny_checkpoint: Path, tiny_pusht_store) -> tuple[WorldModelReplica, list]:
    job = job_dict(tiny_checkpoint, {"dataset": tiny_pusht_store.path}, tmp_path / "out",
                   filter={"scorer": "tests.workers.policies:even_seed_scorer", "mode": "label"})
    job["action_sources"]["rep"] = {"kind": "replay", "path": tiny_pusht_store.path, "noise_std": 0.01}
    spec = JobSpec.model_validate(job)
    replica = WorldModelReplica(spec.model_dump_json(), str(tmp_path / "out"))
    episodes = expand(spec, list_init_refs(spec.init, replica.wm.features))
    return replica, groups(episodes, spec.batch_size)


def test_replica_rolls_a_group_and_commits_it_with_its_part(replica_job, tiny_pusht_store) -> None:
    replica, batches = replica_job
    records = replica.roll_group(batches[0])
    assert [r.index for r in records] == [0, 1]
    out = replica.out
    shard = EpisodeStore.open(Path(out, "dataset", "shards", "00000000.zarr"))  # the group's part
    assert len(shard) == 2
    for row, (spec, record) in enumerate(zip(batches[0], records, strict=True)):
        episode = shard.episode(row)
        assert episode.frames["top"].shape == (4, 32, 32, 3) and episode.action.shape == (4, 2)
        assert episode.state is not None and episode.state.shape == (4, 2)
        assert episode.checksum() == record.checksum
        assert episode.meta.model_hash == replica.wm.checkpoint_hash and episode.meta.job_id == "tiny"
        assert record.success == (spec.index % 2 == 0) and record.score == spec.index
        # Frame 0 is the initial frame itself; its state is the dataset's.
        ref_frames, ref_state = load_init([spec.init_ref], replica.wm.features)
        np.testing.assert_array_equal(episode.frames["top"][0], ref_frames[0, 0])
        np.testing.assert_array_equal(episode.state[0], ref_state[0])
    assert set(committed_records(out)) == {s.episode_id for s in batches[0]}
    assert not Path(out, "episodes").exists() and not Path(out, "commits").exists()


def test_a_rerolled_group_is_byte_identical_and_committed_work_is_kept(replica_job) -> None:
    replica, batches = replica_job
    first = replica.roll_group(batches[1])
    marker = Path(parts.marker_uri(replica.out, batches[1][0].index))
    mtime = marker.stat().st_mtime_ns
    assert replica.roll_group(batches[1]) == first
    assert marker.stat().st_mtime_ns == mtime, "a committed group is never rewritten"
    # A crash between the part's files and its record: the group is rolled again, to the same bytes.
    marker.unlink()
    again = replica.roll_group(batches[1])
    assert [r.checksum for r in again] == [r.checksum for r in first]
    # The call a Ray actor gets: one group as JSON; back, the records it committed since the last.
    replica._committed.clear()
    records, error = replica.roll_json(json.dumps([e.model_dump() for e in batches[1]]))
    assert error == "" and [EpisodeRecord.model_validate_json(r).episode_id for r in records] == \
        [e.episode_id for e in batches[1]]


def test_a_write_behind_replica_writes_each_part_before_the_next_and_on_flush(replica_job) -> None:
    """A Ray replica's parts (its commits) are written on a thread behind its rolling: at most one
    in flight (the next group waits for it), the last one written by flush(); each call reports
    the records it committed."""
    replica, batches = replica_job
    behind = WorldModelReplica(replica.job.model_dump_json(), replica.out, replica.wm, write_behind=True)
    shard = Path(replica.out, "dataset", "shards")
    reported, error = behind.roll_json(json.dumps([e.model_dump() for e in batches[0]]))
    assert error == "" and behind._writing is not None, "the part is left to the writer thread"
    assert reported == [], "nothing committed yet"
    reported, _ = behind.roll_json(json.dumps([e.model_dump() for e in batches[1]]))
    first = [EpisodeRecord.model_validate_json(r) for r in reported]  # the first group, now committed
    assert [r.episode_id for r in first] == [e.episode_id for e in batches[0]]
    assert EpisodeStore.open(shard / "00000000.zarr").episode(1).checksum() == first[1].checksum
    reported, error = behind.flush()
    second = [EpisodeRecord.model_validate_json(r) for r in reported]
    assert error == "" and behind._writing is None and [r.index for r in second] == [e.index for e in batches[1]]
    assert EpisodeStore.open(shard / f"{batches[1][0].index:08d}.zarr").episode(0).checksum() == second[0].checksum
    assert behind.flush() == ([], ""), "nothing in flight: flush returns at once"


def test_writer_clears_leftovers_of_killed_writers(replica_job) -> None:
    replica, batches = replica_job
    target = storage.join(replica.out, "dataset", "shards", f"{batches[2][0].index:08d}.zarr")
    os.makedirs(target)  # an uncommitted, incomplete shard from an earlier attempt
    Path(target, "junk").write_text("partial")
    stale = storage.staging_dir(target)
    os.makedirs(stale)
    records = replica.roll_group(batches[2])
    shard = EpisodeStore.open(target)
    assert shard.episode(0).checksum() == records[0].checksum
    assert not Path(target, "junk").exists(), "replaced by the group's shard"
    assert storage.remove_stale_staging(str(Path(target).parent)) == 1


def test_user_errors_come_back_as_rows_not_exceptions(tmp_path: Path, tiny_checkpoint: Path,
                                                      tiny_pusht_store) -> None:
    """Ray keeps only the text of a raised exception, so replicas report SpecErrors as a value."""
    job = job_dict(tiny_checkpoint, {"dataset": tiny_pusht_store.path}, tmp_path / "out",
                   action_sources={"p": {"kind": "policy", "policy": "tests.workers.policies:wrong_shape_policy"}})
    spec = JobSpec.model_validate(job)
    replica = WorldModelReplica(spec.model_dump_json(), str(tmp_path / "out"))
    group = groups(expand(spec, list_init_refs(spec.init, replica.wm.features)), 2)[0]
    records, error = replica.roll_json(json.dumps([e.model_dump() for e in group]))
    assert records == [] and "returned actions of shape (2, 7)" in error

    broken = JobSpec.model_validate({**job, "model": str(tmp_path / "missing")})
    replica = WorldModelReplica(broken.model_dump_json(), str(tmp_path / "out"))
    assert "does not exist" in replica.ready()
    assert "does not exist" in replica.roll_json("[]")[1]
