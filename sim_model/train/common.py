"""Helpers the stages share: batches to tensors, decoder loss, PSNR, sample grids."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
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


def median_background(data: TrainingData, frames: int = 512, seed: int = 0) -> torch.Tensor:
    """(V, H, W, 3) uint8: per-pixel median over frames drawn from the whole dataset. Objects
    that move between episodes (the agent, the block) vanish from it; the static scene stays."""
    idx = np.sort(np.random.default_rng(seed).choice(len(data.frames), min(frames, len(data.frames)),
                                                     replace=False))
    return data.frames[torch.from_numpy(idx)].median(dim=0).values


def object_pixels(frames: torch.Tensor, background: torch.Tensor, threshold: int = 40,
                  grow: int = 0) -> torch.Tensor:
    """uint8 frames (..., V, H, W, 3) -> (..., V, 1, H, W) float in {0, 1}: pixels that differ
    from the background by more than `threshold` levels in some channel, grown by `grow` pixels
    (so an object's outline, where mask IoU is won or lost, counts on both sides)."""
    diff = (frames.short() - background.short()).abs().amax(-1) > threshold  # (..., V, H, W)
    mask = diff.float().unsqueeze(-3)
    if grow:
        flat = mask.reshape(-1, 1, *mask.shape[-2:])
        mask = F.max_pool2d(flat, 2 * grow + 1, stride=1, padding=grow).reshape(mask.shape)
    return mask


def foreground_cells(frames: torch.Tensor, background: torch.Tensor, width: int,
                     threshold: int = 40) -> torch.Tensor:
    """uint8 frames (N, V, H, W, 3) -> (N, V, 1, h, w) float: 1 where any pixel of the latent
    cell differs from the background by more than `threshold` levels in some channel."""
    mask = object_pixels(frames, background, threshold)  # (N, V, 1, H, W)
    n, v, _, height, w_px = mask.shape
    cells = F.max_pool2d(mask.reshape(n * v, 1, height, w_px), w_px // width)
    return cells.reshape(n, v, 1, *cells.shape[-2:])


def pixel_weights(data: TrainingData, idx: np.ndarray, background: torch.Tensor | None,
                  object_weight: float, device: torch.device) -> torch.Tensor | None:
    """Decoder loss weights of frames idx (...): 1 + object_weight on object pixels (grown by two
    pixels), or None when object_weight is 0 (plain MSE)."""
    if background is None or object_weight == 0:
        return None
    mask = object_pixels(data.frames[torch.from_numpy(idx)], background, grow=2)
    return (1 + object_weight * mask).to(device)


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
