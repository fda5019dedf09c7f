"""Latents of the frozen encoder for the stages that train on top of it (dynamics, fine-tune)."""

from __future__ import annotations

import math

import numpy as np
import torch

from schemas.errors import SpecError
from sim_model.nn.world import WorldModelNet, to_images
from sim_model.train.data import TrainingData
from sim_model.train.objects import foreground_cells


class LatentCache:
    """Latents of the frozen encoder, each frame encoded the first time a batch draws it
    (the encoder does not change during the dynamics stage and the fine-tune); with a
    `background`, also each frame's foreground cells at latent resolution. Every frame's latent
    stays when the frames are in memory; with streamed frames (`data.cache_bytes`) the table
    holds what fits that budget and the oldest entries make room (encoded again when drawn)."""

    def __init__(self, net: WorldModelNet, data: TrainingData, device: torch.device,
                 background: torch.Tensor | None = None) -> None:
        self.net, self.data, self.device, self.background = net, data, device, background
        n, views = len(data.frames), data.frames.shape[1]
        cells = math.prod(net.latent_shape[1:])  # foreground cells: one channel, kept with a background
        row_bytes = 4 * views * (math.prod(net.latent_shape) + (cells if background is not None else 0))
        self.capacity = n if data.cache_bytes is None else max(1, min(n, data.cache_bytes // row_bytes))
        self.z = torch.zeros(self.capacity, views, *net.latent_shape)
        self.fg = torch.zeros(self.capacity if background is not None else 0, views, 1, *net.latent_shape[1:])
        self.slot = np.full(n, -1, np.int64)  # frame -> row of the table, -1: not encoded
        self.owner = np.full(self.capacity, -1, np.int64)  # row -> frame
        self.next = 0  # rows are (re)used in turn

    def __call__(self, idx: np.ndarray) -> torch.Tensor:
        """Global frame indices (...) -> latents (..., V, C, h, w) on the device."""
        return self._fill(idx, self.z)

    def uncached(self, idx: np.ndarray) -> np.ndarray:
        """The frames of `idx` whose latents are not held: what drawing them would encode."""
        flat = np.ascontiguousarray(idx).reshape(-1)
        return np.unique(flat[self.slot[flat] < 0])

    def foreground(self, idx: np.ndarray) -> torch.Tensor:
        """Global frame indices (...) -> foreground cells (..., V, 1, h, w) in {0, 1}."""
        assert self.background is not None, "foreground cells need a background"
        return self._fill(idx, self.fg)

    def _fill(self, idx: np.ndarray, table: torch.Tensor) -> torch.Tensor:
        flat = np.ascontiguousarray(idx).reshape(-1)
        missing = self.uncached(flat)
        if len(missing):
            held = self.slot[flat]
            rows = self._rows_for(len(missing), keep=set(held[held >= 0].tolist()))
            frames = self.data.frames[torch.from_numpy(missing)]  # read once: latents and cells
            with torch.no_grad():
                z = self.net.encode(to_images(frames.to(self.device)))
            gone = self.owner[rows]
            self.slot[gone[gone >= 0]] = -1
            self.owner[rows], self.slot[missing] = missing, rows
            rows_t = torch.from_numpy(rows)
            self.z[rows_t] = z.float().cpu()
            if self.background is not None:
                self.fg[rows_t] = foreground_cells(frames, self.background, z.shape[-1])
        return table[torch.from_numpy(self.slot[flat])].reshape(*idx.shape, *table.shape[1:]).to(self.device)

    def _rows_for(self, count: int, keep: set[int]) -> np.ndarray:
        """`count` rows of the table, in turn, skipping the rows this batch reads."""
        if count + len(keep) > self.capacity:
            raise SpecError(f"one batch draws {count + len(keep)} frames but the latent cache holds "
                            f"{self.capacity}; raise the cache size (--cache-mb).")
        rows: list[int] = []
        while len(rows) < count:
            if self.next not in keep:
                rows.append(self.next)
            self.next = (self.next + 1) % self.capacity
        return np.array(rows, np.int64)

