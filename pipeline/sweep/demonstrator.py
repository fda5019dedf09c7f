"""A scripted sweeper that sees only pixels: the role of the paper's human teleoperator.

Each time it needs a plan it reads the discs from the `top` frame (pipeline.sweep.vision) and
the pushers from the state (or, without one, from the frame), then plans one broom sweep
(pipeline.sweep.broom): approach behind the outside discs whose swath toward the goal carries
most of them, push them in, back off, and look again. Once the discs it sees are DONE_FRACTION
in the goal it holds still, looking again now and then. It is closed loop on simulator and
world-model frames alike.

A batched policy in the shape the generation job's policy source and `iws eval policy` load:

    iws eval policy --policy pipeline.sweep.demonstrator:SweepDemonstrator --ground-truth sweep ...
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pipeline.sweep.broom import approach, choose_sweep, outside_goal, push
from pipeline.sweep.env import WORKSPACE
from pipeline.sweep.vision import in_goal_pixel_fraction, particle_mask, pusher_positions
from schemas import EpisodeSpec, FeatureSpec, SpecError
from workers.actions.base import Observation, episode_rng

DONE_FRACTION = 0.97  # seen in-goal pixel fraction at which it stops sweeping
HALF_WIDTH = 23.0  # a broom 76 units wide, its gap (16) narrower than a disc (18)
APPROACH_SPEED, PUSH_SPEED = 16.0, 9.0  # canvas units per step
CANDIDATES = 40  # outside disc pixels tried as sweep starts
RECHECK_STEPS = 10


@dataclass
class _Row:
    """One episode's plan: targets (4,) queued for the coming steps."""

    rng: np.random.Generator
    queue: deque[np.ndarray] = field(default_factory=deque)


def disc_points(frame: np.ndarray) -> np.ndarray:
    """Canvas positions (K, 2) of the particle pixels of a `top` frame."""
    ys, xs = np.nonzero(particle_mask(frame, "top"))
    return (np.column_stack([xs, ys]) + 0.5) * (WORKSPACE / np.array([frame.shape[1], frame.shape[0]]))


class SweepDemonstrator:
    """Batched closed-loop sweeper: `reset(episodes, observation)`, then
    `actions(step, observation) -> (B, 4)` pusher targets in canvas units (see module doc)."""

    def __init__(self, features: FeatureSpec) -> None:
        if features.action_dim != 4:
            raise SpecError(f"the sweep demonstrator drives two pushers (4-D targets); this "
                            f"model's action_dim is {features.action_dim}.")
        if "top" not in features.camera_names:
            raise SpecError(f"the sweep demonstrator reads camera 'top'; this model has "
                            f"{list(features.camera_names)}.")
        self.camera = features.camera_names.index("top")
        self.use_state = features.state_dim == 4
        self.rows: list[_Row] = []

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        self.rows = [_Row(rng=episode_rng(spec, "sweep-demonstrator")) for spec in episodes]

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        if len(self.rows) != len(observation):
            raise SpecError(f"SweepDemonstrator was reset for {len(self.rows)} episodes but is "
                            f"asked for {len(observation)}; call reset() with the batch first.")
        out = np.empty((len(observation), 4), np.float32)
        for r, row in enumerate(self.rows):
            frame = observation.frames[r, self.camera]
            pushers = self._pushers(observation, r, frame)
            if not row.queue:
                self._plan(row, pushers, frame)
            out[r] = row.queue.popleft()
        return out

    def describe(self, row: int) -> str:
        return "policy:sweep-demonstrator"

    def _pushers(self, observation: Observation, r: int, frame: np.ndarray) -> np.ndarray:
        if self.use_state and observation.state is not None:
            return np.asarray(observation.state[r], np.float64).reshape(2, 2)
        seen = pusher_positions(frame)
        return seen if seen is not None else np.array([[100.0, 100.0], [100.0, 140.0]])

    def _plan(self, row: _Row, pushers: np.ndarray, frame: np.ndarray) -> None:
        fraction, mass = in_goal_pixel_fraction(frame, "top")
        outside = outside_goal(disc_points(frame))
        if not mass or fraction >= DONE_FRACTION or not len(outside):
            row.queue.extend([pushers.reshape(4)] * RECHECK_STEPS)
            return
        picks = row.rng.choice(len(outside), size=min(len(outside), CANDIDATES), replace=False)
        sweep = choose_sweep(outside, outside[picks], HALF_WIDTH)
        row.queue.extend(approach(pushers, sweep, disc_points(frame), APPROACH_SPEED, HALF_WIDTH))
        row.queue.extend(push(sweep, PUSH_SPEED, HALF_WIDTH))
