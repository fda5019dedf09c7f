"""Scripted action source: seeded parametric motions in action space.

Each episode's whole path is planned at reset from its own seed (open loop), in unit
coordinates u in [0, 1]^A that map to `low + u * (high - low)`. Motions other than the random
walk are polylines followed at constant speed, which keeps each family a few lines:
  waypoints  - random points visited in turn
  push       - approach behind a random contact point, then push straight through it
  sweep      - a zig-zag raster over a random patch (wiping / sweeping)
Each family repeats (a new push, a new raster) until the episode's horizon.
  random_walk- smoothed random velocity, reflected at the border
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from schemas import EpisodeSpec, FeatureSpec
from schemas.job import ScriptedSource
from workers.actions.base import ActionBounds, Observation, episode_rng

MOTIONS = ("random_walk", "waypoints", "push", "sweep")
_MARGIN = 0.05  # keep scripted targets off the very edge of the range


def follow_path(start: np.ndarray, points: Sequence[np.ndarray], speed: float, steps: int) -> np.ndarray:
    """Positions (steps, A) moving from `start` through `points` at `speed` per step, then holding."""
    path = [np.asarray(start, np.float64)]
    pos = path[0]
    for target in points:
        distance = float(np.linalg.norm(target - pos))
        n = max(int(np.ceil(distance / speed)), 1)
        for k in range(1, n + 1):
            path.append(pos + (target - pos) * (k / n))
        pos = np.asarray(target, np.float64)
        if len(path) >= steps:
            break
    out = np.array(path[:steps])
    if len(out) < steps:
        out = np.concatenate([out, np.repeat(out[-1:], steps - len(out), axis=0)])
    return out


def _unit(rng: np.random.Generator, dim: int) -> np.ndarray:
    v = rng.normal(size=dim)
    return v / max(float(np.linalg.norm(v)), 1e-9)


def _orthogonal(rng: np.random.Generator, d: np.ndarray) -> np.ndarray:
    v = _unit(rng, len(d))
    v = v - d * float(v @ d)
    norm = np.linalg.norm(v)
    return v / norm if norm > 1e-6 else d


def plan_random_walk(rng: np.random.Generator, start: np.ndarray, speed: float, steps: int) -> np.ndarray:
    pos, vel = start.astype(np.float64), np.zeros_like(start, dtype=np.float64)
    out = np.empty((steps, len(start)))
    for t in range(steps):
        out[t] = pos
        vel = 0.85 * vel + 0.15 * rng.normal(scale=2 * speed, size=len(start))
        vel = np.clip(vel, -2 * speed, 2 * speed)
        pos = pos + vel
        low, high = _MARGIN, 1 - _MARGIN
        flip = (pos < low) | (pos > high)
        pos = np.where(pos < low, 2 * low - pos, np.where(pos > high, 2 * high - pos, pos))
        vel = np.where(flip, -vel, vel)
    return out


def random_walk_actions(features: FeatureSpec, steps: int, speed: float, seed: int,
                        start: np.ndarray | None) -> np.ndarray:
    """(steps, A) float32: a seeded smooth random walk within the FeatureSpec's action range,
    starting at `start` (raw units, e.g. the agent's position) or the middle of the range: the
    action stream of `iws eval stability`."""
    bounds = ActionBounds.from_features(features, purpose="the stability action stream")
    unit = np.full(features.action_dim, 0.5)
    if start is not None and len(start) == features.action_dim:
        unit = np.clip((np.asarray(start) - bounds.low) / bounds.span, 0.05, 0.95)
    path = plan_random_walk(np.random.default_rng(seed), unit, speed, steps)  # unit coordinates
    return bounds.clip(bounds.low + path * bounds.span)


def _segment(motion: str, rng: np.random.Generator, dim: int, cfg: ScriptedSource) -> list[np.ndarray]:
    """Unit-coordinate waypoints of one instance of `motion` (a push, a raster, a visit round)."""
    if motion == "waypoints":
        return [rng.uniform(0.1, 0.9, size=dim) for _ in range(cfg.waypoints)]
    if motion == "push":
        contact, d = rng.uniform(0.3, 0.7, size=dim), _unit(rng, dim)
        length = rng.uniform(0.15, 0.35)
        return [contact - 0.12 * d, contact + length * d]
    if motion == "sweep":
        centre, d = rng.uniform(0.3, 0.7, size=dim), _unit(rng, dim)
        across, width, rows = _orthogonal(rng, d), rng.uniform(0.2, 0.5), int(rng.integers(3, 7))
        offsets = np.linspace(-0.5, 0.5, rows) * rng.uniform(0.15, 0.4)
        points = []
        for r, off in enumerate(offsets):
            ends = [centre + off * across - 0.5 * width * d, centre + off * across + 0.5 * width * d]
            points.extend(ends if r % 2 == 0 else ends[::-1])
        return points
    raise ValueError(f"unknown motion {motion!r}; known: {MOTIONS}")


def plan_motion(motion: str, rng: np.random.Generator, start: np.ndarray, cfg: ScriptedSource,
                steps: int) -> np.ndarray:
    """Unit-coordinate path (steps, A) of one episode. Instances of the motion are chained until
    the horizon: a push that ends early is followed by the next push, so an episode does not
    idle on one repeated action for most of its steps."""
    dim = len(start)
    if motion == "random_walk":
        return plan_random_walk(rng, start, cfg.speed, steps)
    points: list[np.ndarray] = []
    planned, pos = 0, np.asarray(start, np.float64)
    while planned < steps:
        for point in _segment(motion, rng, dim, cfg):
            point = np.clip(point, _MARGIN, 1 - _MARGIN)
            planned += max(int(np.ceil(np.linalg.norm(point - pos) / cfg.speed)), 1)
            points.append(point)
            pos = point
    return follow_path(start, points, cfg.speed, steps)


class ScriptedActions:
    """Open-loop parametric motions; see the module docstring."""

    def __init__(self, cfg: ScriptedSource, features: FeatureSpec) -> None:
        self.cfg = cfg
        self.features = features
        self.bounds = ActionBounds.from_features(features, purpose="the scripted action source")
        self._plans = np.zeros((0, 0, features.action_dim), np.float32)
        self._motions: list[str] = []

    def _start(self, rng: np.random.Generator, state: np.ndarray | None) -> np.ndarray:
        dim = self.features.action_dim
        mode: str = self.cfg.start
        if mode == "auto":
            mode = "state" if state is not None and state.shape[-1] == dim else "center"
        if mode == "state":
            assert state is not None
            return np.clip((np.asarray(state) - self.bounds.low) / self.bounds.span, 0.0, 1.0)
        if mode == "random":
            return rng.uniform(0.1, 0.9, size=dim)
        return np.full(dim, 0.5)

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        plans, self._motions = [], []
        for row, spec in enumerate(episodes):
            rng = episode_rng(spec, "scripted")
            motion = self.cfg.motion if self.cfg.motion != "mix" else MOTIONS[int(rng.integers(len(MOTIONS)))]
            state = None if observation.state is None else observation.state[row]
            unit = plan_motion(motion, rng, self._start(rng, state), self.cfg, spec.horizon)
            plans.append(self.bounds.clip(self.bounds.low + unit * self.bounds.span))
            self._motions.append(motion)
        self._plans = np.stack(plans) if plans else self._plans  # (B, T, A)

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        return self._plans[:, step]

    def describe(self, row: int) -> str:
        return f"scripted:{self._motions[row]}"
