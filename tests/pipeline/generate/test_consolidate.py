"""The assembly of the job's datasets from its parts, without Ray: it follows the committed
episodes' checksums, not only their ids, so a regenerated episode reaches OUT/dataset and
OUT/lerobot once its group's part is made again (until then the part is refused as stale)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.generate.consolidate import StaleParts, assemble_lerobot, assemble_zarr, check_parts
from pipeline.pusht.features import pusht_features
from schemas import EpisodeRecord, EpisodeSpec, JobSpec
from sim_model.data.formats import open_dataset
from sim_model.data.shards import ShardedDataset
from tests.fixtures.store import make_pusht_episode
from tests.workers.jobs import job_dict
from workers import parts
from workers.writer import episode_record

FEATURES = pusht_features(resolution=32)


GROUPS = [[0, 1], [2]]  # episode indices of each group


def _episode(index: int, variant: int | None = None):
    """Episode `index`; `variant` makes other content under the same id."""
    return make_pusht_episode(FEATURES, index if variant is None else variant, 5,
                              episode_id=f"tiny-{index:06d}")


MADE: dict[str, object] = {}  # episode id -> the episode its record was made from


def _commit(out: str, index: int, variant: int | None = None) -> EpisodeRecord:
    """The record of episode `index` as a replica makes it (committed with its group's part)."""
    episode = _episode(index, variant)
    MADE[episode.meta.episode_id] = episode
    return episode_record(episode, index, f"{out}/dataset/shards/{index:08d}.zarr")


def _groups() -> list[list[EpisodeSpec]]:
    return [[EpisodeSpec(job_id="tiny", index=i, episode_id=f"tiny-{i:06d}", seed=i, init_ref="x.png",
                         action_source="scripted", horizon=5) for i in group] for group in GROUPS]


def _write_parts(spec: JobSpec, records: list[EpisodeRecord], which: list[int] | None = None) -> None:
    """What the replicas do with a rolled group: write its part and commit it (replacing the
    part that was there)."""
    out = spec.output.path
    for g, group in enumerate(GROUPS):
        if which is None or g in which:
            rows = [records[i] for i in group]
            parts.write_part(out, spec, group[0], [MADE[r.episode_id] for r in rows], rows, FEATURES,
                             previous=parts.read_parts_of(out, group[0]))


def _exported_actions(root: Path, episode: int) -> np.ndarray:
    table = pq.read_table(sorted((root / "data").rglob("*.parquet"))).to_pandas()
    rows = table[table["episode_index"] == episode]
    return np.stack(rows["action"].to_numpy())


def test_a_regenerated_episode_refreshes_both_datasets(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    spec = JobSpec.model_validate(job_dict("model", {"images": ["x.png"]}, out,
                                           output={"path": out, "formats": ["zarr", "lerobot"]}))
    records = [_commit(out, i) for i in range(3)]
    _write_parts(spec, records)
    by_id = {r.episode_id: r for r in records}
    check_parts(spec, _groups(), by_id, parts.read_parts(out))
    zarr_uri = assemble_zarr(spec, _groups(), by_id, FEATURES)
    dataset = open_dataset(zarr_uri)
    assert isinstance(dataset, ShardedDataset) and len(dataset) == 3
    assert [dataset.episode(i).checksum() for i in range(3)] == [r.checksum for r in records]
    assert [(r.shard, r.offset) for r in dataset.rows] == [(0, 0), (0, 1), (2, 0)]
    lerobot = Path(assemble_lerobot(spec, _groups(), by_id))
    info_mtime = (lerobot / "meta" / "info.json").stat().st_mtime_ns
    assemble_lerobot(spec, _groups(), by_id)  # nothing changed: left alone
    assert (lerobot / "meta" / "info.json").stat().st_mtime_ns == info_mtime

    # Episode 1 made again with other frames under the same id (its group's record deleted and
    # the checkpoint at the model path replaced, say): same ids, same count, a new checksum.
    records[1] = _commit(out, 1, variant=7)
    by_id = {r.episode_id: r for r in records}
    with pytest.raises(StaleParts) as stale:  # the part of group 0 holds the old episode 1
        check_parts(spec, _groups(), by_id, parts.read_parts(out))
    assert stale.value.keys == [0]
    with pytest.raises(StaleParts):
        assemble_lerobot(spec, _groups(), by_id)
    _write_parts(spec, records, which=[0])
    assemble_zarr(spec, _groups(), by_id, FEATURES)
    assert open_dataset(zarr_uri).episode(1).checksum() == records[1].checksum
    assemble_lerobot(spec, _groups(), by_id)
    expected = make_pusht_episode(FEATURES, 7, 5).action
    np.testing.assert_array_equal(_exported_actions(lerobot, 1), expected)
    np.testing.assert_array_equal(_exported_actions(lerobot, 2), make_pusht_episode(FEATURES, 2, 5).action)


def test_the_index_drops_shards_no_kept_episode_needs(tmp_path: Path) -> None:
    """A shard left by a group that no longer has kept episodes (or by a killed writer of an
    older layout) is removed, so the directory holds only what the index names."""
    out = str(tmp_path / "out")
    spec = JobSpec.model_validate(job_dict("model", {"images": ["x.png"]}, out))
    records = [_commit(out, i) for i in range(3)]
    _write_parts(spec, records)
    stray = tmp_path / "out" / "dataset" / "shards" / "00000099.zarr"
    stray.mkdir(parents=True)
    by_id = {r.episode_id: r for r in records}
    root = Path(assemble_zarr(spec, _groups(), by_id, FEATURES))
    assert sorted(p.name for p in (root / "shards").iterdir()) == ["00000000.zarr", "00000002.zarr"]
    assert len(open_dataset(root)) == 3


def test_camera_keys_of_the_spec_reach_the_dataset_and_a_change_redoes_its_parts(tmp_path: Path) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

    out = str(tmp_path / "out")
    output = {"path": out, "formats": ["zarr", "lerobot"]}
    plain = JobSpec.model_validate(job_dict("model", {"images": ["x.png"]}, out, output=output))
    pusht_env = JobSpec.model_validate(job_dict("model", {"images": ["x.png"]}, out, output={
        **output, "lerobot_camera_keys": {"top": "observation.image"}}))
    records = [_commit(out, i) for i in range(3)]
    by_id = {r.episode_id: r for r in records}
    _write_parts(plain, records)
    lerobot = Path(assemble_lerobot(plain, _groups(), by_id))
    assert "observation.images.top" in LeRobotDatasetMetadata("iws/tiny", root=lerobot).features
    with pytest.raises(StaleParts):  # same episodes, other keys: every part is made again
        assemble_lerobot(pusht_env, _groups(), by_id)
    _write_parts(pusht_env, records)
    assemble_lerobot(pusht_env, _groups(), by_id)
    features = LeRobotDatasetMetadata("iws/tiny", root=lerobot).features
    assert "observation.image" in features and "observation.images.top" not in features
    assert not list(lerobot.glob("videos/observation.images.top/*/*.mp4"))  # the old videos are gone
