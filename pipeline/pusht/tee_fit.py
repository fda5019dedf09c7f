"""Fit the rigid PushT T to a soft segmentation: its pose, and how rigid the T still looks.

Geometry mirrors gym-pusht 0.1.8's add_tee; coordinates are canvas units (512 x 512), and pixel
(r, c) of an H x W frame shows canvas point ((c + 0.5) * 512 / W - 0.5, (r + 0.5) * 512 / H - 0.5)
(cv2's resize convention; pygame fills canvas pixel i for points in [i, i + 1)). A pose
(x, y, angle) is gym-pusht's block_pose: the body origin (middle of the crossbar's outer edge),
and the T's local point v appears at (x, y) + R(angle) v.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CANVAS = 512.0
# T geometry in body-local canvas units (gym-pusht add_tee, scale 30, length 4): a crossbar
# x in [-60, 60], y in [0, 30] and a stem x in [-15, 15], y in [30, 120]. The outline's fat
# segments extend the drawn shape ~2 units beyond the polygon.
T_RECTS = np.array([(-60.0, 60.0, 0.0, 30.0), (-15.0, 15.0, 30.0, 120.0)])  # (xmin, xmax, ymin, ymax)
T_OUTLINE = 2.0
T_AREA = 120.0 * 30.0 + 30.0 * 90.0
T_CENTROID = np.array([0.0, (3600.0 * 15.0 + 2700.0 * 75.0) / T_AREA])  # area centroid, local
# More T-coloured pixels than this many T areas is no recognisable T (e.g. a noise frame).
MAX_T_AREAS = 4.0


def pixel_centres(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Canvas (x, y) of every pixel centre of an H x W frame, each (H, W)."""
    rows, cols = np.indices((h, w))
    return (cols + 0.5) * CANVAS / w - 0.5, (rows + 0.5) * CANVAS / h - 0.5


def neighbours(mask: np.ndarray) -> np.ndarray:
    """(H, W) count of set pixels in each pixel's 3 x 3 neighbourhood."""
    padded = np.pad(mask, 1).astype(np.int32)
    h, w = mask.shape
    count = np.zeros((h, w), np.int32)
    for i in range(3):
        for j in range(3):
            count += padded[i:i + h, j:j + w]
    return count


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two boolean masks; 1.0 when both are empty (they agree there is nothing)."""
    union = np.logical_or(a, b).sum()
    return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)


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
    px, py = pixel_centres(*share.shape)
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


def fit_shares(block: np.ndarray, agent: np.ndarray, sub: int = 4) -> BlockFit | None:
    """Fit the T to per-pixel T shares (H, W) in [0, 1]; `agent` (H, W): shares of an occluder
    whose pixels say nothing about the T. None when there is no recognisable T.

    Least-squares match of the drawn T's per-pixel coverage (supersampled `sub` x `sub`) to the
    shares, from the best few of moment and angle-scan starts, refined by pattern search.
    """
    mask = block >= 0.5
    h, w = mask.shape
    mask &= neighbours(mask) >= 3  # drop isolated specks (noise), keep 1-px-wide strokes
    t_pixels = T_AREA * (h / CANVAS) * (w / CANVAS)
    if not 0.05 * t_pixels <= mask.sum() <= MAX_T_AREAS * t_pixels:
        return None  # a few stray pixels, or T colour everywhere: no T to fit
    share = np.where(neighbours(mask) > 0, block, 0.0)  # soft edges next to the T, nothing far
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
