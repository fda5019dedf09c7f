"""Scripted play on the rope table: what `iws collect rope` records. Each primitive is planned
from the true state when it begins and returns effector targets for the coming steps.

    route   through the clip: approach a point before the gap on the rope's side, then pull the
            held end straight through the gap and on, so the rope threads between the posts
    swing   past the clip: the same approach and pull, but beside a post (outside the gap), so
            the rope swings around the clip without entering it
    graze   close to a post, at the edge of the gap: threads or not depending on the rope
    roam    random waypoints anywhere on the table, at a random speed
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pipeline.rope.env import ACTION_HIGH, ACTION_LOW, GAP, POST_RADIUS, State

Segment = list[np.ndarray]  # targets (2,) for consecutive steps


def line(start: np.ndarray, end: np.ndarray, speed: float) -> Segment:
    """Targets from `start` to `end` at `speed` canvas units per step (the end included)."""
    steps = max(1, int(np.ceil(np.linalg.norm(end - start) / speed)))
    return [np.clip(start + (end - start) * (i / steps), ACTION_LOW, ACTION_HIGH) for i in range(1, steps + 1)]


def _axes(state: State) -> tuple[np.ndarray, np.ndarray]:
    """The clip's gap axis (post to post) and its normal pointing from the rope's side."""
    axis = np.array([np.cos(state.clip_angle), np.sin(state.clip_angle)])
    normal = np.array([-axis[1], axis[0]])
    if np.dot(np.mean(state.rope, axis=0) - state.clip, normal) > 0:
        normal = -normal
    return axis, normal


def _through(state: State, rng: np.random.Generator, offset: float) -> Segment:
    """Approach before the clip at `offset` along its axis, pull through to the far side, hold."""
    axis, normal = _axes(state)
    before = state.clip - rng.uniform(60, 110) * normal + offset * axis
    after = state.clip + rng.uniform(70, 130) * normal + offset * axis + rng.uniform(-20, 20) * axis
    speed = rng.uniform(6, 14)
    path = line(state.effector, before, rng.uniform(10, 18))
    path += line(before, after, speed)
    return path + [path[-1]] * int(rng.integers(3, 10))


def route(state: State, rng: np.random.Generator) -> Segment:
    return _through(state, rng, rng.uniform(-0.25, 0.25) * GAP)


def swing(state: State, rng: np.random.Generator) -> Segment:
    side = rng.choice([-1.0, 1.0])
    return _through(state, rng, side * (GAP / 2 + 2 * POST_RADIUS + rng.uniform(25, 70)))


def graze(state: State, rng: np.random.Generator) -> Segment:
    side = rng.choice([-1.0, 1.0])
    return _through(state, rng, side * (GAP / 2 + rng.uniform(0, 2 * POST_RADIUS)))


def roam(state: State, rng: np.random.Generator) -> Segment:
    path: Segment = []
    here = state.effector
    for _ in range(int(rng.integers(2, 5))):
        there = rng.uniform(ACTION_LOW + 20, ACTION_HIGH - 20, 2)
        path += line(here, there, rng.uniform(5, 16))
        here = there
    return path


PRIMITIVES: dict[str, Callable[[State, np.random.Generator], Segment]] = {
    "route": route, "swing": swing, "graze": graze, "roam": roam}
