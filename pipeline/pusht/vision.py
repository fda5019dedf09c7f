"""PushT pixel analysis: segment the T block, the agent and the goal by colour; estimate the T's
pose; score how rigid the T still looks (does a world model bend or smear it?).

Colours and geometry mirror gym-pusht 0.1.8 (envs/pusht.py, envs/pymunk_override.py), which
draws on a 512x512 canvas and resizes to the observation size with bilinear interpolation:
  background white; goal region LightGreen; T filled with 1.2 x LightSlateGray and outlined
  (fat segments of radius 2) in LightSlateGray; agent a RoyalBlue disc (radius 15) with a
  lighter core; walls thin LightGray lines.
Nothing here imports gym-pusht: frames may come from the simulator, a dataset or a world model.

Pixel (row r, col c) of an H x W frame shows canvas point x = (c + 0.5) * 512 / W - 0.5,
y = (r + 0.5) * 512 / H - 0.5 (cv2's resize convention; pygame fills canvas pixel i for
points in [i, i + 1)). Poses are in canvas units, exactly like gym-pusht's info["block_pose"]:
(x, y) is the body origin (the middle of the crossbar's outer edge) and the T's local point v
appears at (x, y) + R(angle) v.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

CANVAS = 512.0

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

# T geometry in body-local canvas units (gym-pusht add_tee, scale 30, length 4): a crossbar
# x in [-60, 60], y in [0, 30] and a stem x in [-15, 15], y in [30, 120]. The outline's fat
# segments extend the drawn shape ~2 units beyond the polygon.
T_RECTS = np.array([(-60.0, 60.0, 0.0, 30.0), (-15.0, 15.0, 30.0, 120.0)])  # (xmin, xmax, ymin, ymax)
T_OUTLINE = 2.0
T_AREA = 120.0 * 30.0 + 30.0 * 90.0
T_CENTROID = np.array([0.0, (3600.0 * 15.0 + 2700.0 * 75.0) / T_AREA])  # area centroid, local
AGENT_RADIUS = 15.0
# 'Agent visible': agent-coloured pixels (specks removed) covering 0.3x to 3x the disc's area, 80%
# of them within two radii of their centre. Blue confetti or a smeared agent does not count.
AGENT_AREA_RANGE = (0.3, 3.0)
# More T-coloured pixels than this many T areas is no recognisable T (e.g. a noise frame).
MAX_T_AREAS = 4.0


def _pixel_centres(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Canvas (x, y) of every pixel centre of an H x W frame, each (H, W)."""
    rows, cols = np.indices((h, w))
    return (cols + 0.5) * CANVAS / w - 0.5, (rows + 0.5) * CANVAS / h - 0.5


