"""Both exports of real sweep play (`iws collect sweep`: cameras top and side, 4-D action and
state, a (80, 2) disc-centre extra), read back by each ecosystem's own reader.

Pixel tolerance of the LeRobot videos (AV1, crf 30, yuv420p) on these 96 x 96 frames: mean
|error| ~2-3 grey levels, PSNR ~33 dB; asserted mean |error| <= 6 and PSNR >= 27 dB per frame,
and each decoded view must be far closer to its own camera than to the other one.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from pipeline.cli import main
from pipeline.sweep.features import sweep_features
from sim_model.data.formats import open_dataset
from sim_model.data.formats.lerobot_reader import video_backend
from sim_model.data.formats.lerobot_writer import export_lerobot
from sim_model.data.store import EpisodeStore

EPISODES, STEPS = 3, 12
CAMERAS = ("top", "side")
REPO = "iws/sweep_tiny"


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float(10 * np.log10(255**2 / max(mse, 1e-12)))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> EpisodeStore:
    out = tmp_path_factory.mktemp("sweep") / "play.zarr"
    assert main(["collect", "sweep", "--episodes", str(EPISODES), "--steps", str(STEPS),
                 "--workers", "1", "--seed", "3", "--out", str(out), "--no-progress"]) == 0
    return EpisodeStore.open(out)


@pytest.fixture(scope="module")
def lerobot_export(store: EpisodeStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("lerobot") / "sweep"
    assert main(["export", "lerobot", str(store.path), str(dest), "--repo-id", REPO]) == 0
    return dest


def test_lerobot_export_holds_both_cameras_and_the_4d_action(store, lerobot_export):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset(REPO, root=lerobot_export, video_backend=video_backend())
    assert ds.num_episodes == EPISODES and ds.num_frames == len(ds) == EPISODES * STEPS
    assert ds.meta.video_keys == [f"observation.images.{c}" for c in CAMERAS]
    for camera in CAMERAS:
        assert ds.features[f"observation.images.{camera}"]["shape"] == (96, 96, 3)
    assert ds.features["action"]["shape"] == (4,)
    assert ds.features["action"]["names"] == ["x0", "y0", "x1", "y1"]
    assert ds.features["observation.state"]["shape"] == (4,)
    assert ds.features["particles"]["shape"] == (80, 2)
    episodes = [store.episode(i) for i in range(EPISODES)]
    for idx in range(len(ds)):
        item = ds[idx]
        e, t = int(item["episode_index"]), int(item["frame_index"])
        assert idx == e * STEPS + t
        np.testing.assert_array_equal(item["action"].numpy(), episodes[e].action[t])
        np.testing.assert_array_equal(item["observation.state"].numpy(), episodes[e].state[t])
        np.testing.assert_array_equal(item["particles"].numpy(), episodes[e].extras["particles"][t])
        for camera, other in (CAMERAS, CAMERAS[::-1]):
            pixels = (item[f"observation.images.{camera}"].permute(1, 2, 0).numpy() * 255).round()
            own, theirs = episodes[e].frames[camera][t], episodes[e].frames[other][t]
            error = np.abs(pixels - own).mean()
            assert error <= 6 and psnr(pixels, own) >= 27, (idx, camera, error)
            assert psnr(pixels, theirs) < psnr(pixels, own) - 10, (idx, camera)


def test_lerobot_export_metadata_and_stats(store, lerobot_export):
    info = json.loads((lerobot_export / "meta/info.json").read_text())
    assert (info["total_episodes"], info["total_frames"]) == (EPISODES, EPISODES * STEPS)
    stats = json.loads((lerobot_export / "meta/stats.json").read_text())
    for camera in CAMERAS:
        pixels = np.concatenate([store.episode(i).frames[camera].reshape(-1, 3)
                                 for i in range(EPISODES)]) / 255.0
        key = f"observation.images.{camera}"
        np.testing.assert_allclose(np.ravel(stats[key]["mean"]), pixels.mean(axis=0), rtol=1e-9)
        np.testing.assert_allclose(np.ravel(stats[key]["std"]), pixels.std(axis=0), rtol=1e-9)
    assert np.shape(stats["action"]["mean"]) == np.shape(stats["observation.state"]["std"]) == (4,)
    # one stat per coordinate of the disc centres, as lerobot lays out a (80, 2) feature
    centres = np.concatenate([store.episode(i).extras["particles"] for i in range(EPISODES)])
    np.testing.assert_allclose(stats["particles"]["max"], centres.reshape(-1, 2).max(axis=0))


def test_parallel_writers_fall_back_to_one_for_the_disc_centres(store, lerobot_export, tmp_path,
                                                                caplog):
    """lerobot 0.4.4's aggregate_datasets fails on a (80, 2) feature; the export writes one root."""
    with caplog.at_level(logging.WARNING):
        dest = export_lerobot(store, tmp_path / "two", repo_id=REPO, workers=2)
    assert "one writer instead of 2" in caplog.text and "particles" in caplog.text
    one = json.loads((lerobot_export / "meta/stats.json").read_text())
    assert json.loads((dest / "meta/stats.json").read_text()) == one


