"""Few-step flow sampling: the one loop that the dynamics head (in training and at inference)
and the decoder sample with.

Rectified flow: x_t = (1 - t) x0 + t noise. A network trained to recover x0 from (x_t, t) samples
in `steps` passes: the first from pure noise at level 1, each later one from the previous x0
estimate re-noised to the next, lower level (1, 0.5 for two steps). One step is a single
prediction from noise.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def flow_times(steps: int) -> list[float]:
    """Noise levels visited by few-step sampling: 1, then evenly spaced down (e.g. 1, 0.5)."""
    return [1.0 - k / steps for k in range(steps)]


def noisy(z: torch.Tensor, noise: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Rectified-flow interpolation x_t = (1 - t) z + t noise; t broadcast from its leading dims."""
    t = t.reshape(*t.shape, *([1] * (z.dim() - t.dim())))
    return (1 - t) * z + t * noise


def sample(denoise: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], noise: Callable[[], torch.Tensor],
           levels: tuple[int, ...], steps: int, device: torch.device) -> torch.Tensor:
    """The x0 estimate after `steps` passes of `denoise(x_t, t) -> x0`; `noise()` draws a fresh
    noise tensor of x's shape per pass, and t has shape `levels` (x's leading dimensions)."""
    x0 = None
    for level in flow_times(steps):
        t = torch.full(levels, level, device=device)
        eps = noise()
        x0 = denoise(eps if x0 is None else noisy(x0, eps, t), t)
    if x0 is None:
        raise ValueError(f"sampling needs at least one step, got {steps}")
    return x0
