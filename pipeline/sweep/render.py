"""The two cameras of the sweep arena, drawn with PIL: `top` (orthographic, like PushT) and
`side` (a fixed pinhole camera in front of the arena's left corner, looking down at it).

Both draw on a canvas SUPERSAMPLE times the output size and shrink it with a box filter, which
anti-aliases edges the way gym-pusht's 512-pixel canvas does; a 96 x 96 pair costs about a
millisecond. The side view is a real perspective projection of the 3-D scene (discs as spheres
of the discs' radius resting on the floor, pushers as upright cylinders), drawn far to near so
that nearer objects hide farther ones: the views differ in geometry and occlusion, not in crop.

Colours are chosen far apart so that pixels classify by colour alone (pipeline.sweep.vision).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw

from pipeline.sweep.env import GOAL, PARTICLE_RADIUS, PUSHER_RADIUS, WALL_HIGH, WALL_LOW, WORKSPACE

CAMERAS = ("top", "side")
SUPERSAMPLE = 4
FLOOR = (236, 236, 232)
WALL = (150, 150, 150)
GOAL_COLOUR = (160, 214, 160)
PARTICLE = (196, 112, 36)
PUSHERS = ((60, 100, 220), (214, 50, 60))  # arm 0 blue, arm 1 red
LIDS = ((150, 180, 255), (255, 160, 170))  # the pushers' tops in the side view, lighter
BACKDROP = (70, 74, 86)  # what the side camera sees beyond the floor
PUSHER_HEIGHT = 40.0


def _box(image: Image.Image, resolution: int) -> np.ndarray:
    return np.asarray(image.resize((resolution, resolution), Image.Resampling.BOX))


def render_top(pushers: np.ndarray, particles: np.ndarray, resolution: int) -> np.ndarray:
    """(R, R, 3) uint8 orthographic view from above: canvas point p shows at p / 512 * R."""
    size = resolution * SUPERSAMPLE
    scale = size / WORKSPACE
    image = Image.new("RGB", (size, size), WALL)
    draw = ImageDraw.Draw(image)
    draw.rectangle([WALL_LOW * scale, WALL_LOW * scale, WALL_HIGH * scale, WALL_HIGH * scale],
                   fill=FLOOR)
    draw.rectangle([v * scale for v in GOAL], fill=GOAL_COLOUR)
    for p in np.asarray(particles) * scale:
        r = PARTICLE_RADIUS * scale
        draw.ellipse([p[0] - r, p[1] - r, p[0] + r, p[1] + r], fill=PARTICLE)
    for p, colour in zip(np.asarray(pushers) * scale, PUSHERS, strict=True):
        r = PUSHER_RADIUS * scale
        draw.ellipse([p[0] - r, p[1] - r, p[0] + r, p[1] + r], fill=colour)
    return _box(image, resolution)


@dataclass(frozen=True)
class SideCamera:
    """A pinhole camera at `eye` (world: canvas x, canvas y, height z up) with a fixed
    orientation; `focal` and `centre` map its image plane to [-1, 1] across the frame, fitted
    so that the arena fills it."""

    eye: np.ndarray
    rotation: np.ndarray  # (3, 3) rows: camera right, down, forward in world coordinates
    focal: float = 1.0
    centre: np.ndarray = field(default_factory=lambda: np.zeros(2))

    @classmethod
    def looking_at(cls, eye: tuple[float, float, float], target: tuple[float, float, float],
                   margin: float = 0.96) -> SideCamera:
        eye_, target_ = np.array(eye, float), np.array(target, float)
        forward = (target_ - eye_) / np.linalg.norm(target_ - eye_)
        # Canvas y points toward the viewer of the top view, so (x, y, z up) is left-handed:
        # up x forward, not forward x up, points to the camera's right.
        right = np.cross([0.0, 0.0, 1.0], forward)
        right /= np.linalg.norm(right)
        down = -np.cross(right, forward)
        down = down if down[2] < 0 else -down
        camera = cls(eye_, np.stack([right, down, forward]))
        corners = np.array([[x, y, z] for x in (WALL_LOW, WALL_HIGH) for y in (WALL_LOW, WALL_HIGH)
                            for z in (0.0, PUSHER_HEIGHT)])
        uv, _ = camera.project(corners)
        low, high = uv.min(axis=0), uv.max(axis=0)
        focal = 2 * margin / float((high - low).max())
        return cls(eye_, camera.rotation, focal, -focal * (low + high) / 2)

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World points (N, 3) -> image coordinates (N, 2), [-1, 1] across the frame (x right,
        y down), and their depth (N,) along the view axis."""
        local = (np.asarray(points, float) - self.eye) @ self.rotation.T
        depth = local[:, 2]
        return self.centre + self.focal * local[:, :2] / depth[:, None], depth


