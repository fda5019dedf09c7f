"""A scripted rope router that sees only pixels: the role of the paper's human teleoperator.

Each time it needs a plan it reads the clip's posts and the rope from the `top` frame
(pipeline.rope.vision) and the effector from the state, then plans the `route` primitive
(pipeline.rope.primitives) on that reading: approach before the gap on the rope's side, pull the
held end through and on. Once it sees the rope through the clip it holds still, looking again
every RECHECK_STEPS steps; a plan that ends with the rope outside is planned again. Closed loop
on simulator and world-model frames alike:

    iws eval policy --policy pipeline.rope.demonstrator:RopeDemonstrator --ground-truth rope ...
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pipeline.rope.env import State
from pipeline.rope.primitives import route
from pipeline.rope.vision import ROPE_CLASS, _canvas, classify, gap_reading, post_centres
from schemas import EpisodeSpec, FeatureSpec, SpecError
from workers.actions.base import Observation, episode_rng

RECHECK_STEPS = 10


@dataclass
class _Row:
    rng: np.random.Generator
    queue: deque[np.ndarray] = field(default_factory=deque)


def seen_state(frame: np.ndarray, effector: np.ndarray) -> State | None:
    """The table as the `top` frame shows it (clip from the posts, rope from its pixels), or None
    when the clip or the rope cannot be seen."""
    classes = classify(frame)
    centres = post_centres(classes)
    ys, xs = np.nonzero(classes == ROPE_CLASS)
    if centres is None or not len(xs):
        return None
    axis = centres[1] - centres[0]
    return State(effector=np.asarray(effector, np.float64), rope=_canvas(ys, xs, classes.shape),
                 clip=centres.mean(axis=0), clip_angle=float(np.arctan2(axis[1], axis[0])))


class RopeDemonstrator:
    """Batched closed-loop router: `reset(episodes, observation)`, then
    `actions(step, observation) -> (B, 2)` effector targets in canvas units (see module doc)."""

    def __init__(self, features: FeatureSpec) -> None:
        if features.action_dim != 2 or features.state_dim != 2:
            raise SpecError("the rope demonstrator drives one effector (2-D targets) and reads its "
                            f"position from the state; this model has action_dim {features.action_dim}, "
                            f"state_dim {features.state_dim}.")
        if "top" not in features.camera_names:
            raise SpecError(f"the rope demonstrator reads camera 'top'; this model has "
                            f"{list(features.camera_names)}.")
        self.camera = features.camera_names.index("top")
        self.rows: list[_Row] = []

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        self.rows = [_Row(rng=episode_rng(spec, "rope-demonstrator")) for spec in episodes]

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        if len(self.rows) != len(observation) or observation.state is None:
            raise SpecError(f"RopeDemonstrator was reset for {len(self.rows)} episodes but is asked "
                            f"for {len(observation)} (or without a state); call reset() with the batch.")
        out = np.empty((len(observation), 2), np.float32)
        for r, row in enumerate(self.rows):
            frame = observation.frames[r, self.camera]
            effector = np.asarray(observation.state[r], np.float64)
            if not row.queue:
                self._plan(row, frame, effector)
            out[r] = row.queue.popleft()
        return out

    def describe(self, row: int) -> str:
        return "rope demonstrator (route from pixels)"

    def _plan(self, row: _Row, frame: np.ndarray, effector: np.ndarray) -> None:
        through, _ = gap_reading(frame)
        seen = seen_state(frame, effector)
        if through or seen is None:
            row.queue.extend([effector] * RECHECK_STEPS)  # done (or nothing to act on): hold
            return
        row.queue.extend(route(seen, row.rng))
