"""A scripted mug picker that sees only pixels: the role of the paper's human teleoperator.

Each time it needs a plan it locates the mug from the `front` and `side` frames
(pipeline.mug.vision.locate: the two views' rays through the mug meet at its centre) and reads
the gripper from the state, then plans the `grasp` primitive (pipeline.mug.primitives) on that
reading: above the mug, down, close firmly, lift and carry. Once it sees the mug lifted it holds
still, looking again every RECHECK_STEPS steps; a plan that ends with the mug on the table is
planned again (opening the gripper first). Closed loop on simulator and world-model frames alike:

    iws eval policy --policy pipeline.mug.demonstrator:MugDemonstrator ...
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pipeline.mug.env import FINGER_TRAVEL, HELD_HEIGHT, State
from pipeline.mug.primitives import grasp
from pipeline.mug.scorer import STANDING
from pipeline.mug.vision import locate
from schemas import EpisodeSpec, FeatureSpec, SpecError
from workers.actions.base import Observation, episode_rng

RECHECK_STEPS = 10


@dataclass
class _Row:
    rng: np.random.Generator
    queue: deque[np.ndarray] = field(default_factory=deque)
    last: np.ndarray | None = None  # the target last sent: holding keeps its grip


def seen_state(front: np.ndarray, side: np.ndarray, gripper: np.ndarray) -> State | None:
    """The table as the fixed views show it (the mug upright where its centre is seen) and the
    gripper as the state says ([x, y, z, width]); None when a view does not show the mug."""
    found = locate(front, side)
    if found is None:
        return None
    centre = found[0]
    return State(hand=np.asarray(gripper[:3], np.float64), width=float(gripper[3]),
                 mug_pos=np.array([centre[0], centre[1], max(centre[2] - STANDING, 0.0)]),
                 mug_quat=np.array([1.0, 0.0, 0.0, 0.0]))


class MugDemonstrator:
    """Batched closed-loop picker: `reset(episodes, observation)`, then
    `actions(step, observation) -> (B, 4)` gripper targets [x, y, z, grip] (see module doc)."""

    def __init__(self, features: FeatureSpec) -> None:
        if features.action_dim != 4 or features.state_dim != 4:
            raise SpecError("the mug demonstrator drives one gripper ([x, y, z, grip] targets) and "
                            "reads it from the state ([x, y, z, width]); this model has action_dim "
                            f"{features.action_dim}, state_dim {features.state_dim}.")
        missing = [name for name in ("front", "side") if name not in features.camera_names]
        if missing:
            raise SpecError(f"the mug demonstrator reads cameras 'front' and 'side'; this model has "
                            f"{list(features.camera_names)}.")
        self.cameras = [features.camera_names.index(name) for name in ("front", "side")]
        self.rows: list[_Row] = []

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        self.rows = [_Row(rng=episode_rng(spec, "mug-demonstrator")) for spec in episodes]

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        if len(self.rows) != len(observation) or observation.state is None:
            raise SpecError(f"MugDemonstrator was reset for {len(self.rows)} episodes but is asked "
                            f"for {len(observation)} (or without a state); call reset() with the batch.")
        out = np.empty((len(observation), 4), np.float32)
        for r, row in enumerate(self.rows):
            front, side = (observation.frames[r, camera] for camera in self.cameras)
            gripper = np.asarray(observation.state[r], np.float64)
            if not row.queue:
                self._plan(row, front, side, gripper)
            row.last = row.queue.popleft()
            out[r] = row.last
        return out

    def describe(self, row: int) -> str:
        return "mug demonstrator (grasp from pixels)"

    def _plan(self, row: _Row, front: np.ndarray, side: np.ndarray, gripper: np.ndarray) -> None:
        # The grip last commanded, not the fingers' opening: a held mug stops the fingers short.
        closure = float(row.last[3]) if row.last is not None else 1.0 - gripper[3] / (2 * FINGER_TRAVEL)
        hold = np.r_[gripper[:3], closure] if row.last is None else row.last.copy()
        seen = seen_state(front, side, gripper)
        if seen is None or seen.mug_pos[2] > HELD_HEIGHT:
            row.queue.extend([hold] * RECHECK_STEPS)  # lifted (or nothing to act on): hold
            return
        if closure > 0.1:  # let go of whatever it holds before going for the mug again
            row.queue.extend(np.r_[gripper[:3], c] for c in np.linspace(closure, 0.0, 4))
            seen.width = 2 * FINGER_TRAVEL
        row.queue.extend(grasp(seen, row.rng))
