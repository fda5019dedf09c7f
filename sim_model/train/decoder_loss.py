"""The consistency decoder's training loss and its inputs (autoencoder and fine-tune stages)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from sim_model.nn.autoencoder import unit_norm
from sim_model.nn.sampler import noisy
from sim_model.nn.world import WorldModelNet, to_images
from sim_model.train.data import TrainingData
from sim_model.train.state import TrainRNG


def batch_images(data: TrainingData, idx: np.ndarray, device: torch.device) -> torch.Tensor:
    """Global frame indices (...) -> images (..., V, 3, H, W) in [-1, 1] on device."""
    return to_images(data.frames[torch.from_numpy(idx)].to(device))


def decoder_times(n: int, rng: TrainRNG, device: torch.device) -> torch.Tensor:
    """Noise levels for decoder training: half at t=1 (the one-step jump from pure noise),
    half uniform, so every level few-step sampling visits is covered."""
    t = rng.rand(n, device=device)
    return torch.where(rng.rand(n, device=device) < 0.5, torch.ones_like(t), t.clamp(min=0.02))


def perturb_latent(z: torch.Tensor, std: float, rng: TrainRNG) -> torch.Tensor:
    """Small Gaussian noise on a unit-norm latent, re-projected (robustness to dynamics errors)."""
    if std == 0:
        return z
    return unit_norm(z + std * rng.randn(*z.shape, device=z.device), dim=-3)


def decoder_loss(net: WorldModelNet, x0: torch.Tensor, z: torch.Tensor, rng: TrainRNG,
                 weight: torch.Tensor | None = None) -> torch.Tensor:
    """Consistency (noisy -> clean jump) loss. x0 (N, V, 3, H, W); z (N, V, C, h, w); weight
    (N, V, 1, H, W), per pixel, or None for plain MSE. A weighted loss is divided by the mean
    weight, so its scale (and what gradient clipping does to it) stays that of plain MSE."""
    n, v = x0.shape[:2]
    flat_x0, flat_z = x0.flatten(0, 1), z.flatten(0, 1)
    t = decoder_times(n * v, rng, x0.device)
    x_t = noisy(flat_x0, rng.randn(*flat_x0.shape, device=x0.device), t)
    view = torch.arange(v, device=x0.device).repeat(n)
    pred = net.decoder(x_t, t, flat_z, view).float()
    if weight is None:
        return F.mse_loss(pred, flat_x0)
    w = weight.flatten(0, 1).to(pred.dtype)
    return ((pred - flat_x0) ** 2 * w).mean() / w.mean()


def fixed_noise(seed: int, batch: int, device: torch.device) -> Callable[..., torch.Tensor]:
    """A noise function (*shape) -> (batch, *shape) that replays the same draws for a given seed."""
    generator = torch.Generator().manual_seed(seed)
    return lambda *shape: torch.randn(batch, *shape, generator=generator).to(device)
