"""Stage 2: latent dynamics on windows of frames, autoencoder frozen.

Every frame of a window after the first is a target predicted from the frames before it, all
in one parallel pass (see nn/temporal.py). Context latents get light noise; from
`feedback_start` on, a share of batches replaces the context by the model's own one-step
samples, so it learns to continue from what it generates rather than from perfect latents.
With a rollout buffer (`rollout_buffer`), part of each fed-back batch comes from windows that
keep rolling on the model's own predictions across steps, so the context it learns to correct
from has drifted as far as at inference (tens to hundreds of frames), not `feedback_depth`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from schemas.errors import SpecError
from sim_model.config import DynamicsConfig
from sim_model.nn.dynamics import next_latent, previous
from sim_model.nn.sampler import noisy
from sim_model.nn.world import WorldModelNet, to_images
from sim_model.normalize import Normalizer
from sim_model.train.common import (
    decoder_times,
    foreground_cells,
    median_background,
    psnr,
    save_grid,
)
from sim_model.train.config import StageConfig
from sim_model.train.data import DataView, TrainingData
from sim_model.train.frames import StreamedFrames
from sim_model.train.loop import Logs, StageTask
from sim_model.train.state import TrainRNG

if TYPE_CHECKING:
    from sim_model.world_model import WorldModel


def target_offsets(length: int, device: torch.device) -> torch.Tensor:
    """(length-1, length-1): steps from context frame j = 0..L-2 to target frame i = 1..L-1.
    The window's last frame is no one's context, so it never goes through the context pass."""
    i = torch.arange(1, length, device=device)[:, None]
    return i - torch.arange(length - 1, device=device)[None]


def sample_next(net: WorldModelNet, src: torch.Tensor, a: torch.Tensor, rng: TrainRNG,
                dyn: DynamicsConfig) -> torch.Tensor:
    """The model's own samples of frames 1..L-1 given context src (B, L, V, C, h, w) -> (B, L-1, ...)."""
    b, length = src.shape[:2]
    ctx = net.dynamics.encode_context(src[:, :-1], a[:, :-1], src.new_zeros(b, length - 1))
    z_prev = src[:, :-1]
    return next_latent(net.dynamics, dyn.head, dyn.sample_steps, z_prev, previous(z_prev), a[:, :-1],
                       ctx, target_offsets(length, src.device),
                       lambda: rng.randn(*z_prev.shape, device=src.device))


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


