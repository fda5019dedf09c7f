"""Stage 2: latent dynamics on windows of frames, autoencoder frozen.

Every frame of a window after the first is a target predicted from the frames before it, all
in one parallel pass (see nn/temporal.py). Context latents get light noise; from
`feedback_start` on, a share of batches replaces the context by the model's own one-step
samples, so it learns to continue from what it generates rather than from perfect latents.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from sim_model.nn.dynamics import flow_times, noisy
from sim_model.nn.world import WorldModelNet, to_images
from sim_model.normalize import Normalizer
from sim_model.train.common import batch_images, decoder_times, psnr, save_grid
from sim_model.train.config import StageConfig
from sim_model.train.data import DataView, TrainingData
from sim_model.train.loop import Logs, StageTask
from sim_model.train.state import TrainRNG

if TYPE_CHECKING:
    from sim_model.world_model import WorldModel


def target_offsets(length: int, device: torch.device) -> torch.Tensor:
    """(length-1, length): steps from context frame j to target frame i = 1..length-1."""
    i = torch.arange(1, length, device=device)[:, None]
    return i - torch.arange(length, device=device)[None]


def sample_next(net: WorldModelNet, src: torch.Tensor, a: torch.Tensor, rng: TrainRNG,
                steps: int, noise_level: float = 0.0) -> torch.Tensor:
    """One-step samples of frames 1..L-1 given context src (B, L, V, C, h, w) -> (B, L-1, ...)."""
    b, length = src.shape[:2]
    levels = torch.full((b, length), noise_level, device=src.device)
    ctx = net.dynamics.encode_context(src, a, levels)
    offsets = target_offsets(length, src.device)
    z_hat = None
    for t in flow_times(steps):
        level = torch.full((b, length - 1), t, device=src.device)
        eps = rng.randn(*src[:, 1:].shape, device=src.device)
        x_t = eps if z_hat is None else noisy(z_hat, eps, level)
        pred = net.dynamics.predict(x_t, level, src[:, :-1], a[:, :-1], ctx, offsets)
        z_hat = F.normalize(pred.float(), dim=-3)
    assert z_hat is not None
    return z_hat


def dynamics_task(net: WorldModelNet, train: DataView, val: DataView, cfg: StageConfig,
                  norm: Normalizer, device: torch.device, *, window: int, sample_steps: int,
                  context_noise: float, seed: int,
                  make_world_model: Callable[[], WorldModel]) -> StageTask:
    data = train.data

    def windows(idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            z = net.encode(batch_images(data, idx, device))  # (B, L, V, C, h, w)
        a = norm.action(torch.from_numpy(data.actions[idx]).to(device))  # (B, L, A)
        return z, a

    def losses(z: torch.Tensor, a: torch.Tensor, rng: TrainRNG, feedback: bool,
               weighted: bool = True) -> torch.Tensor:
        b, length = z.shape[:2]
        src = z
        if feedback:
            with torch.no_grad():
                src = torch.cat([z[:, :1], sample_next(net, z, a, rng, sample_steps)], 1)
            # Autocast caches its bf16 copies of the weights, also those made under no_grad;
            # reused below they would cut every gradient to the dynamics (torch 2.10).
            torch.clear_autocast_cache()
        levels = rng.rand(b, length, device=device) * context_noise
        ctx = net.dynamics.encode_context(noisy(src, rng.randn(*src.shape, device=device), levels), a, levels)
        t = decoder_times(b * (length - 1), rng, device).reshape(b, length - 1)
        x_t = noisy(z[:, 1:], rng.randn(*z[:, 1:].shape, device=device), t)
        pred = net.dynamics.predict(x_t, t, src[:, :-1], a[:, :-1], ctx, target_offsets(length, device))
        error = (pred.float() - z[:, 1:]).pow(2)  # (B, L-1, V, C, h, w)
        if not weighted or cfg.motion_weight == 0:
            return error.mean()
        # Moving things (the agent, a pushed block) fill a few latent pixels; weight each latent
        # pixel by how much it changes so they are not drowned by the static background.
        change = (z[:, 1:] - z[:, :-1]).norm(dim=3, keepdim=True)  # in [0, 2]
        weight = 1 + cfg.motion_weight * change
        return (error * weight).mean() / weight.mean()

    def loss(step: int, rng: TrainRNG) -> tuple[torch.Tensor, Logs]:
        z, a = windows(train.window_indices(rng.numpy, cfg.batch_size, window))
        feedback = (step >= cfg.feedback_start * cfg.steps
                    and float(rng.rand(1, device=torch.device("cpu"))) < cfg.feedback_prob)
        value = losses(z, a, rng, feedback)
        return value, {"feedback": float(feedback)}

    val_idx = val.window_indices(np.random.default_rng(seed + 1), cfg.val_batches * cfg.batch_size, window)

    def validate() -> Logs:
        rng = TrainRNG.seeded(seed + 2)
        total = repeat = 0.0
        for chunk in np.array_split(val_idx, cfg.val_batches):
            z, a = windows(chunk)
            total += losses(z, a, rng, feedback=False, weighted=False).item() / cfg.val_batches
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
