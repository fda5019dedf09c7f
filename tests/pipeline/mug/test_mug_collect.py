"""Collecting mug play (pipeline.mug.collect): every camera in each step, byte-identical for any
number of worker processes, and resumable."""

from __future__ import annotations

import numpy as np

from pipeline.mug.collect import CollectConfig, collect, open_output
from pipeline.mug.env import CAMERAS


def test_collection_has_three_cameras_is_the_same_for_any_workers_and_resumes(tmp_path):
    config = CollectConfig(episodes=3, steps=10, seed=4, resolution=24, mix={"grasp": 1, "nudge": 1})
    one = open_output(config, str(tmp_path / "one.zarr"))
    collect(config, one, workers=1)
    two = open_output(config, str(tmp_path / "two.zarr"))
    collect(config, two, workers=2)
    short = CollectConfig(episodes=2, steps=10, seed=4, resolution=24, mix={"grasp": 1, "nudge": 1})
    part = open_output(short, str(tmp_path / "part.zarr"))
    collect(short, part)
    stats = collect(config, open_output(config, str(tmp_path / "part.zarr"), resume=True))
    assert stats.episodes == 1 and stats.steps == 9
    resumed = open_output(config, str(tmp_path / "part.zarr"), resume=True)
    assert [camera.name for camera in one.features.cameras] == list(CAMERAS)
    for i in range(3):
        a, b, c = one.episode(i), two.episode(i), resumed.episode(i)
        for camera in CAMERAS:
            assert a.frames[camera].shape == (10, 24, 24, 3)
            assert np.array_equal(a.frames[camera], b.frames[camera])
            assert np.array_equal(a.frames[camera], c.frames[camera])
        for key in ("mug_pose", "held"):
            assert np.array_equal(a.extras[key], b.extras[key]) and np.array_equal(a.extras[key], c.extras[key])
        assert np.array_equal(a.action, c.action) and a.state.shape == (10, 4) and a.action.shape == (10, 4)
