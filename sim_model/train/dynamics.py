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

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from sim_model.config import DynamicsConfig
from sim_model.nn.dynamics import next_latent, previous
from sim_model.nn.sampler import noisy
from sim_model.nn.world import WorldModelNet, to_images
from sim_model.normalize import Normalizer
from sim_model.train.config import StageConfig
from sim_model.train.data import DataView, TrainingData
from sim_model.train.decoder_loss import decoder_times
from sim_model.train.frames import StreamedFrames
from sim_model.train.images import psnr, save_grid
from sim_model.train.latent_cache import LatentCache
from sim_model.train.objects import median_background
from sim_model.train.rollout_buffer import RolloutBuffer
from sim_model.train.shape_probe import ShapeProbe, fit_probe, shape_loss
from sim_model.train.state import TrainRNG
from sim_model.train.task import Logs, StageTask

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


class Windows(NamedTuple):
    """A batch of training windows: latents z (B, L, V, C, h, w), normalised actions a (B, L, A)
    and, with object_weight, foreground cells fg (B, L, V, 1, h, w)."""

    z: torch.Tensor
    a: torch.Tensor
    fg: torch.Tensor | None


@dataclass
class DynamicsTask:
    """The dynamics stage's loss, validation and samples (`stage()` hands them to the loop)."""

    net: WorldModelNet
    train: DataView
    val: DataView
    cfg: StageConfig
    norm: Normalizer
    device: torch.device
    window: int
    dyn: DynamicsConfig
    seed: int
    make_world_model: Callable[[], WorldModel]

    def __post_init__(self) -> None:
        cfg, data = self.cfg, self.train.data
        background = median_background(data) if cfg.object_weight or cfg.shape_weight else None
        self.latents = LatentCache(self.net, data, self.device, background)
        self.probe: ShapeProbe | None = (fit_probe(self.latents, self.train, np.random.default_rng(self.seed + 4))
                                         if cfg.shape_weight else None)
        self.buffer = (RolloutBuffer(self.train, cfg.rollout_buffer, self.window, cfg.rollout_depth,
                                     self.latents, np.random.default_rng(self.seed + 3))
                       if cfg.rollout_buffer else None)
        self.val_idx = self.val.window_indices(np.random.default_rng(self.seed + 1),
                                               cfg.val_batches * cfg.batch_size, self.window)

    def stage(self) -> StageTask:
        return StageTask("dynamics", list(self.net.dynamics.parameters()), self.step_loss,
                         self.validate, self.samples)

    def windows(self, idx: np.ndarray) -> Windows:
        """Global frame indices (B, L) -> the batch of windows they name."""
        a = self.norm.action(torch.from_numpy(self.train.data.actions[idx]).to(self.device))
        fg = self.latents.foreground(idx) if self.cfg.object_weight else None
        return Windows(self.latents(idx), a, fg)

    def step_loss(self, step: int, progress: float, rng: TrainRNG) -> tuple[torch.Tensor, Logs]:
        """One training step's loss: draw windows (some from the rollout buffer when fed back),
        score the prediction of every target frame, then advance the buffer's windows drawn."""
        cfg, buffer = self.cfg, self.buffer
        idx = self.train.window_indices(rng.numpy, cfg.batch_size, self.window)
        self._prefetch_next(rng)
        # By progress, not by step: a time-limited run reaches its fed-back phase too.
        feedback = (progress >= cfg.feedback_start
                    and float(rng.rand(1, device=torch.device("cpu"))) < cfg.feedback_prob)
        rows = (buffer.draw(rng.numpy, round(cfg.batch_size * cfg.rollout_share))
                if buffer is not None and feedback else np.zeros(0, np.int64))
        rolled = None
        if buffer is not None and len(rows):
            idx = np.concatenate([idx[: cfg.batch_size - len(rows)], buffer.idx[rows]])
            rolled = buffer.src[rows]
        logs = {"feedback": float(feedback)}
        value = self.window_loss(self.windows(idx), rng, cfg.feedback_depth if feedback else 0,
                                 rolled=rolled, logs=logs)
        if buffer is not None and len(rows):
            logs["rollout_depth"] = float(buffer.depth[rows].mean())
            buffer.advance(rows, lambda src, at: self._sample_after(src, at, rng), rng.numpy)
            torch.clear_autocast_cache()
        return value, logs

    def _prefetch_next(self, rng: TrainRNG) -> None:
        """Streamed frames: start reading those the next step will encode. (The rollout buffer
        draws from numpy later in the step, so the next step's windows are not known then.)"""
        frames = self.train.data.frames
        if isinstance(frames, StreamedFrames) and self.buffer is None:
            coming = self.train.window_indices(rng.next_numpy(), self.cfg.batch_size, self.window)
            frames.prefetch(self.latents.uncached(coming))

    def window_loss(self, batch: Windows, rng: TrainRNG, feedback_depth: int, weighted: bool = True,
                    rolled: torch.Tensor | None = None, logs: Logs | None = None) -> torch.Tensor:
        """Loss of predicting frames 1..L-1 of each window from noised context. The context is
        the real latents, or after `feedback_depth` passes the model's own samples; `rolled`
        (R, L, ...) gives the generated contexts of the batch's last R windows (RolloutBuffer).
        With shape_weight (and `weighted`), plus the probe's object loss on the predictions,
        its parts written into `logs`."""
        z, a = batch.z, batch.a
        fresh = len(z) - (0 if rolled is None else len(rolled))
        src = self._fed_back(z[:fresh], a[:fresh], rng, feedback_depth)
        if rolled is not None:
            src = torch.cat([src, rolled.to(device=self.device, dtype=src.dtype)], 0)
        predicted = self._predict(src, z, a, rng)
        error = (predicted - z[:, 1:]).pow(2)  # (B, L-1, V, C, h, w)
        if not weighted or (self.cfg.motion_weight == 0 and batch.fg is None):
            loss = error.mean()
        else:
            weight = self._error_weight(z, batch.fg)
            loss = (error * weight).mean() / weight.mean()
        if weighted and self.probe is not None:
            objects, parts = shape_loss(self.probe, predicted, z[:, 1:])
            loss = loss + self.cfg.shape_weight * objects
            if logs is not None:
                logs.update(parts)
        return loss

    def _fed_back(self, z: torch.Tensor, a: torch.Tensor, rng: TrainRNG, depth: int) -> torch.Tensor:
        """The context after `depth` fed-back passes (0: z itself). Each pass re-predicts every
        frame from the previous pass's frames, so after k passes frame i has been generated up
        to k steps deep from real context."""
        if not depth:
            return z
        src = z
        with torch.no_grad():
            for _ in range(depth if len(z) else 0):
                src = torch.cat([z[:, :1], sample_next(self.net, src, a, rng, self.dyn)], 1)
        # Autocast caches its bf16 copies of the weights, also those made under no_grad; reused
        # by the graded pass they would cut every gradient to the dynamics (torch 2.10).
        torch.clear_autocast_cache()
        return src

    def _predict(self, src: torch.Tensor, z: torch.Tensor, a: torch.Tensor, rng: TrainRNG) -> torch.Tensor:
        """Predictions (B, L-1, V, C, h, w) of targets z[:, 1:] from context src, lightly noised:
        the regression head's one pass, or the flow head's prediction at a random noise level."""
        b, length = z.shape[:2]
        dyn, device = self.dyn, self.device
        z_prev = src[:, :-1]
        levels = rng.rand(b, length - 1, device=device) * dyn.context_noise_train
        corrupted = F.normalize(noisy(z_prev, rng.randn(*z_prev.shape, device=device), levels), dim=-3)
        ctx = self.net.dynamics.encode_context(corrupted, a[:, :-1], levels)
        offsets = target_offsets(length, device)
        if dyn.head == "regression":  # the inference path itself: no noise is drawn
            return next_latent(self.net.dynamics, "regression", dyn.sample_steps, z_prev,
                               previous(z_prev), a[:, :-1], ctx, offsets, noise=_no_noise)
        t = decoder_times(b * (length - 1), rng, device).reshape(b, length - 1)
        x_t = noisy(z[:, 1:], rng.randn(*z[:, 1:].shape, device=device), t)
        return self.net.dynamics.predict(x_t, t, z_prev, a[:, :-1], ctx, offsets, previous(z_prev)).float()

    def _error_weight(self, z: torch.Tensor, fg: torch.Tensor | None) -> torch.Tensor:
        """Per-cell loss weights (B, L-1, V, 1, h, w). Moving things (the agent, a pushed block)
        fill a few latent cells; each cell is weighted by how much it changes so they are not
        drowned by the static background, and (object_weight) every cell an object covers or
        just left, moving or not."""
        change = (z[:, 1:] - z[:, :-1]).norm(dim=3, keepdim=True)  # in [0, 2]
        weight = 1 + self.cfg.motion_weight * change
        if fg is not None:
            weight = weight + self.cfg.object_weight * torch.maximum(fg[:, 1:], fg[:, :-1])
        return weight

    def _sample_after(self, src: torch.Tensor, idx: np.ndarray, rng: TrainRNG) -> torch.Tensor:
        """The model's sample of the frame after each window src (B, L, ...) -> (B, V, C, h, w):
        the window shifted by one, its last frame a placeholder no prediction sees (causal)."""
        shifted = torch.cat([src[:, 1:], src[:, -1:]], 1)
        a = self.norm.action(torch.from_numpy(self.train.data.actions[idx + 1]).to(self.device))
        return sample_next(self.net, shifted.to(self.device), a, rng, self.dyn)[:, -1].float().cpu()

    def validate(self) -> Logs:
        """Teacher-forced loss on fixed validation windows against repeating the last frame, and
        horizon-1 PSNR through the inference path."""
        rng = TrainRNG.seeded(self.seed + 2)
        batches = self.cfg.val_batches
        total = repeat = 0.0
        for chunk in np.array_split(self.val_idx, batches):
            batch = self.windows(chunk)
            total += self.window_loss(batch, rng, feedback_depth=0, weighted=False).item() / batches
            repeat += F.mse_loss(batch.z[:, :-1], batch.z[:, 1:]).item() / batches
        return {"val_loss": total, "val_loss_repeat": repeat,
                **horizon1(self.make_world_model(), self.train.data, self.val_idx[: self.cfg.batch_size])}

    def samples(self, path: Path) -> None:
        write_rollout_samples(self.make_world_model(), self.train.data, self.val_idx[:4], path)


def _no_noise() -> torch.Tensor:
    raise AssertionError("the regression head draws no noise")


def dynamics_task(net: WorldModelNet, train: DataView, val: DataView, cfg: StageConfig,
                  norm: Normalizer, device: torch.device, *, window: int, dyn: DynamicsConfig,
                  seed: int, make_world_model: Callable[[], WorldModel]) -> StageTask:
    """The dynamics stage as the training loop runs it (see DynamicsTask)."""
    return DynamicsTask(net, train, val, cfg, norm, device, window, dyn, seed, make_world_model).stage()


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
