"""The sweep arena in pymunk: two circular pushers, a pile of small discs, a goal on the floor.

Coordinates are canvas units as in PushT: a 512 x 512 workspace, x to the right, y down (image
rows of the top camera), walls at 5 and 506. The goal is a fixed square against the right wall.

Each pusher is a kinematic disc driven toward its target by gym-pusht's PD controller (k_p 100,
k_v 20, 10 substeps of 10 ms per 0.1 s control step). The pushers pass through each other (two
kinematic bodies never collide), so the arms may cross. The discs are dynamic and quasi-static:
the space's damping of 0 removes their velocity every substep, as a high-friction floor would,
so a disc moves only while something pushes it and the pile keeps the shape it is pushed into.

A pile is drawn from a seed: 40-80 discs packed into an ellipse of random size, aspect and
orientation, left of the goal and clear of the walls, with both pushers placed clear of it. Everything is
deterministic for a seed and an action sequence (pymunk is, given the same order of operations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

WORKSPACE = 512.0
WALL_LOW, WALL_HIGH = 5.0, 506.0
PUSHER_RADIUS = 15.0
PARTICLE_RADIUS = 9.0
MIN_PARTICLES, MAX_PARTICLES = 40, 80
# Pusher targets stay this far inside the walls.
ACTION_LOW, ACTION_HIGH = 25.0, WORKSPACE - 25.0
# The goal region (xmin, ymin, xmax, ymax): a square against the right wall.
GOAL = np.array([296.0, 160.0, 506.0, 352.0])
GOAL_CENTRE = np.array([(GOAL[0] + GOAL[2]) / 2, (GOAL[1] + GOAL[3]) / 2])
PILE_MARGIN = 45.0  # a new pile's discs keep this far from the walls: room to get behind them
SUCCESS_FRACTION = 0.9  # an episode succeeds when this share of the discs lies in the goal

K_P, K_V = 100.0, 20.0  # gym-pusht's PD gains
DT = 0.01
SUBSTEPS = 10  # 10 x 10 ms = one 10 Hz control step


def in_goal(points: np.ndarray) -> np.ndarray:
    """Whether each canvas point (..., 2) lies inside the goal region."""
    points = np.asarray(points)
    return ((points[..., 0] >= GOAL[0]) & (points[..., 0] <= GOAL[2])
            & (points[..., 1] >= GOAL[1]) & (points[..., 1] <= GOAL[3]))


def in_goal_fraction(particles: np.ndarray) -> float:
    """The task's true score of one instant: the share of disc centres inside the goal."""
    return float(in_goal(particles).mean()) if len(particles) else 0.0


