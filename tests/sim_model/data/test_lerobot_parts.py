"""LeRobot datasets written in parts and assembled from metadata (sim_model/data/formats/lerobot_parts.py),
read back with lerobot's own LeRobotDataset and compared with the one-writer export of the same
episodes (lerobot_writer.export_lerobot, whose statistics are computed over every frame)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.pusht.features import pusht_features
from schemas import SpecError
from sim_model.data.episode import Episode
from sim_model.data.formats.lerobot_parts import assemble, data_uri, write_part
from sim_model.data.formats.lerobot_reader import video_backend
from sim_model.data.formats.lerobot_writer import export_lerobot
from sim_model.data.store import EpisodeStore
from tests.fixtures.store import make_pusht_episode

FEATURES = pusht_features(resolution=32)
REPO = "iws/parts"
CAM = "observation.images.top"
# Three parts keyed like a job's groups (first episode index): 2, 3 and 1 episodes, of
# (index, length).
PARTS = {0: [(0, 48), (1, 32)], 2: [(2, 40), (3, 56), (4, 24)], 5: [(5, 64)]}


def _frames(keys) -> int:
    return sum(n for k in keys for _, n in PARTS[k])


def _episodes(key: int) -> list[Episode]:
    return [make_pusht_episode(FEATURES, i, n, episode_id=f"ep-{i:06d}") for i, n in PARTS[key]]


def _write(dest: Path, parts: Path, key: int) -> None:
    episodes = _episodes(key)
    task = "Push the T onto the target" if key != 5 else "Push it again"
    write_part(episodes, FEATURES, str(dest), str(parts), key, tasks=[task] * len(episodes))


@pytest.fixture(scope="module")
def assembled(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("parts")
    dest, parts = root / "lerobot", root / "parts"
    for key in PARTS:
        _write(dest, parts, key)
    result = assemble(str(dest), str(parts), list(PARTS))
    assert (result.episodes, result.frames, result.parts) == (6, _frames(PARTS), 3)
    return dest, parts


def test_assembled_parts_open_in_lerobot_with_every_frame_in_place(assembled) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dest, _ = assembled
    ds = LeRobotDataset(REPO, root=dest, video_backend=video_backend())
    episodes = [e for key in sorted(PARTS) for e in _episodes(key)]
    assert ds.num_episodes == 6 and ds.num_frames == _frames(PARTS)
    start = 0
    for e, episode in enumerate(episodes):
        for t in (0, len(episode) - 1):  # first and last frame of every episode, across parts
            item = ds[start + t]
            assert int(item["episode_index"]) == e and int(item["frame_index"]) == t
            assert int(item["index"]) == start + t
            np.testing.assert_allclose(item["action"].numpy(), episode.action[t], rtol=1e-6)
            frame = (item[CAM].numpy().transpose(1, 2, 0) * 255).round()
            assert np.abs(frame - episode.frames["top"][t]).mean() < 6  # lossy AV1
        start += len(episode)
    assert ds[ds.num_frames - 1]["task"] == "Push it again" and ds[0]["task"] == "Push the T onto the target"


def test_assembled_statistics_match_statistics_over_every_frame(assembled, tmp_path) -> None:
    """The one-writer export computes its statistics from every frame; the assembled dataset
    merges per-episode ones. Counts, min, max, mean and std agree to float precision; quantiles
    are estimated from the per-episode ones (stats.mixture_quantiles): within 3 % of the range."""
    dest, _ = assembled
    store = EpisodeStore.create(tmp_path / "all.zarr", FEATURES)
    for key in sorted(PARTS):
        for episode in _episodes(key):
            store.append(episode)
    reference = export_lerobot(store.path, tmp_path / "reference", repo_id=REPO, task="Push")
    exact = json.loads((Path(reference) / "meta" / "stats.json").read_text())
    merged = json.loads((dest / "meta" / "stats.json").read_text())
    assert set(merged) == set(exact)
    for feature, stats in exact.items():
        span = float(np.max(np.asarray(stats["max"], float) - np.asarray(stats["min"], float)))
        for stat in ("min", "max", "mean", "std", "count"):
            if feature == "task_index":
                continue  # the reference has one task, the parts two
            np.testing.assert_allclose(merged[feature][stat], stats[stat], rtol=1e-6, atol=1e-9,
                                       err_msg=f"{feature}/{stat}")
        for stat in ("q01", "q10", "q50", "q90", "q99"):
            if feature != "task_index":
                error = np.abs(np.asarray(merged[feature][stat]) - np.asarray(stats[stat])).max()
                assert error <= 0.03 * span + 1e-9, f"{feature}/{stat}: {error} of {span}"


def test_reassembling_rewrites_only_what_moved(assembled, tmp_path) -> None:
    """Assembling the same parts again rewrites no data file; a part added at the end rewrites
    none of the existing ones; a part added before them moves (and rewrites) those after it."""
    import shutil

    dest, parts = assembled
    copy = tmp_path / "copy"
    shutil.copytree(dest.parent, copy)
    dest, parts = copy / "lerobot", copy / "parts"
    assert assemble(str(dest), str(parts), list(PARTS)).rewritten == 0
    PARTS[9] = [(9, 4)]
    PARTS[1] = [(1, 6)]
    try:
        _write(dest, parts, 9)
        result = assemble(str(dest), str(parts), [0, 2, 5, 9])
        assert (result.episodes, result.rewritten) == (7, 1)  # only the new part's own file
        _write(dest, parts, 1)
        result = assemble(str(dest), str(parts), [0, 1, 2, 5, 9])
        assert (result.episodes, result.rewritten) == (8, 4)  # the new part and the three after it
        index = pq.read_table(data_uri(str(dest), 9), columns=["index", "episode_index"]).to_pandas()
        assert index["episode_index"].unique().tolist() == [7]
        assert index["index"].iloc[0] == _frames([0, 1, 2, 5])
        # A part dropped from the dataset leaves no file behind for lerobot to read.
        result = assemble(str(dest), str(parts), [0, 2, 5, 9])
        assert any("file-001.parquet" in uri for uri in result.removed)
        from lerobot.datasets.lerobot_dataset import LeRobotDataset

        ds = LeRobotDataset(REPO, root=dest, video_backend=video_backend())
        assert ds.num_episodes == 7 and int(ds[ds.num_frames - 1]["episode_index"]) == 6
    finally:
        PARTS.pop(9)
        PARTS.pop(1)


def test_a_missing_part_is_named(assembled, tmp_path) -> None:
    dest, parts = assembled
    with pytest.raises(SpecError, match="00000007.*missing|missing.*rerun"):
        assemble(str(dest), str(parts), [0, 7])


def test_the_assembled_dataset_reads_back_through_open_dataset(assembled) -> None:
    """iws's own LeRobot reader (`iws export`, `iws import`, replay sources) reads the assembled
    dataset, whose files are numbered by part, not 0..F-1."""
    from sim_model.data.formats import open_dataset

    dest, _ = assembled
    source = open_dataset(dest)
    episodes = [e for key in sorted(PARTS) for e in _episodes(key)]
    assert len(source) == len(episodes) and source.n_frames == _frames(PARTS)
    for i in (0, 2, 5):
        np.testing.assert_allclose(source.episode(i).action, episodes[i].action, rtol=1e-6)
        frames = source.episode(i).frames["top"].astype(float)
        assert np.abs(frames - episodes[i].frames["top"]).mean() < 6
