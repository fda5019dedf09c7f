"""Sharded datasets (sim_model/data/shards.py): several episode stores read as one through a
Parquet index, by every reader of iws data, and each shard a Diffusion-Policy store by itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from pipeline.cli import main
from pipeline.pusht.features import pusht_features
from schemas import SpecError
from sim_model.data import shards
from sim_model.data.formats import detect_format, import_dataset, open_dataset
from sim_model.data.store import EpisodeStore
from tests.fixtures.store import make_pusht_episode

FEATURES = pusht_features(resolution=32)
LENGTHS = [5, 3, 4, 6, 2]


def _episodes():
    return [make_pusht_episode(FEATURES, i, n, episode_id=f"job-{i:06d}") for i, n in enumerate(LENGTHS)]


def _rows(layout: dict[int, list[int]], episodes) -> list[shards.IndexRow]:
    return [shards.IndexRow(episode_id=episodes[i].meta.episode_id, index=i, in_dataset=True, shard=key,
                            offset=offset,
                            length=len(episodes[i]), seed=i, source="scripted", score=None,
                            success=None, checksum=episodes[i].checksum())
            for key, members in layout.items() for offset, i in enumerate(members)]


def _build(root: Path, layout: dict[int, list[int]]):
    episodes = _episodes()
    for key, members in layout.items():
        shards.write_shard(str(root), key, [episodes[i] for i in members], FEATURES)
    shards.write_index(str(root), _rows(layout, episodes), FEATURES)
    return episodes


def test_shards_read_as_one_dataset_in_index_order(tmp_path: Path) -> None:
    root = tmp_path / "dataset"
    episodes = _build(root, {0: [0, 1], 2: [2], 3: [3, 4]})
    assert detect_format(root) == "iws-shards"
    dataset = open_dataset(root)
    assert len(dataset) == 5 and dataset.n_frames == sum(LENGTHS)
    assert list(dataset.episode_ends) == list(np.cumsum(LENGTHS))
    assert [e.checksum() for e in dataset] == [e.checksum() for e in episodes]
    assert [dataset.meta(i).episode_id for i in range(5)] == [e.meta.episode_id for e in episodes]
    np.testing.assert_array_equal(dataset.window(3, 2, 5, keys=["action"])["action"],
                                  episodes[3].action[2:5])
    with pytest.raises(IndexError):
        dataset.window(4, 0, 3)


def test_each_shard_is_a_packed_store_of_a_handful_of_objects(tmp_path: Path) -> None:
    """A shard is zarr 3 with each array one object (images through the sharding codec), so its
    object count does not grow with its episodes; DP's layout is `iws export zarr-dp`'s."""
    root = tmp_path / "dataset"
    episodes = _build(root, {0: [0, 1], 2: [2, 3, 4]})
    shard = zarr.open_group(str(root / "shards" / "00000002.zarr"), mode="r")
    assert shard.metadata.zarr_format == 3
    files = [p for p in (root / "shards" / "00000002.zarr").rglob("*") if p.is_file()]
    arrays = 2 + len(shard["data"])  # episode_ends, episode_meta and the data arrays
    assert len(files) == 3 + 2 * arrays, sorted(str(f) for f in files)  # zarr.json per node + one object per array
    ends = shard["meta"]["episode_ends"][:]
    assert list(ends) == list(np.cumsum(LENGTHS[2:]))
    np.testing.assert_array_equal(shard["data"]["action"][:], np.concatenate([e.action for e in episodes[2:]]))


def test_exports_and_import_read_the_shards_unchanged(tmp_path: Path) -> None:
    root = tmp_path / "dataset"
    episodes = _build(root, {0: [0, 1, 2], 3: [3, 4]})
    assert main(["export", "zarr-dp", str(root), str(tmp_path / "dp.zarr")]) == 0  # one DP store
    dp = open_dataset(tmp_path / "dp.zarr")
    assert [e.checksum() for e in dp] == [e.checksum() for e in episodes]
    back = EpisodeStore.open(import_dataset(root, tmp_path / "one.zarr"), "r")
    assert [e.checksum() for e in back] == [e.checksum() for e in episodes]


def test_shards_the_index_does_not_name_are_not_read(tmp_path: Path) -> None:
    root = tmp_path / "dataset"
    episodes = _episodes()
    _build(root, {0: [0, 1]})
    shards.write_shard(str(root), 7, episodes[2:], FEATURES)  # written, not (yet) indexed
    assert len(open_dataset(root)) == 2


def test_missing_or_damaged_index_and_shards_say_what_to_do(tmp_path: Path) -> None:
    root = tmp_path / "dataset"
    _build(root, {0: [0, 1], 2: [2]})
    (root / "shards" / "00000002.zarr" / "meta" / "episode_ends" / "c" / "0").unlink()  # shard 2 truncated to 0 episodes
    dataset = open_dataset(root)
    assert dataset.episode(0).meta.episode_id == "job-000000"
    with pytest.raises(SpecError, match="rerun the job"):
        dataset.episode(2)
    (root / "index.parquet").write_bytes(b"not parquet")
    with pytest.raises(SpecError, match="damaged"):
        shards.ShardedDataset(root)
    (root / "index.parquet").unlink()
    with pytest.raises(SpecError, match="no dataset|neither"):
        open_dataset(root)
    with pytest.raises(SpecError, match="no index.parquet"):
        shards.ShardedDataset(root)


def test_an_empty_dataset_has_an_index_and_no_shards(tmp_path: Path) -> None:
    root = tmp_path / "dataset"
    shards.write_index(str(root), [], FEATURES)
    dataset = open_dataset(root)
    assert len(dataset) == 0 and dataset.n_frames == 0 and dataset.features == FEATURES


def test_a_sharded_dataset_loads_whole_for_training(tmp_path: Path) -> None:
    from sim_model.train.data import TrainingData

    root = tmp_path / "dataset"
    episodes = _build(root, {0: [0, 1], 2: [2], 3: [3, 4]})
    data = TrainingData.from_store(root)
    assert list(data.ends) == list(np.cumsum(LENGTHS))
    np.testing.assert_array_equal(data.actions, np.concatenate([e.action for e in episodes]))
    np.testing.assert_array_equal(data.frames[:, 0].numpy(), np.concatenate([e.frames["top"] for e in episodes]))