def _neighbours(mask: np.ndarray) -> np.ndarray:
    """(H, W) count of set pixels in each pixel's 3 x 3 neighbourhood."""
    padded = np.pad(mask, 1).astype(np.int32)
    h, w = mask.shape
    return sum(padded[i:i + h, j:j + w] for i in range(3) for j in range(3))


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


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two boolean masks; 1.0 when both are empty (they agree there is nothing)."""
    union = np.logical_or(a, b).sum()
    return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)


def block_iou(frame_a: np.ndarray, frame_b: np.ndarray) -> float:
    """IoU of the T masks of two frames of the same size."""
    if np.shape(frame_a) != np.shape(frame_b):
        raise ValueError(f"frames differ in shape: {np.shape(frame_a)} vs {np.shape(frame_b)}")
    return mask_iou(block_mask(frame_a), block_mask(frame_b))


def _agent_disc_area(h: int, w: int) -> float:
    return float(np.pi * AGENT_RADIUS**2 * (h / CANVAS) * (w / CANVAS))  # in pixels


def _agent_visible(agent: np.ndarray) -> bool:
    mask = agent >= 0.5
    mask &= _neighbours(mask) >= 3  # drop specks
    lo, hi = AGENT_AREA_RANGE
    if not lo <= mask.sum() / _agent_disc_area(*mask.shape) <= hi:
        return False
    px, py = _pixel_centres(*mask.shape)
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
    px, py = _pixel_centres(*share.shape)
    return np.array([(share * px).sum(), (share * py).sum()]) / share.sum()


@dataclass(frozen=True)
class BlockFit:
    """A rigid T fitted to a frame: pose in canvas units, and how well the T mask matches it."""

    x: float
    y: float
    angle: float  # radians, wrapped to (-pi, pi]
    iou: float  # IoU of the fitted rigid T's mask with the frame's T mask (the rigid-shape score)

    @property
    def pose(self) -> np.ndarray:
        return np.array([self.x, self.y, self.angle])


def _rot(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s], [s, c]])


class _Grid:
    """Canvas coordinates of `sub` x `sub` sample points inside each pixel of a crop."""

    def __init__(self, shape: tuple[int, int], box: tuple[int, int, int, int], sub: int) -> None:
        h, w = shape
        r0, r1, c0, c1 = box
        offsets = (np.arange(sub) + 0.5) / sub
        ys = (np.arange(r0, r1)[:, None] + offsets).reshape(-1) * CANVAS / h - 0.5  # (R*sub,)
        xs = (np.arange(c0, c1)[:, None] + offsets).reshape(-1) * CANVAS / w - 0.5  # (C*sub,)
        self.x, self.y = np.meshgrid(xs, ys)  # (R*sub, C*sub)
        self.box, self.sub = box, sub

    def tee_coverage(self, pose: np.ndarray) -> np.ndarray:
        """(R, C) fraction of each crop pixel covered by the drawn T (outline included) at pose."""
        x, y, angle = pose
        c, s = np.cos(angle), np.sin(angle)
        dx, dy = self.x - x, self.y - y
        u, v = c * dx + s * dy, -s * dx + c * dy  # world -> body-local
        inside = np.zeros(u.shape, dtype=bool)
        for xmin, xmax, ymin, ymax in T_RECTS:
            inside |= ((u >= xmin - T_OUTLINE) & (u <= xmax + T_OUTLINE)
                       & (v >= ymin - T_OUTLINE) & (v <= ymax + T_OUTLINE))
        r, sub = inside.shape[0] // self.sub, self.sub
        return inside.reshape(r, sub, -1, sub).mean(axis=(1, 3))


def _moment_poses(share: np.ndarray) -> list[np.ndarray]:
    """Two candidate poses (stem either way along the major axis) from the share's moments."""
    px, py = _pixel_centres(*share.shape)
    mass = share.sum()
    cx, cy = (share * px).sum() / mass, (share * py).sum() / mass
    dx, dy = px - cx, py - cy
    cov = np.array([[(share * dx * dx).sum(), (share * dx * dy).sum()],
                    [(share * dx * dy).sum(), (share * dy * dy).sum()]]) / mass
    axis = np.linalg.eigh(cov)[1][:, 1]  # major axis = the stem's direction
    skew = (share * (dx * axis[0] + dy * axis[1]) ** 3).sum()
    axis = axis if skew > 0 else -axis  # the long tail of the mass is the stem
    poses = []
    for direction in (axis, -axis):
        angle = np.arctan2(-direction[0], direction[1])  # R(angle) @ (0, 1) == direction
        origin = np.array([cx, cy]) - _rot(angle) @ T_CENTROID
        poses.append(np.array([origin[0], origin[1], angle]))
    return poses


def _initial_poses(grid: _Grid, target: np.ndarray, weight: np.ndarray, share: np.ndarray,
                   keep: int = 3) -> list[np.ndarray]:
    """The best few of: the two moment poses, and the T about the mass centroid every 15 degrees.

    Moments alone mislead when part of the T is hidden (agent, wall) or smeared; the scan
    makes sure one start lies in the right basin.
    """
    moments = _moment_poses(share)
    centroid = moments[0][:2] + _rot(moments[0][2]) @ T_CENTROID
    scan = [np.array([*(centroid - _rot(a) @ T_CENTROID), a]) for a in np.radians(np.arange(0, 360, 15))]
    poses = moments + scan
    costs = [float((weight * (grid.tee_coverage(p) - target) ** 2).sum()) for p in poses]
    return [poses[i] for i in np.argsort(costs)[:keep]]


