"""The rope-routing table in pymunk, seen from above: a rope of linked segments, one end held by
an end effector, and a clip (two posts with a gap) fixed on the table.

Coordinates are canvas units as in PushT and sweep: a 512 x 512 workspace, x to the right, y down
(image rows of the top camera), walls at 5 and 506.

The rope is SEGMENTS capsules of SEGMENT_LENGTH, consecutive ones pinned at their shared end, with
a damped rotary spring at every joint for bending stiffness; the table's friction is the space's
damping, so a rope that is let go slows and stops where it lies. Bead 0's end is pinned to the end
effector, a kinematic disc driven toward its 2-D target by gym-pusht's PD controller (k_p 100, k_v
20, 10 substeps of 10 ms per 0.1 s step). The clip's posts are static discs; the rope collides with
them and with the walls, the end effector with nothing (it is above the rope).

**Inserted** means the rope passes through the clip's gap: some segment crosses the line between
the posts' centres, between the posts. The same start and actions give the same rope, bit for bit
(pymunk is deterministic for one order of operations), so ground truth can replay any stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

WORKSPACE = 512.0
WALL_LOW, WALL_HIGH = 5.0, 506.0
SEGMENTS = 20
SEGMENT_LENGTH = 14.0  # the rope is 280 units long
ROPE_RADIUS = 4.0  # half its thickness
EFFECTOR_RADIUS = 12.0
POST_RADIUS = 10.0
GAP = 22.0  # between the posts' surfaces: wider than the rope (8), narrower than the effector
ACTION_LOW, ACTION_HIGH = 20.0, WORKSPACE - 20.0
TABLE_DAMPING = 0.05  # share of velocity kept after one second of sliding on the table
BEND_STIFFNESS, BEND_DAMPING = 2.0e4, 4.0e2
SEGMENT_MASS = 0.2

K_P, K_V = 100.0, 20.0  # gym-pusht's PD gains
DT = 0.01
SUBSTEPS = 10  # 10 x 10 ms = one 10 Hz control step


@dataclass
class State:
    """The table at one instant: the effector (2,), the rope's SEGMENTS + 1 points (held end
    first), the clip's centre (2,) and the angle of its gap's axis (radians; 0: the posts side by
    side along x, so the rope passes along y)."""

    effector: np.ndarray
    rope: np.ndarray
    clip: np.ndarray
    clip_angle: float

    @property
    def inserted(self) -> bool:
        return bool(in_clip(self.rope, self.clip, self.clip_angle))


def posts(clip: np.ndarray, angle: float) -> np.ndarray:
    """The two posts' centres (2, 2)."""
    axis = np.array([np.cos(angle), np.sin(angle)])
    half = (GAP / 2 + POST_RADIUS) * axis
    return np.stack([clip - half, clip + half])


def in_clip(rope: np.ndarray, clip: np.ndarray, angle: float) -> bool:
    """Whether the rope polyline crosses the segment between the posts' inner surfaces."""
    a, b = posts(clip, angle)
    axis = (b - a) / np.linalg.norm(b - a)
    a, b = a + POST_RADIUS * axis, b - POST_RADIUS * axis
    p, q = np.asarray(rope[:-1]), np.asarray(rope[1:])

    def side(u: np.ndarray, v: np.ndarray, w: np.ndarray) -> np.ndarray:
        return np.sign((v[..., 0] - u[..., 0]) * (w[..., 1] - u[..., 1])
                       - (v[..., 1] - u[..., 1]) * (w[..., 0] - u[..., 0]))

    crosses = (side(a, b, p) != side(a, b, q)) & (side(p, q, a) != side(p, q, b))
    return bool(crosses.any())


def draw_start(rng: np.random.Generator) -> State:
    """A random start: the clip somewhere in the table's right half at a random angle, the rope
    lying in a gentle curve in the left half, its held end at the effector."""
    clip = np.array([rng.uniform(300, 420), rng.uniform(150, 360)])
    angle = float(rng.uniform(-0.6, 0.6))
    start = np.array([rng.uniform(70, 180), rng.uniform(120, 390)])
    heading = rng.uniform(-0.5, 0.5) + (np.pi / 2 if start[1] < 256 else -np.pi / 2)
    bend = rng.uniform(-0.06, 0.06)
    points = [start]
    for i in range(SEGMENTS):
        direction = heading + bend * i
        points.append(points[-1] + SEGMENT_LENGTH * np.array([np.cos(direction), np.sin(direction)]))
    rope = np.clip(np.array(points), WALL_LOW + 10, WALL_HIGH - 10)
    return State(effector=rope[0].copy(), rope=rope, clip=clip, clip_angle=angle)


