"""A group's part of the datasets (workers/parts.py): which episodes it holds under the filter,
when it is current, that it is never made from an episode that is not what its record says, and
that the part's shard holds the kept episodes' data (a part made again reads them back from it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.pusht.features import pusht_features
from schemas import JobSpec, SpecError
from sim_model.data.formats import open_dataset
from tests.fixtures.store import make_pusht_episode
from tests.workers.jobs import job_dict
from workers import parts
from workers.writer import episode_record

FEATURES = pusht_features(resolution=32)


def _job(out: Path, **output: object) -> JobSpec:
    return JobSpec.model_validate(job_dict("model", {"images": ["x.png"]}, out,
                                           filter={"scorer": "pusht", "mode": "keep"},
                                           output={"path": str(out), "formats": ["zarr", "lerobot"], **output}))


def _committed(out: Path, successes: list[bool]):
    episodes = [make_pusht_episode(FEATURES, i, 4, episode_id=f"tiny-{i:06d}") for i in range(len(successes))]
    shard = str(out / "dataset" / "shards" / "00000000.zarr")
    records = [episode_record(e, i, shard, score=float(ok), success=ok)
               for i, (e, ok) in enumerate(zip(episodes, successes, strict=True))]
    return episodes, records


def test_a_part_holds_the_kept_episodes_and_is_current_until_they_or_the_keys_change(tmp_path: Path) -> None:
    out = tmp_path / "out"
    job = _job(out)
    episodes, records = _committed(out, [True, False, True])
    assert parts.read_parts_of(str(out), 0) is None
    assert not parts.is_current(None, job, records)
    part = parts.write_part(str(out), job, 0, episodes, records, FEATURES)
    assert part.episodes == [("tiny-000000", records[0].checksum), ("tiny-000002", records[2].checksum)]
    assert part.frames == 8 and parts.read_parts(str(out)) == {0: part}
    assert parts.is_current(part, job, records)
    other = records[2].model_copy(update={"checksum": "0" * 64})  # the episode was made again
    assert not parts.is_current(part, job, [records[0], records[1], other])
    assert not parts.is_current(part, _job(out, lerobot_camera_keys={"top": "observation.image"}), records)
    assert not parts.is_current(part, _job(out, formats=["zarr"]), records)  # other formats
    assert part.rejected == [("tiny-000001", records[1].checksum)]


def test_a_group_with_no_kept_episode_gets_an_empty_part(tmp_path: Path) -> None:
    out = tmp_path / "out"
    job = _job(out)
    episodes, records = _committed(out, [False, False])
    part = parts.write_part(str(out), job, 4, episodes, records, FEATURES)
    assert part.episodes == [] and part.frames == 0 and parts.is_current(part, job, records)
    assert not (out / "lerobot").exists() and not (out / "parts" / "00000004").exists()
    assert not (out / "dataset").exists()  # no shard for no episode


def test_an_episode_that_differs_from_its_record_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    episodes, records = _committed(out, [True, True])
    changed = make_pusht_episode(FEATURES, 9, 4, episode_id="tiny-000001")
    with pytest.raises(SpecError, match="tiny-000001 differs from its committed data"):
        parts.write_part(str(out), _job(out), 0, [episodes[0], changed], records, FEATURES)
    assert parts.read_parts_of(str(out), 0) is None  # no record for a part that was not written


def test_kept_episodes_are_read_back_from_the_shard(tmp_path: Path) -> None:
    out = tmp_path / "out"
    job = _job(out)
    episodes, records = _committed(out, [True, False, True])
    part = parts.write_part(str(out), job, 0, episodes, records, FEATURES)
    shard = open_dataset(out / "dataset" / "shards" / "00000000.zarr")
    assert [e.checksum() for e in shard] == [records[0].checksum, records[2].checksum]
    assert not (out / "episodes").exists(), "no episode is stored on its own"
    assert parts.records_of(part) == {r.episode_id: r for r in records}  # the rejected one's too
    # Made again for other camera keys: the kept episodes come back from the shard.
    again = parts.stored_episodes(str(out), _job(out, lerobot_camera_keys={"top": "observation.image"}),
                                  records, part)
    assert again is not None and again[1] is None
    assert [e.checksum() for e in again if e is not None] == [records[0].checksum, records[2].checksum]
    assert parts.stored_episodes(str(out), job, records, None) is None  # no part, no data
    # A shard that is gone holds nothing: its part record goes (the group's commit), so a resume
    # makes the group again.
    import shutil

    from pipeline.generate import verify
    from workers.lease import acquire

    assert verify.inspect(str(out), {0: part}, deep=True) == []
    shutil.rmtree(out / "dataset" / "shards" / "00000000.zarr")
    findings = verify.inspect(str(out), {0: part})
    assert findings and {f.kind for f in findings} == {"shard"} and findings[0].why == "is missing"
    lease = acquire(str(out), job="tiny")
    try:
        assert verify.mark(str(out), {0: part}, findings, lease) == {}
    finally:
        lease.release()
    assert parts.read_parts(str(out)) == {}


def test_keep_episode_stores_is_refused_with_what_replaced_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep_episode_stores was removed.*open_dataset"):
        _job(tmp_path / "out", keep_episode_stores=True)
    assert _job(tmp_path / "out", keep_episode_stores=False).output.keep_episode_stores is False