def _refine(grid: _Grid, target: np.ndarray, weight: np.ndarray, pose: np.ndarray,
            step: np.ndarray, min_step: np.ndarray) -> tuple[np.ndarray, float]:
    """Pattern search on (x, y, angle) minimising the weighted squared coverage error."""
    def cost(p: np.ndarray) -> float:
        return float((weight * (grid.tee_coverage(p) - target) ** 2).sum())

    best = cost(pose)
    while np.any(step >= min_step):
        improved = False
        for i in range(3):
            for sign in (1.0, -1.0):
                trial = pose.copy()
                trial[i] += sign * step[i]
                c = cost(trial)
                if c < best:
                    pose, best, improved = trial, c, True
                    break
        if not improved:
            step = step / 2
    return pose, best


def _crop_box(mask: np.ndarray, margin: int) -> tuple[int, int, int, int]:
    rows, cols = np.nonzero(mask)
    h, w = mask.shape
    return (max(rows.min() - margin, 0), min(rows.max() + margin + 1, h),
            max(cols.min() - margin, 0), min(cols.max() + margin + 1, w))


def fit_block(frame: np.ndarray, sub: int = 4) -> BlockFit | None:
    """Fit the rigid T to a frame's T pixels; None when the frame shows (almost) no T.

    Pose: least-squares match of the drawn T's per-pixel coverage to the soft T segmentation,
    started from image moments (both stem directions tried) and refined by pattern search.
    Pixels the agent covers are left out (the T may lie under it). The score: IoU of the
    fitted T's mask with the frame's T mask, outside the agent. On a blurred or bent T the
    least-squares pose is the natural rigid best fit, so the IoU there is the rigid-shape score.
    """
    shares = class_fractions(frame)
    return _fit_shares(shares[..., BLOCK], shares[..., AGENT], sub)


def _fit_shares(block: np.ndarray, agent: np.ndarray, sub: int = 4) -> BlockFit | None:
    mask = block >= 0.5
    h, w = mask.shape
    mask &= _neighbours(mask) >= 3  # drop isolated specks (noise), keep 1-px-wide strokes
    t_pixels = T_AREA * (h / CANVAS) * (w / CANVAS)
    if not 0.05 * t_pixels <= mask.sum() <= MAX_T_AREAS * t_pixels:
        return None  # a few stray pixels, or T colour everywhere: no T to fit
    share = np.where(_neighbours(mask) > 0, block, 0.0)  # soft edges next to the T, nothing far
    box = _crop_box(mask, margin=max(2, round(12 * w / CANVAS)))
    target = share[box[0]:box[1], box[2]:box[3]]
    weight = 1.0 - agent[box[0]:box[1], box[2]:box[3]]  # unknown under the agent
    unit = CANVAS / w  # one pixel in canvas units
    coarse = _Grid((h, w), box, 2)
    candidates = [_refine(coarse, target, weight, pose, np.array([unit, unit, 0.1]),
                          np.array([unit, unit, 0.02])) for pose in _initial_poses(coarse, target, weight, share)]
    pose = min(candidates, key=lambda c: c[1])[0]
    pose, _ = _refine(_Grid((h, w), box, sub), target, weight, pose,
                      np.array([unit / 2, unit / 2, 0.02]), np.array([unit / 20, unit / 20, 0.002]))
    seen = agent < 0.5
    tee = _Grid((h, w), (0, h, 0, w), sub).tee_coverage(pose) >= 0.5
    iou = mask_iou(tee & seen, mask & seen)
    angle = float(np.angle(np.exp(1j * pose[2])))
    return BlockFit(x=float(pose[0]), y=float(pose[1]), angle=angle, iou=iou)


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
        fit = _fit_shares(shares[..., BLOCK], shares[..., AGENT])
        return {
            "agent_visible": float(_agent_visible(shares[..., AGENT])),
            "rigid_shape": 0.0 if fit is None else fit.iou,
            "block_pixels": float((shares[..., BLOCK] >= 0.5).sum()),
        }
