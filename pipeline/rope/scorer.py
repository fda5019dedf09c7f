"""The rope score from pixels alone (`rope_inserted`): is the rope through the clip at the end?

A frame scores 1 when rope pixels lie on the line between the clip's posts (pipeline.rope.vision),
else up to 0.5 for a rope near the gap; the simulator's own score (`truth_score`) reads the same
from the rope's points. benchmarks/results/scorer_rope.md measures how the two agree.

An episode scores its last frame, not its best: a rope threaded and pulled out again did not do
the task. It succeeds when the last frame is through the clip.
"""

from __future__ import annotations

import numpy as np

from pipeline.rope.env import GAP, State
from pipeline.rope.vision import NEAR, classify, frame_score, post_centres, rope_mask
from pipeline.tasks.plausibility import conserved, probe_steps
from sim_model.data.episode import Episode
from workers.scoring import TaskScore


def truth_score(state: State) -> float:
    """The simulator's score of a state, on the scale of `frame_score`."""
    if state.inserted:
        return 1.0
    distance = float(np.linalg.norm(np.asarray(state.rope) - state.clip, axis=1).min())
    return 0.5 * max(0.0, 1.0 - max(distance - GAP / 2, 0.0) / NEAR)


def score_episode(episode: Episode) -> TaskScore:
    """The `rope_inserted` scorer: the last top frame's score; success when it is through."""
    if "top" not in episode.frames:
        raise ValueError(f"the rope scorer reads camera 'top'; the episode has {sorted(episode.frames)}")
    score = frame_score(episode.frames["top"][-1])
    return TaskScore(score, score >= 1.0)


def plausibility(episode: Episode) -> dict[str, float]:
    """Rope's plausibility check (pipeline/tasks/plausibility.py): the rope's length kept, as
    `conserved` rope pixels of the top view at each probed frame against the start frame's (a
    rope that melts, stretches or splits changes its area), 0 where the clip's two posts are not
    found; 'plausibility' is the worst probe, 'rope' the mean kept length, 'clip_visible' the
    share of probes showing the clip."""
    if "top" not in episode.frames:
        raise ValueError(f"the rope check reads camera 'top'; the episode has {sorted(episode.frames)}")
    frames = episode.frames["top"]
    steps = probe_steps(len(frames))
    kept = conserved(np.array([rope_mask(frames[t]).sum() for t in steps]), float(rope_mask(frames[0]).sum()))
    clip = np.array([post_centres(classify(frames[t])) is not None for t in steps], dtype=np.float64)
    return {"plausibility": float(np.min(kept * clip)), "rope": float(kept.mean()),
            "clip_visible": float(clip.mean())}
