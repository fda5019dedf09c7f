"""The mug table in MuJoCo (pipeline.mug.env): a firm grasp lifts and holds the mug, a weak one
lets it slip, a push of the handle turns it, the same start and actions give the same table and
frames, and a missing MuJoCo names the extra to install."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from pipeline.mug.env import CAMERAS, HELD_HEIGHT, MugSim
from pipeline.mug.primitives import PRIMITIVES
from schemas import SpecError


def _play(sim: MugSim, kind: str, seed: int) -> list:
    state = sim.reset(seed)
    states = [state]
    for action in PRIMITIVES[kind](state, np.random.default_rng(seed + 100)):
        states.append(sim.step(action))
    return states


@pytest.fixture(scope="module")
def sim():
    with MugSim(resolution=32) as one:
        yield one


def test_a_firm_grasp_holds_and_a_weak_one_slips(sim: MugSim) -> None:
    for seed in (0, 1):
        states = _play(sim, "grasp", seed)
        assert sim.held() and states[-1].mug_pos[2] > 0.05  # lifted and carried
        states = _play(sim, "weak", seed)
        assert not sim.held() and states[-1].mug_pos[2] < HELD_HEIGHT  # slid out, back on the table
        assert states[-1].hand[2] > 0.08 and states[-1].mug_tilt < 0.3  # the hand rose without it


def test_pushing_the_handle_turns_the_mug(sim: MugSim) -> None:
    states = _play(sim, "nudge", 3)
    turn = np.angle(np.exp(1j * (states[-1].mug_yaw - states[0].mug_yaw)))
    assert abs(turn) > 0.3 and states[-1].mug_tilt < 0.3  # turned, still upright
    assert np.linalg.norm(states[-1].mug_pos[:2] - states[0].mug_pos[:2]) < 0.05


def test_the_same_start_and_actions_give_the_same_table_and_frames(sim: MugSim) -> None:
    runs = []
    for _ in range(2):
        states = _play(sim, "offcentre", 5)
        runs.append((np.stack([np.r_[s.hand, s.width, s.mug_pos, s.mug_quat] for s in states]), sim.render()))
    assert np.array_equal(runs[0][0], runs[1][0])
    frames = runs[0][1]
    assert list(frames) == list(CAMERAS)
    for name in CAMERAS:
        assert frames[name].shape == (32, 32, 3) and frames[name].dtype == np.uint8
        assert np.array_equal(frames[name], runs[1][1][name])
    assert not np.array_equal(frames["front"], frames["wrist"])  # three views, not one repeated


def test_reset_to_a_state_restores_it(sim: MugSim) -> None:
    start = sim.reset(7)
    again = sim.reset_to(start)
    assert np.allclose(again.mug_pos, start.mug_pos) and np.allclose(again.mug_quat, start.mug_quat)
    assert np.allclose(again.hand, start.hand) and again.width == pytest.approx(start.width)


def test_without_mujoco_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mujoco", None)
    with pytest.raises(SpecError, match=r"pip install 'iws\[mug\]'"):
        MugSim()
