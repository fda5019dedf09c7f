"""Scripted play in the sweep arena: what `iws collect sweep` records.

An episode is a run of segments, each a primitive drawn from the mix and planned from the
simulator's true state when it begins; the run is cut at the episode's length.

    sweep   the broom (both pushers side by side) pushes a swath of the pile into the goal,
            with a random width, speed and choice among the best starts
    spread  each arm cuts through the pile from a random side, in its own direction
    roam    each arm wanders through random waypoints at its own speed, touching what it meets
    cross   the arms swap sides through a common point, often over the pile, so that they pass
            and hide each other in the side view
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pipeline.sweep.broom import (
    Sweep,
    approach,
    choose_sweep,
    clip,
    line,
    outside_goal,
    push,
)
from pipeline.sweep.env import ACTION_HIGH, ACTION_LOW, State

Segment = list[np.ndarray]  # targets (4,) for consecutive steps


def _pad(paths: list[list[np.ndarray]]) -> Segment:
    """Both arms' paths step by step, the shorter one holding its end."""
    steps = max(len(p) for p in paths)
    paths = [p + [p[-1]] * (steps - len(p)) for p in paths]
    return [np.concatenate([a, b]) for a, b in zip(*paths, strict=True)]


def sweep(state: State, rng: np.random.Generator) -> Segment:
    outside = outside_goal(state.particles)
    points = outside if len(outside) else state.particles
    half_width = rng.uniform(15.0, 30.0)
    picks = rng.choice(len(points), size=min(len(points), 12), replace=False)
    chosen = choose_sweep(outside, points[picks], half_width)
    end = chosen.end + rng.normal(0.0, 15.0, 2)
    chosen = Sweep(chosen.start, clip(end))
    return (approach(state.pushers, chosen, state.particles, rng.uniform(10.0, 18.0), half_width)
            + push(chosen, rng.uniform(6.0, 12.0), half_width))


def spread(state: State, rng: np.random.Generator) -> Segment:
    centre = state.particles[rng.integers(len(state.particles))]
    paths = []
    for arm in range(2):
        angle = rng.uniform(0, 2 * np.pi)
        u = np.array([np.cos(angle), np.sin(angle)])
        reach = rng.uniform(60.0, 120.0)
        entry, exit_ = clip(centre - reach * u), clip(centre + reach * u)
        paths.append(line(state.pushers[arm], entry, rng.uniform(12.0, 20.0))
                     + line(entry, exit_, rng.uniform(6.0, 12.0)))
    return _pad(paths)


def roam(state: State, rng: np.random.Generator) -> Segment:
    paths = []
    for arm in range(2):
        here, path = state.pushers[arm], []
        for _ in range(int(rng.integers(2, 4))):
            there = rng.uniform(ACTION_LOW, ACTION_HIGH, 2)
            path += line(here, there, rng.uniform(5.0, 15.0))
            here = there
        paths.append(path)
    return _pad(paths)


def cross(state: State, rng: np.random.Generator) -> Segment:
    near_pile = rng.random() < 0.7
    point = (state.particles[rng.integers(len(state.particles))] if near_pile
             else rng.uniform(ACTION_LOW + 60, ACTION_HIGH - 60, 2))
    angle = rng.uniform(0, 2 * np.pi)
    u = rng.uniform(50.0, 110.0) * np.array([np.cos(angle), np.sin(angle)])
    offset = rng.uniform(-20.0, 20.0) * np.array([-u[1], u[0]]) / np.linalg.norm(u)
    ends = [(clip(point + u + offset), clip(point - u + offset)),
            (clip(point - u - offset), clip(point + u - offset))]
    speed = rng.uniform(8.0, 14.0)
    approach_paths = _pad([line(state.pushers[arm], ends[arm][0], 15.0) for arm in range(2)])
    return approach_paths + _pad([line(a, b, speed) for a, b in ends])


PRIMITIVES: dict[str, Callable[[State, np.random.Generator], Segment]] = {
    "sweep": sweep, "spread": spread, "roam": roam, "cross": cross}
