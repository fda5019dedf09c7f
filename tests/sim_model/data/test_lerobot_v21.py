"""LeRobot v2.1 export (openpi, GR00T): the layout lerobot 0.3.x wrote, read by lerobot 0.4.4's own
v2.1 -> v3.0 converter and its LeRobotDataset; iws reads v2.1 back; bad input is refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.cli import main
from schemas import SpecError
from sim_model.data.formats import import_dataset, open_dataset
from sim_model.data.formats.lerobot_convert import is_v21
from sim_model.data.formats.lerobot_v21 import export_lerobot_v21
from sim_model.data.formats.stats import array_stats
from tests.fixtures.lerobot_v21 import check_converts_and_loads
from tests.fixtures.store import TINY_LENGTHS


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_pusht_store_module) -> Path:
    dest = tmp_path_factory.mktemp("v21") / "pusht"
    return export_lerobot_v21(tiny_pusht_store_module.path, dest)


@pytest.fixture(scope="module")
def tiny_pusht_store_module(tmp_path_factory):
    from tests.fixtures.store import build_tiny_pusht_store

    return build_tiny_pusht_store(tmp_path_factory.mktemp("src"))


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_layout_is_v21(exported, tiny_pusht_store_module) -> None:
    source = tiny_pusht_store_module
    info = json.loads((exported / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v2.1" and is_v21(exported)
    assert info["data_path"] == "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
    assert info["video_path"] == "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
    assert (info["total_episodes"], info["total_frames"], info["total_videos"], info["total_chunks"],
            info["chunks_size"], info["fps"]) == (3, sum(TINY_LENGTHS), 3, 1, 1000, 10)
    assert info["splits"] == {"train": "0:3"}
    video = info["features"]["observation.images.top"]
    assert video["dtype"] == "video" and video["shape"] == [32, 32, 3]
    assert video["info"]["video.codec"] == "h264" and video["info"]["video.pix_fmt"] == "yuv420p"
    for i, length in enumerate(TINY_LENGTHS):
        table = pq.read_table(exported / f"data/chunk-000/episode_{i:06d}.parquet").to_pydict()
        assert table["frame_index"] == list(range(length)) and set(table["episode_index"]) == {i}
        first = sum(TINY_LENGTHS[:i])
        assert table["index"] == list(range(first, first + length))
        np.testing.assert_array_equal(np.asarray(table["action"], np.float32), source.episode(i).action)
        assert (exported / f"videos/chunk-000/observation.images.top/episode_{i:06d}.mp4").is_file()
    assert _jsonl(exported / "meta/tasks.jsonl") == [{"task_index": 0, "task": "Push the T onto the target"}]
    assert [e["length"] for e in _jsonl(exported / "meta/episodes.jsonl")] == list(TINY_LENGTHS)


def test_episode_stats_are_exact(exported, tiny_pusht_store_module) -> None:
    rows = _jsonl(exported / "meta/episodes_stats.jsonl")
    assert [r["episode_index"] for r in rows] == [0, 1, 2]
    for row in rows:
        episode = tiny_pusht_store_module.episode(row["episode_index"])
        stats = row["stats"]
        assert set(stats["action"]) == {"min", "max", "mean", "std", "count"}
        expected = array_stats(episode.action)
        for key in ("min", "max", "mean", "std"):
            np.testing.assert_allclose(stats["action"][key], expected[key], rtol=1e-6)
        assert stats["action"]["count"] == [len(episode)]
        top = np.asarray(stats["observation.images.top"]["mean"])
        assert top.shape == (3, 1, 1)
        np.testing.assert_allclose(top.ravel(), episode.frames["top"].reshape(-1, 3).mean(0) / 255, rtol=1e-9)


def test_lerobots_converter_and_loader_read_it(exported, tiny_pusht_store_module, tmp_path) -> None:
    v30 = check_converts_and_loads(tiny_pusht_store_module, exported, tmp_path)
    assert json.loads((v30 / "meta/info.json").read_text())["codebase_version"] == "v3.0"
    assert is_v21(exported)  # the converter ran on links: the export itself is unchanged


def test_iws_reads_v21_and_it_round_trips_to_v30(exported, tiny_pusht_store_module, tmp_path,
                                                 monkeypatch) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    monkeypatch.setenv("IWS_CACHE_DIR", str(tmp_path / "cache"))
    source = tiny_pusht_store_module
    read = open_dataset(exported)
    assert len(read) == 3 and read.n_frames == source.n_frames
    np.testing.assert_array_equal(read.episode(2).action, source.episode(2).action)
    assert read.meta(0).task == "Push the T onto the target"
    imported = import_dataset(exported, tmp_path / "imported.zarr")
    assert main(["export", "lerobot", str(imported), str(tmp_path / "v30"), "--vcodec", "h264"]) == 0
    dataset = LeRobotDataset("iws/round_trip", root=tmp_path / "v30")
    assert dataset.num_episodes == 3
    np.testing.assert_array_equal(dataset[len(dataset) - 1]["action"].numpy(), source.episode(2).action[-1])


def test_parallel_writers_write_the_same_dataset(exported, tiny_pusht_store_module, tmp_path) -> None:
    two = export_lerobot_v21(tiny_pusht_store_module.path, tmp_path / "two", workers=2)
    for name in ("info.json", "episodes.jsonl", "tasks.jsonl", "episodes_stats.jsonl", "stats.json"):
        assert (two / "meta" / name).read_text() == (exported / "meta" / name).read_text(), name
    for i in range(3):
        path = f"data/chunk-000/episode_{i:06d}.parquet"
        assert pq.read_table(two / path).equals(pq.read_table(exported / path))


def test_bad_input_is_refused(exported, tiny_pusht_store_module, tmp_path, monkeypatch, capsys) -> None:
    with pytest.raises(SpecError, match="already exists"):
        export_lerobot_v21(tiny_pusht_store_module.path, exported)
    with pytest.raises(SpecError, match="--vcodec"):
        export_lerobot_v21(tiny_pusht_store_module.path, tmp_path / "x", vcodec="mjpeg")
    assert not (tmp_path / "x").exists()
    assert main(["export", "lerobot", str(tiny_pusht_store_module.path), str(tmp_path / "y"), "--groot"]) == 2
    assert "--codebase v2.1" in capsys.readouterr().err
    damaged = tmp_path / "damaged"
    import shutil

    shutil.copytree(exported, damaged)
    (damaged / "meta/episodes_stats.jsonl").write_text("")
    monkeypatch.setenv("IWS_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(SpecError, match="converter cannot read"):
        open_dataset(damaged)
    assert (damaged / "meta/info.json").is_file() and is_v21(damaged)  # the source is untouched


def test_groot_modality_and_openpi_norm_stats(tiny_pusht_store_module, tmp_path) -> None:
    from tests.fixtures.lerobot_v21 import check_groot_contract

    dest = tmp_path / "groot"
    assert main(["export", "lerobot", str(tiny_pusht_store_module.path), str(dest), "--codebase", "v2.1",
                 "--groot"]) == 0
    modality = check_groot_contract(dest)
    assert modality["state"] == {"agent": {"start": 0, "end": 2, "original_key": "observation.state",
                                           "dtype": "float32", "absolute": True}}
    assert modality["action"]["agent"]["original_key"] == "action"
    assert modality["video"] == {"top": {"original_key": "observation.images.top"}}
    assert json.loads((dest / "meta/info.json").read_text())["robot_type"] == "new_embodiment"
    norm = json.loads((dest / "meta/openpi/norm_stats.json").read_text())["norm_stats"]
    actions = np.concatenate([tiny_pusht_store_module.episode(i).action for i in range(3)])
    np.testing.assert_allclose(norm["actions"]["mean"], actions.mean(0), rtol=1e-6)
    np.testing.assert_allclose(norm["actions"]["q99"], np.quantile(actions.astype(np.float64), 0.99, axis=0))
    assert set(norm) == {"state", "actions"}


def test_body_groups() -> None:
    from sim_model.data.formats.groot import body_groups

    assert body_groups(("pusher0_x", "pusher0_y", "pusher1_x", "pusher1_y"), 4, "state") == {
        "pusher0": (0, 2), "pusher1": (2, 4)}
    assert body_groups(("x0", "y0", "x1", "y1"), 4, "action") == {"action": (0, 4)}
    assert body_groups(("a_x", "b_x", "a_y"), 3, "state") == {"state": (0, 3)}  # a comes back
    assert body_groups((), 2, "state") == {"state": (0, 2)}
