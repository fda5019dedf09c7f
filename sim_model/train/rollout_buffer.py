"""Training windows that keep rolling on the dynamics' own predictions (`rollout_buffer`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from sim_model.train.data import DataView


class RolloutBuffer:
    """Windows that keep rolling on the model's own predictions across training steps.

    Each entry is a window of `length` consecutive frames of one training episode: its frame
    indices, and latents `src` that start as the real ones. Drawn into a batch, its context is
    `src` (generated) and its targets are the real next frames, so the model learns to pull a
    drifted rollout back to the truth. Afterwards it advances one frame: the model predicts the
    frame after the window from `src` (as inference does) and the window slides onto it. An entry
    restarts from real frames at the end of its episode or after `max_depth` generated frames.
    Not saved in checkpoints: a resumed run refills it from real frames."""

    def __init__(self, view: DataView, size: int, length: int, max_depth: int,
                 latents: Callable[[np.ndarray], torch.Tensor], rng: np.random.Generator) -> None:
        self.view, self.length, self.max_depth, self.latents = view, length, max_depth, latents
        self.idx = view.window_indices(rng, size, length)  # (N, L) global frame indices
        self.src = latents(self.idx)  # (N, L, V, C, h, w)
        self.depth = np.zeros(size, np.int64)  # generated frames each entry has rolled

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Which entries (n, distinct) go into this step's batch."""
        return rng.choice(len(self.idx), size=min(n, len(self.idx)), replace=False)

    def advance(self, rows: np.ndarray, predict: Callable[[torch.Tensor, np.ndarray], torch.Tensor],
                rng: np.random.Generator) -> None:
        """Slide entries `rows` one frame onto the model's prediction `predict(src, idx)` -> (n,
        V, C, h, w) of the frame after each window; restart those that end their episode or
        reach max_depth."""
        ends = self.view.data.ends
        stop = ends[np.searchsorted(ends, self.idx[rows, 0], side="right")]  # their episodes' ends
        moving = rows[(self.idx[rows, -1] + 1 < stop) & (self.depth[rows] < self.max_depth)]
        if len(moving):
            with torch.no_grad():
                new = predict(self.src[moving], self.idx[moving]).to(self.src.dtype)
            self.src[moving] = torch.cat([self.src[moving, 1:], new[:, None]], 1)
            self.idx[moving] += 1
            self.depth[moving] += 1
        restart = np.setdiff1d(rows, moving)
        if len(restart):
            self.idx[restart] = self.view.window_indices(rng, len(restart), self.length)
            self.src[restart] = self.latents(self.idx[restart])
            self.depth[restart] = 0

