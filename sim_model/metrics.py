"""Image fidelity metrics on uint8 RGB frames: PSNR and SSIM, batched, torch only.

LPIPS is not offered: it needs pretrained AlexNet/VGG weights that cannot be fetched offline
(no weights ship with torchvision or with this project), and a metric that silently downloads
on first use does not belong in an evaluation that must run on a disconnected cluster.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

PSNR_MAX_DB = 100.0  # identical images; any nonzero uint8 error on a frame is below ~100 dB
SSIM_WINDOW = 11
SSIM_SIGMA = 1.5
_K1, _K2 = 0.01, 0.03


def _as_float(images: np.ndarray | torch.Tensor) -> torch.Tensor:
    """uint8 (..., H, W, 3) -> float64 tensor in [0, 255]."""
    tensor = torch.as_tensor(np.asarray(images)) if not torch.is_tensor(images) else images
    if tensor.ndim < 3 or tensor.shape[-1] != 3:
        raise ValueError(f"expected RGB images shaped (..., H, W, 3), got {tuple(tensor.shape)}")
    return tensor.to(torch.float64)


def _check_pair(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.shape != b.shape:
        raise ValueError(f"images differ in shape: {tuple(a.shape)} vs {tuple(b.shape)}")


def psnr(a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> np.ndarray:
    """Peak signal-to-noise ratio in dB per image, for uint8 images (..., H, W, 3).

    Returns an array shaped like the leading axes; identical images give PSNR_MAX_DB (not inf,
    so that means over episodes stay finite when a static scene is reproduced exactly).
    """
    x, y = _as_float(a), _as_float(b)
    _check_pair(x, y)
    mse = ((x - y) ** 2).mean(dim=(-3, -2, -1))
    floor = 255.0**2 / 10 ** (PSNR_MAX_DB / 10)
    return (10 * torch.log10(255.0**2 / mse.clamp_min(floor))).numpy()


def _gaussian_window(size: int, sigma: float) -> torch.Tensor:
    coords = torch.arange(size, dtype=torch.float64) - (size - 1) / 2
    g = torch.exp(-(coords**2) / (2 * sigma**2))
    return g / g.sum()


def ssim(a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor,
         window: int = SSIM_WINDOW, sigma: float = SSIM_SIGMA) -> np.ndarray:
    """Structural similarity per image (Wang et al. 2004), mean over pixels and RGB channels.

    Gaussian window 11 / sigma 1.5, K1 = 0.01, K2 = 0.03, data range 255, valid convolution
    (no padding), as in the reference implementation. Images smaller than the window use the
    largest odd window that fits. Input uint8 (..., H, W, 3); output shaped like the leading axes.
    """
    x, y = _as_float(a), _as_float(b)
    _check_pair(x, y)
    lead, (h, w) = x.shape[:-3], x.shape[-3:-1]
    size = min(window, h, w)
    size -= 1 - size % 2  # odd
    g = _gaussian_window(size, sigma)
    kernel = (g[:, None] * g[None, :]).expand(3, 1, size, size)  # depthwise, one per channel

    def blur(t: torch.Tensor) -> torch.Tensor:  # (N, 3, H, W) -> (N, 3, H-size+1, W-size+1)
        return F.conv2d(t, kernel, groups=3)

    # (..., H, W, 3) -> (N, 3, H, W)
    x = x.reshape(-1, h, w, 3).permute(0, 3, 1, 2)
    y = y.reshape(-1, h, w, 3).permute(0, 3, 1, 2)
    mu_x, mu_y = blur(x), blur(y)
    var_x = blur(x * x) - mu_x**2
    var_y = blur(y * y) - mu_y**2
    cov = blur(x * y) - mu_x * mu_y
    c1, c2 = (_K1 * 255.0) ** 2, (_K2 * 255.0) ** 2
    ssim_map = ((2 * mu_x * mu_y + c1) * (2 * cov + c2)) / ((mu_x**2 + mu_y**2 + c1) * (var_x + var_y + c2))
    return ssim_map.mean(dim=(1, 2, 3)).reshape(lead).numpy()
