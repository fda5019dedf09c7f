"""The contact-heavy generators: `aimed` (held-out) keeps the T in contact, `demo` (training)
pushes it the way the demonstrator does. Real gym-pusht at 16x16."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.pusht.aimed import ALL, HELDOUT, TRAINING
from pipeline.pusht.collect import DEFAULT_MIX, CollectConfig
from pipeline.pusht.env import PushTSim
from pipeline.pusht.primitives import PRIMITIVES, chain, moved_steps, play


@pytest.fixture(scope="module")
def sim() -> PushTSim:
    return PushTSim(16)


def test_aimed_strikes_and_levers_the_block(sim: PushTSim) -> None:
    record = play(sim, "aimed", 80, 5, ALL)
    poses = record.poses()
    assert sum(o is True for o in record.outcomes) >= 2, record.outcomes
    assert moved_steps(poses).mean() > 0.2
    assert np.linalg.norm(poses[-1, :2] - poses[0, :2]) > 20.0


def test_demo_pushes_with_the_planner(sim: PushTSim) -> None:
    record = play(sim, "demo", 60, 5, ALL)
    assert True in record.outcomes, record.outcomes
    assert moved_steps(record.poses()).mean() > 0.05


def test_held_out_generator_is_not_in_any_training_play() -> None:
    # Default collection and the chains of scripted play never draw the held-out generator.
    assert not set(HELDOUT) & set(DEFAULT_MIX)
    assert not set(HELDOUT) & (set(PRIMITIVES) | set(TRAINING))
    assert "aimed" not in chain.__doc__  # chains draw from the basic primitives only
    config = CollectConfig(episodes=50)
    assert {config.primitive(i) for i in range(50)} <= set(DEFAULT_MIX)
    assert CollectConfig(episodes=2, mix={"aimed": 1.0}).primitive(1) == "aimed"