def dynamics_task(net: WorldModelNet, train: DataView, val: DataView, cfg: StageConfig,
                  norm: Normalizer, device: torch.device, *, window: int, dyn: DynamicsConfig,
                  seed: int, make_world_model: Callable[[], WorldModel]) -> StageTask:
    data = train.data
    latents = LatentCache(net, data, device, median_background(data) if cfg.object_weight else None)

    def windows(idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        a = norm.action(torch.from_numpy(data.actions[idx]).to(device))  # (B, L, A)
        fg = latents.foreground(idx) if cfg.object_weight else None  # (B, L, V, 1, h, w)
        return latents(idx), a, fg  # (B, L, V, C, h, w)

    buffer = (RolloutBuffer(train, cfg.rollout_buffer, window, cfg.rollout_depth, latents,
                            np.random.default_rng(seed + 3)) if cfg.rollout_buffer else None)

    def next_frame(src: torch.Tensor, idx: np.ndarray, rng: TrainRNG) -> torch.Tensor:
        """The model's sample of the frame after each window src (B, L, ...) -> (B, V, C, h, w):
        the window shifted by one, its last frame a placeholder no prediction sees (causal)."""
        shifted = torch.cat([src[:, 1:], src[:, -1:]], 1)
        a = norm.action(torch.from_numpy(data.actions[idx + 1]).to(device))
        return sample_next(net, shifted.to(device), a, rng, dyn)[:, -1].float().cpu()

    def losses(z: torch.Tensor, a: torch.Tensor, fg: torch.Tensor | None, rng: TrainRNG,
               feedback_depth: int, weighted: bool = True, rolled: torch.Tensor | None = None
               ) -> torch.Tensor:
        """`rolled` (R, L, ...): generated contexts of the batch's last R windows (RolloutBuffer),
        used instead of fed-back passes for those rows."""
        b, length = z.shape[:2]
        fresh = b - (0 if rolled is None else len(rolled))
        src = z[:fresh]
        if feedback_depth:
            # Each pass re-predicts every frame from the previous pass's frames, so after k passes
            # frame i has been generated up to k steps deep from real context.
            with torch.no_grad():
                for _ in range(feedback_depth if fresh else 0):
                    src = torch.cat([z[:fresh, :1], sample_next(net, src, a[:fresh], rng, dyn)], 1)
            # Autocast caches its bf16 copies of the weights, also those made under no_grad;
            # reused below they would cut every gradient to the dynamics (torch 2.10).
            torch.clear_autocast_cache()
        if rolled is not None:
            src = torch.cat([src, rolled.to(device=device, dtype=src.dtype)], 0)
        z_prev = src[:, :-1]
        levels = rng.rand(b, length - 1, device=device) * dyn.context_noise_train
        corrupted = F.normalize(noisy(z_prev, rng.randn(*z_prev.shape, device=device), levels), dim=-3)
        ctx = net.dynamics.encode_context(corrupted, a[:, :-1], levels)
        offsets = target_offsets(length, device)
        if dyn.head == "regression":
            ones = torch.ones(b, length - 1, device=device)
            pred = net.dynamics.predict(torch.zeros_like(z_prev), ones, z_prev, a[:, :-1], ctx, offsets,
                                        previous(z_prev))
            pred = F.normalize(pred.float(), dim=-3)
        else:
            t = decoder_times(b * (length - 1), rng, device).reshape(b, length - 1)
            x_t = noisy(z[:, 1:], rng.randn(*z[:, 1:].shape, device=device), t)
            pred = net.dynamics.predict(x_t, t, z_prev, a[:, :-1], ctx, offsets, previous(z_prev)).float()
        error = (pred - z[:, 1:]).pow(2)  # (B, L-1, V, C, h, w)
        if not weighted or (cfg.motion_weight == 0 and fg is None):
            return error.mean()
        # Moving things (the agent, a pushed block) fill a few latent pixels; weight each latent
        # pixel by how much it changes so they are not drowned by the static background, and
        # (object_weight) every cell an object covers or just left, moving or not.
        change = (z[:, 1:] - z[:, :-1]).norm(dim=3, keepdim=True)  # in [0, 2]
        weight = 1 + cfg.motion_weight * change
        if fg is not None:
            weight = weight + cfg.object_weight * torch.maximum(fg[:, 1:], fg[:, :-1])
        return (error * weight).mean() / weight.mean()

    def loss(step: int, progress: float, rng: TrainRNG) -> tuple[torch.Tensor, Logs]:
        idx = train.window_indices(rng.numpy, cfg.batch_size, window)
        # Streamed frames: start reading those the next step will encode. (The rollout buffer
        # draws from numpy later in the step, so the next step's windows are not known then.)
        if isinstance(data.frames, StreamedFrames) and buffer is None:
            coming = train.window_indices(rng.next_numpy(), cfg.batch_size, window)
            data.frames.prefetch(latents.uncached(coming))
        # By progress, not by step: a time-limited run reaches its fed-back phase too.
        feedback = (progress >= cfg.feedback_start
                    and float(rng.rand(1, device=torch.device("cpu"))) < cfg.feedback_prob)
        rows = (buffer.draw(rng.numpy, round(cfg.batch_size * cfg.rollout_share))
                if buffer is not None and feedback else np.zeros(0, np.int64))
        if len(rows):
            assert buffer is not None
            idx = np.concatenate([idx[: cfg.batch_size - len(rows)], buffer.idx[rows]])
        z, a, fg = windows(idx)
        rolled = buffer.src[rows] if buffer is not None and len(rows) else None
        value = losses(z, a, fg, rng, cfg.feedback_depth if feedback else 0, rolled=rolled)
        logs = {"feedback": float(feedback)}
        if buffer is not None and len(rows):
            logs["rollout_depth"] = float(buffer.depth[rows].mean())
            buffer.advance(rows, lambda src, at: next_frame(src, at, rng), rng.numpy)
            torch.clear_autocast_cache()
        return value, logs

    val_idx = val.window_indices(np.random.default_rng(seed + 1), cfg.val_batches * cfg.batch_size, window)

    def validate() -> Logs:
        rng = TrainRNG.seeded(seed + 2)
        total = repeat = 0.0
        for chunk in np.array_split(val_idx, cfg.val_batches):
            z, a, fg = windows(chunk)
            total += losses(z, a, fg, rng, feedback_depth=0, weighted=False).item() / cfg.val_batches
            repeat += F.mse_loss(z[:, :-1], z[:, 1:]).item() / cfg.val_batches
        return {"val_loss": total, "val_loss_repeat": repeat,
                **horizon1(make_world_model(), data, val_idx[: cfg.batch_size])}

    def samples(path: Path) -> None:
        write_rollout_samples(make_world_model(), data, val_idx[:4], path)

    return StageTask("dynamics", list(net.dynamics.parameters()), loss, validate, samples)


def horizon1(wm: WorldModel, data: TrainingData, idx: np.ndarray) -> Logs:
    """PSNR of the next frame of windows idx (B, L) through the real inference path (history
    reset + one step), against repeating the last real frame."""
    frames = data.frames[torch.from_numpy(idx)]  # (B, L, V, H, W, 3)
    wm.reset(frames[:, :-1], actions=data.actions[idx[:, :-2]], seeds=list(range(len(idx))))
    pred = torch.from_numpy(wm.step(data.actions[idx[:, -2]]).frames)
    truth, last = to_images(frames[:, -1]), to_images(frames[:, -2])
    return {"val_h1_psnr": psnr(to_images(pred), truth), "val_h1_psnr_repeat": psnr(last, truth)}


def write_rollout_samples(wm: WorldModel, data: TrainingData, idx: np.ndarray, path: Path) -> None:
    """Open-loop rollouts from the first frame of windows idx: real and predicted rows."""
    frames = data.frames[torch.from_numpy(idx)]
    out = wm.rollout(frames[:, 0], data.actions[idx[:, :-1]], seeds=list(range(len(idx))))
    rows = []
    for i in range(len(idx)):
        rows += [to_images(frames[i, 1:]), to_images(torch.from_numpy(out.frames[i]))]
    save_grid(rows, path)
