"""The pixel-only mug demonstrator (pipeline.mug.demonstrator) picks the mug up in the simulator,
closed loop, from what the front and side cameras show."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.mug.demonstrator import MugDemonstrator
from pipeline.mug.env import CAMERAS, MugSim
from pipeline.mug.features import mug_features
from schemas import EpisodeSpec, SpecError
from workers.actions.base import Observation


def _observe(sims: list[MugSim]) -> Observation:
    frames = np.stack([np.stack([sim.render()[name] for name in CAMERAS]) for sim in sims])
    states = [sim.state() for sim in sims]
    return Observation(frames, np.array([[*s.hand, s.width] for s in states], np.float32))


def test_the_demonstrator_lifts_the_mug_from_pixels() -> None:
    specs = [EpisodeSpec(job_id="t", index=i, episode_id=f"t-{i}", seed=i, init_ref="sim", action_source="demo",
                         horizon=80) for i in range(2)]
    sims = [MugSim(resolution=64) for _ in specs]
    try:
        for sim, spec in zip(sims, specs, strict=True):
            sim.reset(spec.seed + 20)
        policy = MugDemonstrator(mug_features(64))
        policy.reset(specs, _observe(sims))
        for step in range(80):
            actions = policy.actions(step, _observe(sims))
            assert actions.shape == (2, 4) and actions.dtype == np.float32
            for sim, action in zip(sims, actions, strict=True):
                sim.step(action)
        assert all(sim.held() for sim in sims)
    finally:
        for sim in sims:
            sim.close()


def test_a_model_without_the_fixed_views_is_refused() -> None:
    from schemas import CameraSpec

    features = mug_features(32).model_copy(update={"cameras": (CameraSpec(name="wrist", height=32, width=32),)})
    with pytest.raises(SpecError, match="'front' and 'side'"):
        MugDemonstrator(features)
