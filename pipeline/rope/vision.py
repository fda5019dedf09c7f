"""The rope and the clip seen in pixels alone, from the `top` camera.

Every pixel is given the nearest colour of the renderer's palette (pipeline.rope.render), so
world-model frames, whose colours drift, classify as simulator frames do. The clip's two posts
are found as the two halves of the post pixels split across their principal axis (no labelling
library needed); the rope is through the clip when rope pixels lie on the line between the
posts' inner surfaces.
"""

from __future__ import annotations

import numpy as np

from pipeline.rope import render
from pipeline.rope.env import GAP, POST_RADIUS, ROPE_RADIUS, SEGMENT_LENGTH, SEGMENTS, WORKSPACE

PALETTE = np.array([render.TABLE, render.WALL, render.POST, render.ROPE, render.EFFECTOR], np.float32)
POST_CLASS, ROPE_CLASS, EFFECTOR_CLASS = 2, 3, 4
BAND = 0.75  # pixels: a rope pixel this close to the gap line lies on it
ROPE_LENGTH = SEGMENTS * SEGMENT_LENGTH
WHOLE_SHARE = 0.7  # of a whole rope's ideal pixel count: simulator frames at 96 x 96 show 0.67-0.78
NEAR = 150.0  # canvas units: beyond this from the gap, a rope gets no credit for being close


def classify(frame: np.ndarray) -> np.ndarray:
    """(H, W) int: the index of each pixel's nearest colour in the palette."""
    pixels = np.asarray(frame, np.float32)[..., None, :]
    return np.argmin(((pixels - PALETTE) ** 2).sum(axis=-1), axis=-1)


def _canvas(ys: np.ndarray, xs: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return (np.column_stack([xs, ys]) + 0.5) * (WORKSPACE / np.array([shape[1], shape[0]]))


def post_centres(classes: np.ndarray) -> np.ndarray | None:
    """The posts' centres (2, 2) in canvas units, or None when fewer than 2 post pixels show."""
    ys, xs = np.nonzero(classes == POST_CLASS)
    if len(xs) < 2:
        return None
    points = _canvas(ys, xs, classes.shape)
    centred = points - points.mean(axis=0)
    axis = np.linalg.svd(centred, full_matrices=False)[2][0]
    side = centred @ axis > 0
    if side.all() or not side.any():
        return None
    return np.stack([points[~side].mean(axis=0), points[side].mean(axis=0)])


def gap_reading(frame: np.ndarray) -> tuple[bool, float]:
    """(through, distance): whether rope pixels lie on the clip's gap line, and the canvas
    distance from the gap's centre to the nearest rope pixel (inf when no rope or clip shows)."""
    classes = classify(frame)
    centres = post_centres(classes)
    ys, xs = np.nonzero(classes == ROPE_CLASS)
    if centres is None or not len(xs):
        return False, float("inf")
    a, b = centres
    axis = (b - a) / max(np.linalg.norm(b - a), 1e-9)
    inner_a, inner_b = a + POST_RADIUS * axis, b - POST_RADIUS * axis
    rope = _canvas(ys, xs, classes.shape)
    centre = (a + b) / 2
    distance = float(np.linalg.norm(rope - centre, axis=1).min())
    pixel = WORKSPACE / frame.shape[0]
    span = inner_b - inner_a
    along = np.clip(((rope - inner_a) @ span) / max(span @ span, 1e-9), 0.0, 1.0)
    off = np.linalg.norm(rope - (inner_a + along[:, None] * span), axis=1)
    through = bool(((off < BAND * pixel) & (along > 0.0) & (along < 1.0)).any())
    return through, distance


def frame_score(frame: np.ndarray) -> float:
    """1 with the rope through the clip; else up to 0.5, falling linearly with the nearest rope
    pixel's distance from the gap's centre (0 beyond NEAR canvas units)."""
    through, distance = gap_reading(frame)
    return 1.0 if through else 0.5 * max(0.0, 1.0 - max(distance - GAP / 2, 0.0) / NEAR)


def rope_mask(frame: np.ndarray) -> np.ndarray:
    """(H, W) bool: the pixels that show the rope."""
    return classify(frame) == ROPE_CLASS


class RopeAnalyzer:
    """`--object-mask rope`: the rope's pixels, how much it still looks like one rope, and
    health probes, of a `top` frame."""

    name = "rope"

    def object_mask(self, frame: np.ndarray) -> np.ndarray:
        return rope_mask(frame)

    def shape_score(self, frame: np.ndarray) -> float:
        """How much the rope still looks like itself, in [0, 1]: its pixel count against a whole
        rope's (its length times its drawn width), 1 when at least that many show. A rope a
        model thins, breaks up or erases shows fewer."""
        pixel = WORKSPACE / frame.shape[0]
        whole = ROPE_LENGTH * max(2 * ROPE_RADIUS, pixel) / pixel**2
        return float(min(1.0, rope_mask(frame).sum() / (WHOLE_SHARE * whole)))

    def probe(self, frame: np.ndarray) -> dict[str, float]:
        through, distance = gap_reading(frame)
        return {"rope_pixels": float(rope_mask(frame).sum()), "through_clip": float(through),
                "gap_distance": distance if np.isfinite(distance) else -1.0}
