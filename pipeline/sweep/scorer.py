"""The sweep score from pixels alone: the share of the pile inside the goal, from the top view.

A frame's score is the fraction of its particle pixels (pipeline.sweep.vision) that lie inside
the goal square; the simulator's own score counts disc centres instead (env.in_goal_fraction).
benchmarks/results/scorer_sweep.md measures how well the two agree.

An episode scores its last frame, not its best: sweeping is undone as easily as done, and a
pile swept in and then scattered again did not do the task. It succeeds at SUCCESS_FRACTION.
A last frame that has lost more than half the particle pixels of the first scores 0: the pile's
mass is conserved in the simulator, so a frame where it vanished (a world model erasing the
discs) must not be credited with the few that remain inside the goal.
"""

from __future__ import annotations

import numpy as np

from pipeline.sweep.env import SUCCESS_FRACTION
from pipeline.sweep.vision import in_goal_pixel_fraction
from pipeline.tasks.plausibility import conserved, probe_steps
from sim_model.data.episode import Episode
from workers.scoring import TaskScore

MIN_MASS = 0.5  # the last frame's particle pixels, at least this share of the first frame's


def frame_in_goal(frame: np.ndarray) -> float:
    """The in-goal fraction seen in one `top` frame (H, W, 3) uint8."""
    return in_goal_pixel_fraction(frame, "top")[0]


def score_episode(episode: Episode) -> TaskScore:
    """The `sweep_in_goal` scorer: the last top frame's in-goal pixel fraction (0 when the pile
    lost mass, see module doc); success at SUCCESS_FRACTION."""
    if "top" not in episode.frames:
        raise ValueError(f"the sweep scorer reads camera 'top'; the episode has {sorted(episode.frames)}")
    frames = episode.frames["top"]
    fraction, mass = in_goal_pixel_fraction(frames[-1], "top")
    _, start_mass = in_goal_pixel_fraction(frames[0], "top")
    if mass < MIN_MASS * start_mass:
        fraction = 0.0
    return TaskScore(fraction, fraction >= SUCCESS_FRACTION)


def plausibility(episode: Episode) -> dict[str, float]:
    """Sweep's plausibility check (pipeline/tasks/plausibility.py): the pile's mass kept, as
    `conserved` particle pixels of the top view at each probed frame against the start frame's
    (discs are neither lost nor made); 'plausibility' is the worst, 'mass' their mean."""
    if "top" not in episode.frames:
        raise ValueError(f"the sweep check reads camera 'top'; the episode has {sorted(episode.frames)}")
    frames = episode.frames["top"]
    start = in_goal_pixel_fraction(frames[0], "top")[1]
    kept = conserved(np.array([in_goal_pixel_fraction(frames[t], "top")[1]
                               for t in probe_steps(len(frames))]), start)
    return {"plausibility": float(kept.min()), "mass": float(kept.mean())}
