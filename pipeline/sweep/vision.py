"""The pile, the goal and the pushers seen in pixels alone, from either camera.

Every pixel is given the nearest colour of the renderer's palette (pipeline.sweep.render), so an
edge pixel half disc, half floor counts for whichever it is nearer: over a disc's rim the
errors cancel and the particle pixel count tracks the discs' area. World-model frames, whose
colours drift, classify the same way. The goal's pixels are known from the geometry: the
goal square for `top`, its projection through the side camera for `side`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw

from pipeline.sweep import render
from pipeline.sweep.env import GOAL, WORKSPACE

# Each camera's palette: what it can show. Class indices below refer to these orders.
_PALETTES = {
    "top": np.array([render.FLOOR, render.WALL, render.GOAL_COLOUR, render.PARTICLE,
                     *render.PUSHERS], np.float32),
    "side": np.array([render.FLOOR, render.BACKDROP, render.GOAL_COLOUR, render.PARTICLE,
                      *render.PUSHERS, *render.LIDS], np.float32),
}
PARTICLE_CLASS = 3
PUSHER_CLASSES = (4, 5)  # arm 0, arm 1 (their bodies; lids show in `side` only)
# A particle pixel this close to the particle colour is a disc's core, not its blended rim.
CORE_DISTANCE = 20.0
# Share of particle pixels that are core pixels in simulator `top` frames at 96 x 96: 0.70-0.81,
# median 0.75, over 50 frames of scripted play; shape_score divides by the median.
REAL_CORE_SHARE = 0.75


def classify(frame: np.ndarray, camera: str = "top") -> np.ndarray:
    """(H, W) int: the index of each pixel's nearest colour in the camera's palette."""
    palette = _PALETTES[camera]
    pixels = np.asarray(frame, np.float32)[..., None, :]  # (H, W, 1, 3)
    return np.argmin(((pixels - palette) ** 2).sum(axis=-1), axis=-1)


def particle_mask(frame: np.ndarray, camera: str = "top") -> np.ndarray:
    """(H, W) bool: the pixels that show a disc."""
    return classify(frame, camera) == PARTICLE_CLASS


@lru_cache(maxsize=16)
def goal_mask(camera: str, height: int, width: int) -> np.ndarray:
    """(H, W) bool: the pixels whose centre shows the goal region's floor (read-only)."""
    if camera == "top":
        ys, xs = (np.arange(n) + 0.5 for n in (height, width))
        x = xs * WORKSPACE / width
        y = ys * WORKSPACE / height
        mask = (((y >= GOAL[1]) & (y <= GOAL[3]))[:, None] & ((x >= GOAL[0]) & (x <= GOAL[2]))[None, :])
    elif camera == "side":
        x0, y0, x1, y1 = GOAL
        uv, _ = render.SIDE.project(np.array([[x0, y0, 0], [x1, y0, 0], [x1, y1, 0], [x0, y1, 0]]))
        scale = np.array([width, height]) / 2
        image = Image.new("1", (width, height), 0)
        # Pixel (i, j) covers [j, j + 1) x [i, i + 1); PIL fills by pixel centres at integers.
        ImageDraw.Draw(image).polygon([tuple(p) for p in scale + scale * uv - 0.5], fill=1)
        mask = np.asarray(image, bool)
    else:
        raise ValueError(f"the sweep arena has cameras 'top' and 'side', not '{camera}'")
    mask.setflags(write=False)
    return mask


def in_goal_pixel_fraction(frame: np.ndarray, camera: str = "top") -> tuple[float, int]:
    """The share of particle pixels inside the goal, and the particle pixel count (0.0, 0 when
    no disc is seen)."""
    particles = particle_mask(frame, camera)
    count = int(particles.sum())
    if not count:
        return 0.0, 0
    inside = particles & goal_mask(camera, *particles.shape)
    return float(inside.sum()) / count, count


def pusher_positions(frame: np.ndarray) -> np.ndarray | None:
    """Both pushers' centres (2, 2) in canvas units, from a `top` frame: the centroid of each
    arm's colour. An arm hidden under the other takes its position; None when neither shows."""
    classes = classify(frame, "top")
    scale = WORKSPACE / np.array([frame.shape[1], frame.shape[0]])
    found: list[np.ndarray | None] = []
    for arm in PUSHER_CLASSES:
        ys, xs = np.nonzero(classes == arm)
        found.append((np.array([xs.mean(), ys.mean()]) + 0.5) * scale if len(xs) else None)
    if found[0] is None and found[1] is None:
        return None
    return np.stack([f if f is not None else next(g for g in found if g is not None) for f in found])


class SweepAnalyzer:
    """`--object-mask sweep`: the pile's pixels, how crisp its discs are, and health probes, of a
    `top` frame (the pipeline's object checks read the first camera, which is `top`)."""

    name = "sweep"

    def object_mask(self, frame: np.ndarray) -> np.ndarray:
        return particle_mask(frame)

    def shape_score(self, frame: np.ndarray) -> float:
        """How much the pile still looks like discs, in [0, 1]: the share of particle pixels that
        hold the particle colour itself (a disc's core) rather than a blend, against that share
        in simulator frames. A smeared or melted pile has few core pixels."""
        pixels = np.asarray(frame, np.float32)
        mask = particle_mask(frame)
        if not mask.any():
            return 0.0
        distance = np.linalg.norm(pixels[mask] - _PALETTES["top"][PARTICLE_CLASS], axis=-1)
        return float(min(1.0, (distance < CORE_DISTANCE).mean() / REAL_CORE_SHARE))

    def probe(self, frame: np.ndarray) -> dict[str, float]:
        fraction, count = in_goal_pixel_fraction(frame)
        return {"particle_pixels": float(count), "in_goal_pixels": fraction}

    def view_metrics(self, model: np.ndarray, truth: np.ndarray, first: np.ndarray) -> dict[str, float]:
        """The sweep fidelity numbers of one episode at one horizon, from (V, H, W, 3) frames
        (`top` first, then `side`):

        in_goal_error   |in-goal fraction of the frame - that of the recorded frame| (top view);
                        the baseline is the start frame repeated.
        mass            particle pixels of the frame / those of the start frame (top view): 1 when
                        discs are neither lost nor made; the recorded frame's for reference.
        cross_view_gap  |in-goal fraction read from top - the one read from side| of the same
                        frame: views of one scene agree on where the pile is. Recorded frames set
                        the reference, as the two cameras see the goal's edge differently.
        """
        top = {who: in_goal_pixel_fraction(frames[0]) for who, frames in
               (("model", model), ("truth", truth), ("first", first))}
        start_mass = max(top["first"][1], 1)
        out = {"in_goal_error/model": abs(top["model"][0] - top["truth"][0]),
               "in_goal_error/baseline": abs(top["first"][0] - top["truth"][0]),
               "mass/model": top["model"][1] / start_mass,
               "mass/truth": top["truth"][1] / start_mass}
        if len(model) > 1:
            for who, frames in (("model", model), ("truth", truth)):
                side, _ = in_goal_pixel_fraction(frames[1], "side")
                out[f"cross_view_gap/{who}"] = abs(top[who][0] - side)
        return out