def draw_pile(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random start: pusher positions (2, 2) and disc centres (N, 2), N in [40, 80].

    Discs sit on a jittered hexagonal grid (no overlaps), the N grid points nearest a random
    centre in a random elliptical metric, so piles differ in size, aspect and orientation.
    """
    count = int(rng.integers(MIN_PARTICLES, MAX_PARTICLES + 1))
    pitch = 2 * PARTICLE_RADIUS + 1.5
    rows, cols = np.mgrid[-12:13, -12:13]
    grid = np.stack([(cols + 0.5 * (rows % 2)) * pitch, rows * pitch * np.sqrt(3) / 2], axis=-1)
    grid = grid.reshape(-1, 2)
    angle, aspect = rng.uniform(0, np.pi), rng.uniform(1.0, 2.5)
    c, s = np.cos(angle), np.sin(angle)
    local = grid @ np.array([[c, -s], [s, c]])
    metric = local[:, 0] ** 2 + (aspect * local[:, 1]) ** 2
    pile = grid[np.argsort(metric, kind="stable")[:count]]
    pile = pile + rng.uniform(-0.7, 0.7, pile.shape)
    low = np.array([WALL_LOW, WALL_LOW]) + PILE_MARGIN - pile.min(axis=0)
    high = np.array([GOAL[0] - 20.0, WALL_HIGH - PILE_MARGIN]) - pile.max(axis=0)
    centre = rng.uniform(np.minimum(low, high), np.maximum(low, high))
    particles = pile + centre
    pushers = np.empty((2, 2))
    for arm in range(2):
        for _ in range(200):
            pushers[arm] = rng.uniform(ACTION_LOW, ACTION_HIGH, 2)
            clear = np.linalg.norm(particles - pushers[arm], axis=1).min()
            if clear > PUSHER_RADIUS + PARTICLE_RADIUS + 8:
                break
    return pushers, particles


@dataclass(frozen=True)
class State:
    """The simulator at one instant."""

    pushers: np.ndarray  # (2, 2) float64, pusher centres (arm 0, arm 1)
    particles: np.ndarray  # (N, 2) float64, disc centres

    @property
    def in_goal(self) -> float:
        return in_goal_fraction(self.particles)


class SweepSim:
    """The physics of one arena: `reset(seed)` or `reset_to(pushers, particles)`, then `step`
    4-D targets (x0, y0, x1, y1). Rendering is separate (pipeline.sweep.render)."""

    def __init__(self) -> None:
        self._space: Any = None  # a pymunk.Space once reset (pymunk is imported lazily)
        self._pushers: list = []
        self._particles: list = []

    def reset(self, seed: int) -> State:
        pushers, particles = draw_pile(np.random.default_rng(int(seed)))
        return self.reset_to(pushers, particles)

    def reset_to(self, pushers: np.ndarray, particles: np.ndarray) -> State:
        """Start from given pusher (2, 2) and disc (N, 2) positions; a new space each time, so an
        episode depends only on its start and actions."""
        from pipeline.tasks.extras import require

        pymunk = require("pymunk", "sweep")

        pushers = np.asarray(pushers, np.float64).reshape(2, 2)
        particles = np.asarray(particles, np.float64).reshape(-1, 2)
        space = pymunk.Space()
        space.gravity = (0.0, 0.0)
        space.damping = 0.0
        corners = [(WALL_LOW, WALL_LOW), (WALL_HIGH, WALL_LOW), (WALL_HIGH, WALL_HIGH),
                   (WALL_LOW, WALL_HIGH)]
        for a, b in zip(corners, corners[1:] + corners[:1], strict=True):
            wall = pymunk.Segment(space.static_body, a, b, 2.0)
            wall.friction = 0.5
            space.add(wall)
        self._pushers = []
        for position in pushers:
            body = pymunk.Body(body_type=pymunk.Body.KINEMATIC)
            body.position = tuple(position)
            shape = pymunk.Circle(body, PUSHER_RADIUS)
            shape.friction = 0.5
            space.add(body, shape)
            self._pushers.append(body)
        self._particles = []
        for position in particles:
            body = pymunk.Body(1.0, pymunk.moment_for_circle(1.0, 0.0, PARTICLE_RADIUS))
            body.position = tuple(position)
            shape = pymunk.Circle(body, PARTICLE_RADIUS)
            shape.friction = 0.5
            space.add(body, shape)
            self._particles.append(body)
        self._space = space
        return self.state()

    def step(self, action: np.ndarray) -> State:
        """Drive both pushers toward their targets (4,) = (x0, y0, x1, y1) for 0.1 s."""
        if self._space is None:
            raise RuntimeError("call reset() before step()")
        targets = np.clip(np.asarray(action, np.float64).reshape(2, 2), ACTION_LOW, ACTION_HIGH)
        for _ in range(SUBSTEPS):
            for body, target in zip(self._pushers, targets, strict=True):
                position = np.array(body.position)
                velocity = np.array(body.velocity)
                acceleration = K_P * (target - position) - K_V * velocity
                body.velocity = tuple(velocity + acceleration * DT)
            self._space.step(DT)
        return self.state()

    def state(self) -> State:
        return State(pushers=np.array([tuple(b.position) for b in self._pushers]),
                     particles=np.array([tuple(b.position) for b in self._particles]).reshape(-1, 2))
