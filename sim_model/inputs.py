"""Checks and reshapes what callers hand to WorldModel.reset/step, with errors that say what to fix."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from schemas import FeatureSpec
from schemas.errors import SpecError


@dataclass(frozen=True)
class FrameLayout:
    """Whether the caller used the one-camera shorthand (no V axis)."""

    squeeze_view: bool

    def restore(self, frames: torch.Tensor) -> torch.Tensor:
        """(B, V, H, W, 3) -> the caller's layout."""
        return frames[:, 0] if self.squeeze_view else frames


def parse_frames(frames: np.ndarray | torch.Tensor, actions: np.ndarray | torch.Tensor | None,
                 features: FeatureSpec) -> tuple[torch.Tensor, torch.Tensor, FrameLayout]:
    """-> frames (B, T0, V, H, W, 3) uint8, history actions (B, T0-1, A) float32, layout.

    Accepted: (B, V, H, W, 3); (B, H, W, 3) for one camera; with `actions` (B, T0-1, A) a leading
    time axis after B: (B, T0, V, H, W, 3) or (B, T0, H, W, 3).
    """
    x = torch.as_tensor(np.asarray(frames) if not isinstance(frames, torch.Tensor) else frames)
    if x.dtype != torch.uint8:
        raise SpecError(f"frames must be uint8 RGB, got {x.dtype}; convert with "
                        "(frames * 255).round().astype(np.uint8) if they are floats in [0, 1].")
    views = len(features.cameras)
    cam = features.cameras[0]
    has_time = actions is not None
    squeeze = views == 1 and x.dim() == (5 if has_time else 4)
    if squeeze:
        x = x.unsqueeze(-4)
    if not has_time:
        x = x.unsqueeze(1)
    expected = ("B", "T0") * has_time + (views, cam.height, cam.width, 3)
    if x.dim() != 6 or tuple(x.shape[2:]) != (views, cam.height, cam.width, 3):
        shape = tuple(frames.shape)
        want = "(B, V, H, W, 3)" + (" or (B, H, W, 3)" if views == 1 else "")
        raise SpecError(f"frames have shape {shape}; this model expects {want} with V={views}, "
                        f"H={cam.height}, W={cam.width}{' plus a time axis after B' * has_time} "
                        f"(full: {expected}). Resize frames to the model's resolution.")
    b, t0 = x.shape[:2]
    history = torch.zeros(b, 0, features.action_dim)
    if has_time:
        history = torch.as_tensor(np.asarray(actions), dtype=torch.float32)
        if history.dim() != 3 or history.shape[0] != b or history.shape[2] != features.action_dim \
                or history.shape[1] not in (t0 - 1, t0):
            raise SpecError(f"history actions have shape {tuple(history.shape)}; with {t0} history "
                            f"frames pass ({b}, {t0 - 1}, {features.action_dim}): the action taken "
                            "after each frame but the last.")
        history = history[:, : t0 - 1]
    return x, history, FrameLayout(squeeze)


def as_actions(actions: np.ndarray | torch.Tensor, batch: int, action_dim: int,
               device: torch.device) -> torch.Tensor:
    """Actions (B, A) float32 on `device`, or a SpecError naming the expected shape."""
    a = torch.as_tensor(np.asarray(actions) if not isinstance(actions, torch.Tensor) else actions)
    if tuple(a.shape) != (batch, action_dim):
        raise SpecError(f"actions have shape {tuple(a.shape)}; expected ({batch}, {action_dim}) — one "
                        "action per batch row, in the dataset's raw units.")
    a = a.to(device=device, dtype=torch.float32)
    if not torch.isfinite(a).all():
        raise SpecError("actions contain NaN or inf; pass finite values.")
    return a