def test_iws_reads_the_lerobot_export_back_with_both_cameras(store, lerobot_export):
    back = open_dataset(lerobot_export)
    assert back.features.camera_names == CAMERAS
    assert (back.features.action_dim, back.features.state_dim) == (4, 4)
    episode, original = back.episode(2), store.episode(2)
    np.testing.assert_array_equal(episode.action, original.action)
    for camera in CAMERAS:
        assert psnr(episode.frames[camera], original.frames[camera]) >= 27


def test_zarr_dp_export_keeps_both_cameras_under_their_names(store, tmp_path, capsys):
    import zarr

    dest = tmp_path / "sweep_dp.zarr"
    assert main(["export", "zarr-dp", str(store.path), str(dest)]) == 0
    assert "arrays under data/: top, side, action, state" in capsys.readouterr().out
    root = zarr.open_group(str(dest), mode="r", zarr_format=2)  # what DP's zarr 2.x opens
    n = EPISODES * STEPS
    assert root["meta/episode_ends"][:].tolist() == [STEPS * (i + 1) for i in range(EPISODES)]
    expected = {"top": (n, 96, 96, 3), "side": (n, 96, 96, 3), "action": (n, 4), "state": (n, 4),
                "particles": (n, 80, 2)}
    for key, shape in expected.items():
        assert root[f"data/{key}"].shape == shape, key
    assert root["data/top"].chunks == (1, 96, 96, 3)  # one frame per chunk, as DP reads images
    for camera in CAMERAS:
        whole = np.concatenate([store.episode(i).frames[camera] for i in range(EPISODES)])
        np.testing.assert_array_equal(root[f"data/{camera}"][:], whole)
    back = open_dataset(dest)
    assert back.features == sweep_features(96)
    assert back.episode(1).checksum() == store.episode(1).checksum()


def test_lerobot_v21_export_of_real_sweep_play(store, tmp_path):
    """Both cameras and the (80, 2) disc centres through lerobot's own v2.1 -> v3.0 converter;
    frames within codec error of the play's."""
    from tests.fixtures.lerobot_v21 import check_converts_and_loads

    dest = tmp_path / "v21"
    assert main(["export", "lerobot", str(store.path), str(dest), "--codebase", "v2.1"]) == 0
    info = json.loads((dest / "meta" / "info.json").read_text())
    assert info["total_videos"] == EPISODES * len(CAMERAS) and info["codebase_version"] == "v2.1"
    check_converts_and_loads(store, dest, tmp_path)
    back = open_dataset(dest)  # iws reads v2.1 too: the disc centres come back in their shape
    assert back.features.extras == store.features.extras
    np.testing.assert_array_equal(back.episode(1).extras["particles"], store.episode(1).extras["particles"])
