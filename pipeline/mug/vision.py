"""The mug from pixels: its mask in a frame, and where it is in 3-D, read from the two fixed
views by triangulating the mask's centre (the cross-view reading: the same mug seen by `front`
and `side` must meet at one point).

The mug is the only red thing on the table (pipeline.mug.env's material 'mug'); the mask is the
pixels whose red channel dominates. Each fixed camera's pose and field of view are read once from
the scene (pipeline.mug.env.scene_xml: the cameras never move), so a pixel gives a ray in the
world; the mug's centre is the point closest to both views' rays through their mask centroids.
Standing on the table it reads about MUG_HEIGHT / 2 high; lifted, its height is the lift.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

FIXED = ("front", "side")
MIN_PIXELS = 4  # fewer red pixels than this: the mug is not in view


def mug_mask(frame: np.ndarray) -> np.ndarray:
    """(H, W) bool: the mug's pixels in an RGB frame (uint8)."""
    rgb = frame.astype(np.int32)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return (r > 50) & (r * 10 > g * 18) & (r * 10 > b * 18)


@dataclass(frozen=True)
class Camera:
    position: np.ndarray  # (3,) world
    rotation: np.ndarray  # (3, 3): columns are the camera's right, up and backward axes
    fovy: float  # degrees

    def ray(self, row: float, col: float, size: int) -> np.ndarray:
        """The unit direction, in the world, of the ray through pixel (row, col) of a size x size
        frame (row 0 at the top)."""
        focal = (size / 2) / np.tan(np.radians(self.fovy) / 2)
        local = np.array([(col + 0.5 - size / 2) / focal, -(row + 0.5 - size / 2) / focal, -1.0])
        world = self.rotation @ local
        return world / np.linalg.norm(world)


@lru_cache(maxsize=1)
def cameras() -> dict[str, Camera]:
    """The fixed cameras' poses, as the scene places them (read once from MuJoCo)."""
    from pipeline.mug.env import MugSim

    sim = MugSim(resolution=16)
    try:
        sim.reset(0)  # places the cameras (mj_forward); where the mug is does not matter
        model, data = sim.model, sim.data
        out = {}
        for name in FIXED:
            index = model.camera(name).id
            out[name] = Camera(position=data.cam_xpos[index].copy(),
                               rotation=data.cam_xmat[index].reshape(3, 3).copy(),
                               fovy=float(model.cam_fovy[index]))
        return out
    finally:
        sim.close()


def centroid(frame: np.ndarray) -> tuple[float, float] | None:
    """The mug mask's centre (row, col), or None when it is not in view."""
    rows, cols = np.nonzero(mug_mask(frame))
    if len(rows) < MIN_PIXELS:
        return None
    return float(rows.mean()), float(cols.mean())


def locate(front: np.ndarray, side: np.ndarray) -> tuple[np.ndarray, float] | None:
    """The mug's centre in the world (3,) from one frame of each fixed view, and how far apart
    the two views' rays pass there (metres: the cross-view disagreement); None when either view
    does not show it."""
    found = []
    for name, frame in (("front", front), ("side", side)):
        at = centroid(frame)
        if at is None:
            return None
        camera = cameras()[name]
        found.append((camera.position, camera.ray(at[0], at[1], frame.shape[0])))
    (p, u), (q, v) = found
    # closest points p + s u and q + t v of the two rays
    w = p - q
    b, d, e = float(u @ v), float(u @ w), float(v @ w)
    denominator = 1.0 - b * b
    if denominator < 1e-9:
        return None
    s = (b * e - d) / denominator
    t = (e - b * d) / denominator
    a_point, b_point = p + s * u, q + t * v
    return (a_point + b_point) / 2, float(np.linalg.norm(a_point - b_point))


FILL_REAL = 0.55  # share of its bounding box the mug fills in the front view: 99 % of real frames above


class MugAnalyzer:
    """`--object-mask mug`: the mug's pixels, how much it still looks like one solid mug, and
    health probes, of a `front` frame (an analyzer reads one view; the cross-view reading is the
    plausibility check, pipeline.mug.scorer)."""

    name = "mug"

    def object_mask(self, frame: np.ndarray) -> np.ndarray:
        return mug_mask(frame)

    def shape_score(self, frame: np.ndarray) -> float:
        """In [0, 1]: the share of its bounding box the mug's pixels fill, against FILL_REAL (real
        frames: median 0.80, 1st percentile 0.54, handle and fingers included); a mug a model
        smears, splits or thins fills less of it; 0 when the view shows no mug."""
        rows, cols = np.nonzero(mug_mask(frame))
        if len(rows) < MIN_PIXELS:
            return 0.0
        box = (rows.max() - rows.min() + 1) * (cols.max() - cols.min() + 1)
        return float(min(1.0, len(rows) / box / FILL_REAL))

    def probe(self, frame: np.ndarray) -> dict[str, float]:
        at = centroid(frame)
        return {"mug_pixels": float(mug_mask(frame).sum()), "mug_row": -1.0 if at is None else at[0],
                "mug_col": -1.0 if at is None else at[1]}
