"""PushT pixel analysis: segment the T block, the agent and the goal by colour; estimate the T's
pose; score how rigid the T still looks (does a world model bend or smear it?).

Colours and geometry mirror gym-pusht 0.1.8 (envs/pusht.py, envs/pymunk_override.py), which
draws on a 512x512 canvas and resizes to the observation size with bilinear interpolation:
  background white; goal region LightGreen; T filled with 1.2 x LightSlateGray and outlined
  (fat segments of radius 2) in LightSlateGray; agent a RoyalBlue disc (radius 15) with a
  lighter core; walls thin LightGray lines.
Nothing here imports gym-pusht: frames may come from the simulator, a dataset or a world model.
Positions and poses are in gym-pusht's canvas units (see pipeline.pusht.tee_fit for the pixel
convention); a pose is exactly gym-pusht's info["block_pose"].
"""

from __future__ import annotations

import itertools

import numpy as np

from pipeline.pusht.tee_fit import (
    CANVAS,
    MAX_T_AREAS,
    T_AREA,
    BlockFit,
    fit_shares,
    mask_iou,
    neighbours,
    pixel_centres,
)

__all__ = ["AGENT", "BACKGROUND", "BLOCK", "GOAL", "MAX_T_AREAS", "T_AREA", "BlockFit", "PushTAnalyzer",
           "agent_mask", "agent_position", "agent_visible", "block_iou", "block_mask",
           "class_fractions", "estimate_block_pose", "fit_block", "goal_mask", "mask_iou",
           "rigid_shape_score"]

# Reference colours (RGB) and the class each belongs to.
PALETTE = np.array([
    (255, 255, 255),  # background
    (211, 211, 211),  # wall (LightGray)
    (144, 238, 144),  # goal (LightGreen)
    (143, 163, 184),  # T fill (LightSlateGray x 1.2)
    (119, 136, 153),  # T outline (LightSlateGray)
    (65, 105, 225),  # agent rim (RoyalBlue)
    (78, 126, 255),  # agent core (RoyalBlue x 1.2)
], dtype=np.float32)
BACKGROUND, GOAL, BLOCK, AGENT = 0, 1, 2, 3
PALETTE_CLASS = np.array([BACKGROUND, BACKGROUND, GOAL, BLOCK, BLOCK, AGENT, AGENT])
_PAIRS = np.array(list(itertools.combinations(range(len(PALETTE)), 2)))  # (P, 2)

AGENT_RADIUS = 15.0
# 'Agent visible': agent-coloured pixels (specks removed) covering 0.3x to 3x the disc's area, 80%
# of them within two radii of their centre. Blue confetti or a smeared agent does not count.
AGENT_AREA_RANGE = (0.3, 3.0)


def _check_frame(frame: np.ndarray) -> np.ndarray:
    frame = np.asarray(frame)
    if frame.ndim != 3 or frame.shape[-1] != 3:
        raise ValueError(f"expected one RGB frame (H, W, 3), got shape {frame.shape}")
    return frame


def class_fractions(frame: np.ndarray) -> np.ndarray:
    """Soft segmentation: (H, W, 4) share of background, goal, block and agent in each pixel.

    Each pixel is explained as a mix of two palette colours (the renderer's bilinear resize
    blends at most a few colours at an edge), choosing the pair with the smallest residual.
    A plain nearest-colour rule would call an agent/background blend "T", which is why pairs.
    """
    frame = _check_frame(frame)
    # Unmix each distinct colour once: rendered frames hold a few hundred colours.
    packed = frame.reshape(-1, 3).astype(np.uint32) @ np.array([65536, 256, 1], np.uint32)
    colours, inverse = np.unique(packed, return_inverse=True)
    rgb = np.stack([colours >> 16, (colours >> 8) & 255, colours & 255], -1).astype(np.float32)
    rgb = rgb[:, None, :]  # (U, 1, 3)
    a, b = PALETTE[_PAIRS[:, 0]], PALETTE[_PAIRS[:, 1]]  # (P, 3)
    d = b - a
    alpha = np.clip(((rgb - a) * d).sum(-1) / (d * d).sum(-1), 0.0, 1.0)  # (U, P): weight of b
    resid = ((rgb - a - alpha[..., None] * d) ** 2).sum(-1)
    best = resid.argmin(1)
    rows = np.arange(len(best))
    alpha = alpha[rows, best]
    out = np.zeros((len(best), 4), dtype=np.float32)
    np.add.at(out, (rows, PALETTE_CLASS[_PAIRS[best, 0]]), 1.0 - alpha)
    np.add.at(out, (rows, PALETTE_CLASS[_PAIRS[best, 1]]), alpha)
    return out[inverse.reshape(-1)].reshape(*frame.shape[:2], 4)


