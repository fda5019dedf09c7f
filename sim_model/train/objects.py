"""Where the objects are, without labels: pixels and latent cells that differ from the dataset's
median frame (the static scene). The object-weighted losses of every stage read these."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from sim_model.train.data import TrainingData


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