# In front of the arena's near-left corner, raised: the goal (right) is seen at a slant and
# far, discs near the camera hide those behind them.
SIDE = SideCamera.looking_at(eye=(-60.0, 720.0, 460.0), target=(256.0, 256.0, 0.0))


def render_side(pushers: np.ndarray, particles: np.ndarray, resolution: int,
                camera: SideCamera = SIDE) -> np.ndarray:
    """(R, R, 3) uint8 perspective view of the same scene, far objects drawn first."""
    size = resolution * SUPERSAMPLE
    half = size / 2

    def pixels(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        uv, depth = camera.project(points)
        return half + half * uv, depth

    image = Image.new("RGB", (size, size), BACKDROP)
    draw = ImageDraw.Draw(image)
    for rect, colour in (((WALL_LOW, WALL_LOW, WALL_HIGH, WALL_HIGH), FLOOR), (tuple(GOAL), GOAL_COLOUR)):
        x0, y0, x1, y1 = rect
        quad, _ = pixels(np.array([[x0, y0, 0], [x1, y0, 0], [x1, y1, 0], [x0, y1, 0]]))
        draw.polygon([tuple(p) for p in quad], fill=colour)
    particles = np.asarray(particles, float).reshape(-1, 2)
    pushers = np.asarray(pushers, float).reshape(2, 2)
    centres = np.concatenate([
        np.column_stack([particles, np.full(len(particles), PARTICLE_RADIUS)]),
        np.column_stack([pushers, np.full(2, PUSHER_HEIGHT / 2)])])
    centre_px, depth = pixels(centres)
    # Far to near (painter's algorithm); a stable sort keeps draws deterministic on ties.
    for i in np.argsort(-depth, kind="stable"):
        focal = half * camera.focal / depth[i]
        if i < len(particles):
            r = PARTICLE_RADIUS * focal
            x, y = centre_px[i]
            draw.ellipse([x - r, y - r, x + r, y + r], fill=PARTICLE)
        else:
            arm = i - len(particles)
            _cylinder(draw, pushers[arm], PUSHERS[arm], LIDS[arm], pixels)
    return _box(image, resolution)


def _cylinder(draw: ImageDraw.ImageDraw, base: np.ndarray, colour: tuple[int, int, int],
              lid: tuple[int, int, int], pixels: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]) -> None:
    """An upright cylinder: its projected bottom and top rims (24 points each), the band between
    their leftmost and rightmost points, and a lighter lid."""
    angles = np.linspace(0, 2 * np.pi, 24, endpoint=False)
    rim = base + PUSHER_RADIUS * np.column_stack([np.cos(angles), np.sin(angles)])
    bottom, _ = pixels(np.column_stack([rim, np.zeros(len(rim))]))
    top, _ = pixels(np.column_stack([rim, np.full(len(rim), PUSHER_HEIGHT)]))
    left, right = np.argmin(bottom[:, 0]), np.argmax(bottom[:, 0])
    band = [bottom[left], bottom[right], top[right], top[left]]
    for polygon in (bottom, band):
        draw.polygon([tuple(p) for p in polygon], fill=colour)
    draw.polygon([tuple(p) for p in top], fill=lid)


def render(pushers: np.ndarray, particles: np.ndarray, resolution: int) -> dict[str, np.ndarray]:
    """Both cameras, by name."""
    return {"top": render_top(pushers, particles, resolution),
            "side": render_side(pushers, particles, resolution)}
