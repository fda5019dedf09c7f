"""The mug score from pixels alone (`mug_held`): is the mug lifted and held at the end?

A frame's reading is the mug's centre triangulated from the two fixed views
(pipeline.mug.vision.locate); the frame scores how far the mug is lifted off the table, 0 when
it stands there and 1 from LIFTED above it. The simulator's own score (`truth_score`) reads the
same from the mug's true height. benchmarks/results/scorer_mug.md measures how the two agree,
and how the pixel verdict (lifted) agrees with the simulator's `held`.

An episode scores its last frame: a mug lifted and dropped again was not held. It succeeds when
the last frame shows the mug off the table by more than HELD_HEIGHT.
"""

from __future__ import annotations

import numpy as np

from pipeline.mug.env import HELD_HEIGHT, MUG_HEIGHT, State
from pipeline.mug.vision import locate
from sim_model.data.episode import Episode
from workers.scoring import TaskScore

LIFTED = 0.1  # metres off the table that score 1
STANDING = MUG_HEIGHT / 2  # the centre's height of a mug standing on the table


def lift_score(lift: float) -> float:
    return float(np.clip(lift / LIFTED, 0.0, 1.0))


def truth_score(state: State) -> float:
    """The simulator's score of a state, on the scale of `frame_score`."""
    return lift_score(float(state.mug_pos[2]))


def frame_lift(front: np.ndarray, side: np.ndarray) -> float | None:
    """How far the mug's centre is above where it stands on the table (metres), from pixels;
    None when a fixed view does not show the mug."""
    found = locate(front, side)
    return None if found is None else float(found[0][2] - STANDING)


def frame_score(front: np.ndarray, side: np.ndarray) -> float:
    lift = frame_lift(front, side)
    return 0.0 if lift is None else lift_score(lift)


def score_episode(episode: Episode) -> TaskScore:
    """The `mug_held` scorer: the last frame's lift score; success when it is off the table."""
    missing = {"front", "side"} - set(episode.frames)
    if missing:
        raise ValueError(f"the mug scorer reads cameras 'front' and 'side'; the episode has "
                         f"{sorted(episode.frames)}")
    lift = frame_lift(episode.frames["front"][-1], episode.frames["side"][-1])
    if lift is None:
        return TaskScore(0.0, False)
    return TaskScore(lift_score(lift), lift > HELD_HEIGHT)
