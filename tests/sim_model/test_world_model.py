"""WorldModel inference API: shapes, determinism, per-row seeds, input errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from schemas.errors import SpecError
from sim_model.world_model import RolloutResult, StepResult, WorldModel


def _frames(batch: int, views: int | None, size: int = 32, seed: int = 0) -> np.ndarray:
    shape = (batch, size, size, 3) if views is None else (batch, views, size, size, 3)
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _actions(batch: int, steps: int | None = None, seed: int = 0) -> np.ndarray:
    shape = (batch, 2) if steps is None else (batch, steps, 2)
    return np.random.default_rng(seed).uniform(0, 512, shape).astype(np.float32)


@pytest.fixture(scope="module")
def tiny_model(tiny_checkpoint) -> WorldModel:
    return WorldModel.load(tiny_checkpoint)


def test_one_camera_shapes(tiny_model: WorldModel) -> None:
    tiny_model.reset(_frames(3, None), seeds=[0, 1, 2])
    res = tiny_model.step(_actions(3))
    assert isinstance(res, StepResult)
    assert res.frames.shape == (3, 32, 32, 3) and res.frames.dtype == np.uint8
    assert res.state is not None and res.state.shape == (3, 2) and res.state.dtype == np.float32
    tiny_model.reset(_frames(2, 1))  # explicit V axis is kept
    assert tiny_model.step(_actions(2)).frames.shape == (2, 1, 32, 32, 3)
    out = tiny_model.rollout(_frames(2, None), _actions(2, 5), seeds=[0, 1])
    assert isinstance(out, RolloutResult)
    assert out.frames.shape == (2, 5, 1, 32, 32, 3) and out.frames.dtype == np.uint8
    assert out.state is not None and out.state.shape == (2, 5, 2)
    assert np.isfinite(out.state).all()


def test_two_camera_shapes(two_camera_features) -> None:
    wm = WorldModel.random(two_camera_features, preset="tiny", seed=1)
    assert wm.net.views == 2
    wm.reset(_frames(2, 2), seeds=[5, 6])
    res = wm.step(_actions(2))
    assert res.frames.shape == (2, 2, 32, 32, 3) and res.frames.dtype == np.uint8
    out = wm.rollout(_frames(2, 2), _actions(2, 3))
    assert out.frames.shape == (2, 3, 2, 32, 32, 3)
    latents = wm.encode(_frames(2, 2))
    assert latents.shape == (2, 2, 4, 8, 8)
    torch.testing.assert_close(latents.norm(dim=2), torch.ones(2, 2, 8, 8), atol=1e-3, rtol=0)


def test_history_reset_fills_context(tiny_model: WorldModel) -> None:
    history = np.stack([_frames(2, None, seed=i) for i in range(3)], axis=1)  # (B, T0, H, W, 3)
    tiny_model.reset(history, actions=_actions(2, 2), seeds=[0, 1])
    assert tiny_model._window.count == 2
    assert tiny_model.step(_actions(2)).frames.shape == (2, 32, 32, 3)


def test_same_seed_same_output(tiny_model: WorldModel) -> None:
    a = tiny_model.rollout(_frames(2, None), _actions(2, 4), seeds=[3, 4])
    b = tiny_model.rollout(_frames(2, None), _actions(2, 4), seeds=[3, 4])
    np.testing.assert_array_equal(a.frames, b.frames)
    np.testing.assert_array_equal(a.state, b.state)
    c = tiny_model.rollout(_frames(2, None), _actions(2, 4), seeds=[30, 40])
    assert not np.array_equal(a.frames, c.frames)


def test_row_independent_of_batch(tiny_model: WorldModel) -> None:
    frames, actions = _frames(3, None), _actions(3, 4)
    batch = tiny_model.rollout(frames, actions, seeds=[7, 8, 9])
    alone = tiny_model.rollout(frames[1:2], actions[1:2], seeds=[8])
    diff = np.abs(batch.frames[1].astype(int) - alone.frames[0].astype(int))
    assert diff.mean() < 1.0 and np.percentile(diff, 99) <= 4  # only kernel-level rounding differs


def test_checkpoint_roundtrip_identical(tiny_model: WorldModel, tmp_path) -> None:
    path = tiny_model.save(tmp_path / "copy")
    again = WorldModel.load(path)
    assert again.checkpoint_hash == tiny_model.checkpoint_hash
    a = tiny_model.rollout(_frames(2, None), _actions(2, 3), seeds=[1, 2])
    b = again.rollout(_frames(2, None), _actions(2, 3), seeds=[1, 2])
    np.testing.assert_array_equal(a.frames, b.frames)
    assert WorldModel.random(tiny_model.features, seed=1).checkpoint_hash != tiny_model.checkpoint_hash


@pytest.mark.parametrize("bad, message", [
    (lambda m: m.step(_actions(1)), "reset"),
])
def test_step_before_reset(tiny_features, bad, message) -> None:
    with pytest.raises(RuntimeError, match=message):
        bad(WorldModel.random(tiny_features))


def test_input_errors(tiny_model: WorldModel) -> None:
    with pytest.raises(SpecError, match="uint8"):
        tiny_model.reset(_frames(1, None).astype(np.float32))
    with pytest.raises(SpecError, match="H=32"):
        tiny_model.reset(_frames(1, None, size=16))
    with pytest.raises(SpecError, match="one seed per row"):
        tiny_model.reset(_frames(2, None), seeds=[1])
    tiny_model.reset(_frames(2, None))
    with pytest.raises(SpecError, match=r"expected \(2, 2\)"):
        tiny_model.step(_actions(3))
    with pytest.raises(SpecError, match="NaN"):
        tiny_model.step(np.full((2, 2), np.nan, np.float32))
    with pytest.raises(SpecError, match=r"\(B, T, A\)"):
        tiny_model.rollout(_frames(2, None), _actions(2))
