"""Helpers the stages share: batches to tensors, decoder loss, PSNR, sample grids."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from PIL import Image

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


def decoder_loss(net: WorldModelNet, x0: torch.Tensor, z: torch.Tensor, rng: TrainRNG) -> torch.Tensor:
    """Consistency (noisy -> clean jump) loss. x0 (N, V, 3, H, W); z (N, V, C, h, w)."""
    n, v = x0.shape[:2]
    flat_x0, flat_z = x0.flatten(0, 1), z.flatten(0, 1)
    t = decoder_times(n * v, rng, x0.device)
    x_t = noisy(flat_x0, rng.randn(*flat_x0.shape, device=x0.device), t)
    view = torch.arange(v, device=x0.device).repeat(n)
    pred = net.decoder(x_t, t, flat_z, view).float()
    return torch.nn.functional.mse_loss(pred, flat_x0)


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    """PSNR in dB of images in [-1, 1]."""
    mse = torch.mean((a.float().clamp(-1, 1) - b.float().clamp(-1, 1)) ** 2 / 4).item()
    return float(10 * np.log10(1.0 / max(mse, 1e-10)))


def save_grid(rows: list[torch.Tensor], path: Path) -> None:
    """rows: each (T, V, 3, H, W) in [-1, 1]; views stack vertically inside a row."""
    tiles = []
    for row in rows:
        t, v, _, h, w = row.shape
        img = row.float().clamp(-1, 1).add(1).mul(127.5).round().to(torch.uint8)
        tiles.append(img.permute(1, 3, 0, 4, 2).reshape(v * h, t * w, 3))
    grid = torch.cat(tiles, 0).cpu().numpy()
    tmp = path.with_name(f".{path.name}.tmp")
    Image.fromarray(grid).save(tmp, format="PNG")
    tmp.replace(path)


def fixed_noise(seed: int, batch: int, device: torch.device) -> Callable[..., torch.Tensor]:
    """A noise function (*shape) -> (batch, *shape) that replays the same draws for a given seed."""
    generator = torch.Generator().manual_seed(seed)
    return lambda *shape: torch.randn(batch, *shape, generator=generator).to(device)
