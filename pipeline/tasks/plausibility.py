"""What every task's plausibility check shares: which frames it probes and how it reads them.

A plausibility check scores one generated episode by the task's own object checks, on its
frames alone (no ground truth): does the T stay a rigid T, does the pile keep its mass, does the
rope keep its length. It returns named values in [0, 1], one of them 'plausibility', the
headline a job's `filter.plausibility` thresholds: the worst probed frame's (an episode is as
plausible as its worst moment; 1: every probed frame looks like the task's real frames). The
first frame is the recorded start, so the probes skip it.
"""

from __future__ import annotations

import numpy as np

from sim_model.data.episode import Episode

PROBES = 10  # frames probed per episode, evenly spaced after the start frame


def probe_steps(length: int, probes: int = PROBES) -> np.ndarray:
    """Steps probed in an episode of `length` frames: up to `probes`, evenly from step 1 to the
    last (step 0 when the episode has only its start)."""
    if length <= 1:
        return np.zeros(1, dtype=np.int64)
    return np.unique(np.linspace(1, length - 1, min(probes, length - 1)).round().astype(np.int64))


def first_camera(episode: Episode) -> np.ndarray:
    """(T, H, W, 3) frames of the episode's first camera."""
    return next(iter(episode.frames.values()))


def conserved(values: np.ndarray, reference: float) -> np.ndarray:
    """How well each value keeps `reference` (a quantity that should not change, e.g. a pile's
    pixel count): min(v / ref, ref / v) in [0, 1]; 0 when one side is empty and the other not."""
    values = np.asarray(values, dtype=np.float64)
    if reference <= 0:
        return (values <= 0).astype(np.float64)
    ratio = values / reference
    with np.errstate(divide="ignore"):
        return np.where(ratio > 0, np.minimum(ratio, 1.0 / np.maximum(ratio, 1e-12)), 0.0)