class RopeSim:
    """The physics of one table: `reset(seed)` or `reset_to(state)`, then `step` 2-D effector
    targets. Rendering is separate (pipeline.rope.render)."""

    def __init__(self) -> None:
        self._space: Any = None  # a pymunk.Space once reset (pymunk is imported lazily)
        self._effector: Any = None
        self._links: list = []
        self._clip = np.zeros(2)
        self._angle = 0.0

    def reset(self, seed: int) -> State:
        return self.reset_to(draw_start(np.random.default_rng(int(seed))))

    def reset_to(self, state: State) -> State:
        """Start from a given state (the rope's points are re-linked at SEGMENT_LENGTH spacing
        along them); a new space each time, so an episode depends only on its start and actions."""
        from pipeline.tasks.extras import require

        pymunk = require("pymunk", "rope")

        space = pymunk.Space()
        space.gravity = (0.0, 0.0)
        space.damping = TABLE_DAMPING
        space.iterations = 30
        corners = [(WALL_LOW, WALL_LOW), (WALL_HIGH, WALL_LOW), (WALL_HIGH, WALL_HIGH),
                   (WALL_LOW, WALL_HIGH)]
        for a, b in zip(corners, corners[1:] + corners[:1], strict=True):
            wall = pymunk.Segment(space.static_body, a, b, 2.0)
            wall.friction = 0.3
            space.add(wall)
        self._clip, self._angle = np.asarray(state.clip, np.float64), float(state.clip_angle)
        for centre in posts(self._clip, self._angle):
            post = pymunk.Circle(space.static_body, POST_RADIUS, tuple(centre))
            post.friction = 0.3
            space.add(post)
        effector = pymunk.Body(body_type=pymunk.Body.KINEMATIC)
        effector.position = tuple(np.asarray(state.effector, np.float64))
        space.add(effector)
        points = _relinked(np.asarray(state.rope, np.float64))
        links = []
        rope_filter = pymunk.ShapeFilter(group=1)  # the rope does not collide with itself
        for i in range(SEGMENTS):
            a, b = points[i], points[i + 1]
            body = pymunk.Body(SEGMENT_MASS, pymunk.moment_for_segment(SEGMENT_MASS, (0, 0),
                                                                        tuple(b - a), ROPE_RADIUS))
            body.position = tuple(a)
            shape = pymunk.Segment(body, (0, 0), tuple(b - a), ROPE_RADIUS)
            shape.friction = 0.3
            shape.filter = rope_filter
            space.add(body, shape)
            links.append((body, b - a))
        held = pymunk.PivotJoint(effector, links[0][0], tuple(points[0]))
        space.add(held)
        for (first, end), (second, _) in zip(links, links[1:], strict=False):
            joint = pymunk.PivotJoint(first, second, tuple(np.array(first.position) + end))
            joint.collide_bodies = False
            spring = pymunk.DampedRotarySpring(first, second, second.angle - first.angle,
                                               BEND_STIFFNESS, BEND_DAMPING)
            space.add(joint, spring)
        self._space, self._effector, self._links = space, effector, links
        return self.state()

    def step(self, action: np.ndarray) -> State:
        """Drive the effector toward its target (2,) for 0.1 s."""
        if self._space is None:
            raise RuntimeError("call reset() before step()")
        target = np.clip(np.asarray(action, np.float64).reshape(2), ACTION_LOW, ACTION_HIGH)
        for _ in range(SUBSTEPS):
            position = np.array(self._effector.position)
            velocity = np.array(self._effector.velocity)
            self._effector.velocity = tuple(velocity + (K_P * (target - position) - K_V * velocity) * DT)
            self._space.step(DT)
        return self.state()

    def state(self) -> State:
        points = [np.array(body.local_to_world((0, 0))) for body, _ in self._links]
        body, end = self._links[-1]
        points.append(np.array(body.local_to_world(tuple(end))))
        return State(effector=np.array(self._effector.position), rope=np.array(points),
                     clip=self._clip.copy(), clip_angle=self._angle)


def _relinked(points: np.ndarray) -> np.ndarray:
    """SEGMENTS + 1 points SEGMENT_LENGTH apart by arc length along the polyline `points`,
    continued straight past its end when it is shorter than the rope."""
    steps = np.linalg.norm(np.diff(points, axis=0), axis=1)
    keep = np.concatenate([[True], steps > 1e-9])
    points, steps = points[keep], steps[steps > 1e-9]
    if len(points) < 2:
        points, steps = np.array([points[0], points[0] + [0.0, 1.0]]), np.array([1.0])
    along = np.concatenate([[0.0], np.cumsum(steps)])
    wanted = SEGMENT_LENGTH * np.arange(SEGMENTS + 1)
    out = np.stack([np.interp(wanted, along, points[:, k]) for k in range(2)], axis=1)
    tail = (points[-1] - points[-2]) / steps[-1]
    beyond = wanted > along[-1]
    out[beyond] = points[-1] + (wanted[beyond] - along[-1])[:, None] * tail
    return out
