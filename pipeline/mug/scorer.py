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
from pipeline.tasks.plausibility import probe_steps
from sim_model.data.episode import Episode
from workers.scoring import TaskScore

LIFTED = 0.1  # metres off the table that score 1
# Metres between the two views' rays through the mug: real frames stay within VIEWS_AGREE (19 mm
# at most over 594 frames of play, fingers hiding part of a held mug); VIEWS_APART disagrees.
VIEWS_AGREE, VIEWS_APART = 0.02, 0.06
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


def plausibility(episode: Episode) -> dict[str, float]:
    """Mug's plausibility check (pipeline/tasks/plausibility.py), the cross-view reading: at each
    probed frame the front and side views must show one mug at one place, so the rays through
    their mug centroids pass close (1 within VIEWS_AGREE, 0 from VIEWS_APART), 0 where either view does
    not show it; 'plausibility' is the worst probe, 'views_agree' the mean, 'mug_visible' the
    share of probes showing the mug in both views. A model whose views drift apart, or that loses
    the mug, scores low."""
    missing = {"front", "side"} - set(episode.frames)
    if missing:
        raise ValueError(f"the mug check reads cameras 'front' and 'side'; the episode has "
                         f"{sorted(episode.frames)}")
    agree = []
    for t in probe_steps(len(episode.frames["front"])):
        found = locate(episode.frames["front"][t], episode.frames["side"][t])
        agree.append(0.0 if found is None else
                     float(np.clip((VIEWS_APART - found[1]) / (VIEWS_APART - VIEWS_AGREE), 0.0, 1.0)))
    visible = [value > 0 for value in agree]
    return {"plausibility": float(np.min(agree)), "views_agree": float(np.mean(agree)),
            "mug_visible": float(np.mean(visible))}
