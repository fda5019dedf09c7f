"""Initial frames from image files, Zarr episode stores and LeRobot datasets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pipeline.pusht.features import pusht_features
from schemas import SpecError
from schemas.job import InitSpec, ReplaySource
from workers.actions import make_action_source
from workers.init_frames import list_init_refs, load_init, parse_ref

FEATURES = pusht_features(resolution=32)


def test_image_refs_load_as_one_camera_batches(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 255, (32, 32, 3), dtype=np.uint8) for _ in range(2)]
    for i, image in enumerate(images):
        Image.fromarray(image).save(tmp_path / f"{i}.png")
    refs = list_init_refs(InitSpec(images=[str(tmp_path / "*.png")]), FEATURES)
    assert refs == [str(tmp_path / "0.png"), str(tmp_path / "1.png")] and parse_ref(refs[0]) is None
    frames, state = load_init(refs[::-1], FEATURES)
    assert frames.shape == (2, 1, 32, 32, 3) and state is None
    np.testing.assert_array_equal(frames[0, 0], images[1])


def test_two_camera_models_need_a_dataset(tmp_path: Path, two_camera_features) -> None:
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(tmp_path / "a.png")
    with pytest.raises(SpecError, match="single-camera models"):
        list_init_refs(InitSpec(images=[str(tmp_path / "a.png")]), two_camera_features)


def test_zarr_refs_give_frames_and_state(tiny_pusht_store) -> None:
    refs = list_init_refs(InitSpec(dataset=tiny_pusht_store.path, episodes=[2, 0], frame=3), FEATURES)
    assert refs == [f"{tiny_pusht_store.path}#2:3", f"{tiny_pusht_store.path}#0:3"]
    frames, state = load_init(refs, FEATURES)
    expected = tiny_pusht_store.window(2, 3, 4)
    np.testing.assert_array_equal(frames[0, 0], expected["top"][0])
    np.testing.assert_array_equal(state[0], expected["state"][0])


def test_lerobot_dataset_as_init_and_replay_source(tmp_path: Path, tiny_pusht_store) -> None:
    """A real LeRobot v3.0 dataset (written by sim_model.data.formats) starts rollouts and feeds replays."""
    from sim_model.data.formats.lerobot_writer import export_lerobot

    root = export_lerobot(tiny_pusht_store.path, tmp_path / "lerobot", repo_id="iws/tiny", task="push")
    refs = list_init_refs(InitSpec(dataset=str(root), frame=1), FEATURES)
    assert refs == [f"{root}#{e}:1" for e in range(3)]
    frames, state = load_init(refs, FEATURES)
    for e in range(3):
        expected = tiny_pusht_store.window(e, 1, 2)
        assert frames.shape == (3, 1, 32, 32, 3)
        # Video is lossy: compare on average, exact for the low-dim state.
        assert np.abs(frames[e, 0].astype(int) - expected["top"][0]).mean() < 12
        np.testing.assert_allclose(state[e], expected["state"][0])
    replay = make_action_source(ReplaySource(path=str(root)), FEATURES)
    start, stop = tiny_pusht_store.episode_range(1)
    np.testing.assert_allclose(replay.streams.stream(1), tiny_pusht_store.window(1, 0, stop - start)["action"])
