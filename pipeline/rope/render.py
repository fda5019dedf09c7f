"""The rope table's camera, drawn with PIL: `top`, orthographic from above like PushT's.

Drawn on a canvas SUPERSAMPLE times the output size and shrunk with a box filter (anti-aliased
edges, as sweep's cameras). Colours are far apart so that pixels classify by colour alone: the
table, the walls, the clip's two posts, the rope, and the end effector drawn over the rope (it
is above the table).
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from pipeline.rope.env import (
    EFFECTOR_RADIUS,
    POST_RADIUS,
    ROPE_RADIUS,
    WALL_HIGH,
    WALL_LOW,
    WORKSPACE,
    State,
    posts,
)

CAMERAS = ("top",)
SUPERSAMPLE = 4
TABLE = (236, 236, 232)
WALL = (150, 150, 150)
POST = (40, 150, 90)
ROPE = (200, 90, 30)
EFFECTOR = (60, 100, 220)


def render_top(state: State, resolution: int) -> np.ndarray:
    """(R, R, 3) uint8 view from above: canvas point p shows at p / 512 * R."""
    size = resolution * SUPERSAMPLE
    scale = size / WORKSPACE
    image = Image.new("RGB", (size, size), WALL)
    draw = ImageDraw.Draw(image)
    draw.rectangle([WALL_LOW * scale, WALL_LOW * scale, WALL_HIGH * scale, WALL_HIGH * scale], fill=TABLE)
    for centre in posts(state.clip, state.clip_angle) * scale:
        r = POST_RADIUS * scale
        draw.ellipse([centre[0] - r, centre[1] - r, centre[0] + r, centre[1] + r], fill=POST)
    rope = [tuple(p) for p in np.asarray(state.rope) * scale]
    width = max(1, round(2 * ROPE_RADIUS * scale))
    draw.line(rope, fill=ROPE, width=width, joint="curve")
    r = ROPE_RADIUS * scale
    for p in (rope[0], rope[-1]):  # round ends
        draw.ellipse([p[0] - r, p[1] - r, p[0] + r, p[1] + r], fill=ROPE)
    e, r = np.asarray(state.effector) * scale, EFFECTOR_RADIUS * scale
    draw.ellipse([e[0] - r, e[1] - r, e[0] + r, e[1] + r], fill=EFFECTOR)
    return np.asarray(image.resize((resolution, resolution), Image.Resampling.BOX))


def render(state: State, resolution: int) -> dict[str, np.ndarray]:
    """Every camera's frame, by name."""
    return {"top": render_top(state, resolution)}