def block_mask(frame: np.ndarray) -> np.ndarray:
    """(H, W) bool: pixels at least half covered by the T block."""
    return class_fractions(frame)[..., BLOCK] >= 0.5


def goal_mask(frame: np.ndarray) -> np.ndarray:
    """(H, W) bool: visible goal region (where the T does not cover it)."""
    return class_fractions(frame)[..., GOAL] >= 0.5


def agent_mask(frame: np.ndarray) -> np.ndarray:
    """(H, W) bool: pixels at least half covered by the agent disc."""
    return class_fractions(frame)[..., AGENT] >= 0.5


def block_iou(frame_a: np.ndarray, frame_b: np.ndarray) -> float:
    """IoU of the T masks of two frames of the same size."""
    if np.shape(frame_a) != np.shape(frame_b):
        raise ValueError(f"frames differ in shape: {np.shape(frame_a)} vs {np.shape(frame_b)}")
    return mask_iou(block_mask(frame_a), block_mask(frame_b))


def _agent_disc_area(h: int, w: int) -> float:
    return float(np.pi * AGENT_RADIUS**2 * (h / CANVAS) * (w / CANVAS))  # in pixels


def _agent_visible(agent: np.ndarray) -> bool:
    mask = agent >= 0.5
    mask &= neighbours(mask) >= 3  # drop specks
    lo, hi = AGENT_AREA_RANGE
    if not lo <= mask.sum() / _agent_disc_area(*mask.shape) <= hi:
        return False
    px, py = pixel_centres(*mask.shape)
    dist = np.hypot(px[mask] - px[mask].mean(), py[mask] - py[mask].mean())
    return bool((dist <= 2 * AGENT_RADIUS).mean() >= 0.8)  # one compact blob, not confetti


def agent_visible(frame: np.ndarray) -> bool:
    """True if the frame shows one compact, agent-sized blob of agent colour (AGENT_AREA_RANGE)."""
    return _agent_visible(class_fractions(frame)[..., AGENT])


def agent_position(frame: np.ndarray) -> np.ndarray | None:
    """Centre (x, y) of the agent in canvas units, or None when no agent pixels are found."""
    share = class_fractions(frame)[..., AGENT]
    share = np.where(share >= 0.5, share, 0.0)
    if share.sum() == 0:
        return None
    px, py = pixel_centres(*share.shape)
    return np.array([(share * px).sum(), (share * py).sum()]) / share.sum()


def fit_block(frame: np.ndarray, sub: int = 4) -> BlockFit | None:
    """Fit the rigid T to a frame's T pixels; None when the frame shows (almost) no T.

    Pose: least-squares match of the drawn T's per-pixel coverage to the soft T segmentation,
    started from image moments (both stem directions tried) and refined by pattern search.
    Pixels the agent covers are left out (the T may lie under it). The score: IoU of the
    fitted T's mask with the frame's T mask, outside the agent. On a blurred or bent T the
    least-squares pose is the natural rigid best fit, so the IoU there is the rigid-shape score.
    """
    shares = class_fractions(frame)
    return fit_shares(shares[..., BLOCK], shares[..., AGENT], sub)


def estimate_block_pose(frame: np.ndarray) -> np.ndarray | None:
    """(x, y, angle) of the T in gym-pusht's block_pose convention, or None without a T."""
    fit = fit_block(frame)
    return None if fit is None else fit.pose


def rigid_shape_score(frame: np.ndarray) -> float:
    """Best IoU of a rigidly moved real T against the frame's T mask; 0.0 when the frame shows
    no recognisable T (under 5% of a T's area, or over MAX_T_AREAS of them, in T colour)."""
    fit = fit_block(frame)
    return 0.0 if fit is None else fit.iou


class PushTAnalyzer:
    """PushT frame analysis in the shape sim_model.evaluate expects (its FrameAnalyzer)."""

    name = "pusht"

    def object_mask(self, frame: np.ndarray) -> np.ndarray:
        return block_mask(frame)

    def shape_score(self, frame: np.ndarray) -> float:
        return rigid_shape_score(frame)

    def probe(self, frame: np.ndarray) -> dict[str, float]:
        """Per-frame health of a long rollout, from one segmentation pass."""
        shares = class_fractions(frame)
        fit = fit_shares(shares[..., BLOCK], shares[..., AGENT])
        return {
            "agent_visible": float(_agent_visible(shares[..., AGENT])),
            "rigid_shape": 0.0 if fit is None else fit.iou,
            "block_pixels": float((shares[..., BLOCK] >= 0.5).sum()),
        }
