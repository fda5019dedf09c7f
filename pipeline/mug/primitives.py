"""Scripted play on the mug table: each primitive is planned from the true state when it begins
and returns the gripper's targets `[x, y, z, grip]` for the coming steps. Together they cover the
outcomes the regime is about:

    grasp     above the mug, down, close firmly, lift and carry: grasped and lifted
    weak      the same with a weak closure: the mug slides out of the fingers as it rises
    offcentre the same firm closure a few centimetres beside the mug's axis: it tips or slips
    nudge     the closed gripper pushes the handle sideways: the mug turns about its axis
    roam      random waypoints and closures anywhere over the table
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pipeline.mug.env import ACTION_HIGH, ACTION_LOW, HANDLE_REACH, MUG_RADIUS, State

Segment = list[np.ndarray]  # targets (4,) for consecutive steps
OPEN, FIRM = 0.0, (0.8, 1.0)
WEAK = (0.3, 0.37)  # the fingers touch the mug but squeeze less than its weight needs


def line(start: np.ndarray, end: np.ndarray, speed: float) -> Segment:
    """Targets from `start` to `end` (4,), the position at `speed` metres per step, the grip
    moving with it (the end included)."""
    steps = max(1, int(np.ceil(np.linalg.norm(end[:3] - start[:3]) / speed)))
    return [np.clip(start + (end - start) * (i / steps), ACTION_LOW, ACTION_HIGH) for i in range(1, steps + 1)]


def hold(target: np.ndarray, steps: int) -> Segment:
    return [target.copy() for _ in range(steps)]


def _start(state: State) -> np.ndarray:
    return np.r_[state.hand, 1.0 - state.width / 0.1]


def _pick(state: State, rng: np.random.Generator, grip: float, offset: float) -> Segment:
    """Over the mug (offset along y), down, close to `grip`, lift, carry somewhere, hold."""
    speed = rng.uniform(0.012, 0.025)
    at = state.mug_pos[:2] + np.array([0.0, offset])
    low = rng.uniform(0.015, 0.035)
    above = np.r_[at, rng.uniform(0.12, 0.18), OPEN]
    down = np.r_[at, low, OPEN]
    closed = np.r_[at, low, grip]
    lifted = np.r_[at, rng.uniform(0.1, 0.2), grip]
    carried = np.r_[rng.uniform(-0.12, 0.12, 2), lifted[2], grip]
    path = line(_start(state), above, speed) + line(above, down, speed)
    path += hold(closed, int(rng.integers(5, 9)))
    path += line(closed, lifted, speed * rng.uniform(0.5, 1.0))
    path += hold(lifted, int(rng.integers(3, 8)))
    return path + line(lifted, carried, speed) + hold(carried, int(rng.integers(3, 10)))


def grasp(state: State, rng: np.random.Generator) -> Segment:
    return _pick(state, rng, rng.uniform(*FIRM), rng.uniform(-0.004, 0.004))


def weak(state: State, rng: np.random.Generator) -> Segment:
    return _pick(state, rng, rng.uniform(*WEAK), rng.uniform(-0.004, 0.004))


def offcentre(state: State, rng: np.random.Generator) -> Segment:
    return _pick(state, rng, rng.uniform(*FIRM), rng.choice([-1.0, 1.0]) * rng.uniform(0.02, 0.04))


def nudge(state: State, rng: np.random.Generator) -> Segment:
    """Closed fingers beside the handle, pushed across it (perpendicular to the handle), so the
    handle swings and the mug turns."""
    yaw = state.mug_yaw
    radial = np.array([np.cos(yaw), np.sin(yaw)])
    across = np.array([-radial[1], radial[0]]) * rng.choice([-1.0, 1.0])
    handle = state.mug_pos[:2] + (MUG_RADIUS + HANDLE_REACH * rng.uniform(0.5, 0.9)) * radial
    z = rng.uniform(0.03, 0.05)
    before = np.r_[handle - rng.uniform(0.03, 0.05) * across, 0.15, 1.0]
    low = np.r_[before[:2], z, 1.0]
    after = np.r_[handle + rng.uniform(0.03, 0.07) * across, z, 1.0]
    speed = rng.uniform(0.01, 0.02)
    path = line(_start(state), before, 0.02) + line(before, low, 0.02)
    path += line(low, after, speed * rng.uniform(0.4, 0.8))
    return path + line(after, np.r_[after[:2], 0.15, 1.0], 0.02)


def roam(state: State, rng: np.random.Generator) -> Segment:
    path: Segment = []
    here = _start(state)
    for _ in range(int(rng.integers(2, 5))):
        there = np.r_[rng.uniform(-0.15, 0.15, 2), rng.uniform(0.03, 0.2), rng.uniform(0, 1)]
        path += line(here, there, rng.uniform(0.01, 0.03))
        here = there
    return path


PRIMITIVES: dict[str, Callable[[State, np.random.Generator], Segment]] = {
    "grasp": grasp, "weak": weak, "offcentre": offcentre, "nudge": nudge, "roam": roam}
