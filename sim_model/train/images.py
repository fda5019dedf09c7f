"""Image scores and sample grids written during training."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image


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
