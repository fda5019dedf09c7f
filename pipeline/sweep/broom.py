"""Planning a bimanual sweep: the two pushers side by side as a broom, driven through the pile
toward the goal. Shared by scripted play (primitives.py, from the simulator's disc positions) and
the demonstrator (from the disc pixels it sees).

A sweep picks where to start by how many outside discs the broom's swath from there to the goal
would carry, approaches that start along whichever of three routes (straight, or a detour to
either side) brushes the fewest discs on the way, pushes to a point well inside the goal, and
backs off. Targets are (x0, y0, x1, y1); arm 0 is on the broom's left as it moves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.sweep.env import (
    ACTION_HIGH,
    ACTION_LOW,
    GOAL,
    PARTICLE_RADIUS,
    PUSHER_RADIUS,
    in_goal,
)

HALF_WIDTH = 17.0  # pusher centres this far either side of the broom's centre: a 4-unit gap
FOLDED = 8.0  # half width while travelling: the arms overlap, the broom is narrowest
BEHIND = PUSHER_RADIUS + PARTICLE_RADIUS + 10.0  # a sweep starts this far behind its first disc
DEPTH = 90.0  # how far past the goal's left edge the broom pushes
BACK_OFF = 40.0


def line(start: np.ndarray, end: np.ndarray, speed: float) -> list[np.ndarray]:
    """Points `speed` apart from start (excluded) to end (included); at least one."""
    n = max(1, int(np.ceil(np.linalg.norm(end - start) / speed)))
    return [start + (end - start) * k / n for k in range(1, n + 1)]


def broom(centre: np.ndarray, direction: np.ndarray, half_width: float = HALF_WIDTH) -> np.ndarray:
    """Both pushers' positions (2, 2) for a broom at `centre` moving along unit `direction`."""
    left = np.array([direction[1], -direction[0]])  # y points down: this is the mover's left
    return np.stack([centre + half_width * left, centre - half_width * left])


def clip(points: np.ndarray) -> np.ndarray:
    return np.clip(points, ACTION_LOW, ACTION_HIGH)


def goal_point(start: np.ndarray) -> np.ndarray:
    """Where a sweep from `start` ends: DEPTH past the goal's left edge, at the start's height
    kept 40 units inside the goal's top and bottom."""
    return np.array([GOAL[0] + DEPTH, np.clip(start[1], GOAL[1] + 40.0, GOAL[3] - 40.0)])


def swath_count(points: np.ndarray, start: np.ndarray, end: np.ndarray, half_width: float) -> int:
    """How many of `points` lie in the band a broom sweeps from start to end."""
    if not len(points):
        return 0
    axis = end - start
    length = max(float(np.linalg.norm(axis)), 1e-6)
    axis = axis / length
    rel = points - start
    along = rel @ axis
    across = np.abs(rel @ np.array([axis[1], -axis[0]]))
    reach = half_width + PUSHER_RADIUS
    return int(np.sum((along >= -PARTICLE_RADIUS) & (along <= length) & (across <= reach)))


def brushed(points: np.ndarray, route: list[np.ndarray], half_width: float) -> int:
    """How many of `points` a broom moving along the polyline `route` would touch."""
    reach = half_width + PUSHER_RADIUS + PARTICLE_RADIUS + 4.0
    touched = np.zeros(len(points), bool)
    for a, b in zip(route, route[1:], strict=False):
        ab = b - a
        t = np.clip((points - a) @ ab / max(float(ab @ ab), 1e-9), 0.0, 1.0)
        touched |= np.linalg.norm(points - (a + t[:, None] * ab), axis=1) < reach
    return int(touched.sum())


@dataclass(frozen=True)
class Sweep:
    """One planned sweep: its start and end (the broom's centre) and direction."""

    start: np.ndarray
    end: np.ndarray

    @property
    def direction(self) -> np.ndarray:
        axis = self.end - self.start
        return axis / max(float(np.linalg.norm(axis)), 1e-9)


def choose_sweep(outside: np.ndarray, candidates: np.ndarray, half_width: float = HALF_WIDTH) -> Sweep:
    """The sweep, starting behind one of `candidates`, whose swath carries most of `outside`
    (disc points outside the goal); ties go to the earlier candidate."""
    best, best_count = None, -1
    for point in candidates:
        end = goal_point(point)
        direction = (end - point) / max(float(np.linalg.norm(end - point)), 1e-9)
        start = clip(point - BEHIND * direction)
        count = swath_count(outside, start, end, half_width)
        if count > best_count:
            best, best_count = Sweep(start, end), count
    assert best is not None, "choose_sweep needs at least one candidate"
    return best


def approach(pushers: np.ndarray, sweep: Sweep, points: np.ndarray, speed: float,
             half_width: float = HALF_WIDTH) -> list[np.ndarray]:
    """Targets (4,) that bring the broom from `pushers` (2, 2) to the sweep's start, folded
    (arms together) on the way, along the route that brushes fewest of `points`: straight, a
    detour 90 units to either side, or around the top or the bottom of all the points."""
    here, start = pushers.mean(axis=0), sweep.start
    side = np.array([sweep.direction[1], -sweep.direction[0]])
    middle = (here + start) / 2
    routes = [[here, start]] + [[here, clip(middle + s * 90.0 * side), start] for s in (1.0, -1.0)]
    if len(points):
        for y in (points[:, 1].min() - 45.0, points[:, 1].max() + 45.0):
            if ACTION_LOW <= y <= ACTION_HIGH:
                routes.append([here, np.array([here[0], y]), np.array([start[0], y]), start])
    route = min(routes, key=lambda r: brushed(points, r, FOLDED))
    targets: list[np.ndarray] = []
    arms = pushers.copy()
    for waypoint in route[1:]:
        ends = clip(broom(waypoint, sweep.direction, FOLDED))
        targets += _together(arms, ends, speed)
        arms = ends
    return targets + _together(arms, clip(broom(start, sweep.direction, half_width)), speed)


def _together(arms: np.ndarray, ends: np.ndarray, speed: float) -> list[np.ndarray]:
    """Both arms from `arms` to `ends` (2, 2) in the same number of steps."""
    paths = [line(arms[i], ends[i], speed) for i in range(2)]
    steps = max(len(p) for p in paths)
    paths = [p + [p[-1]] * (steps - len(p)) for p in paths]
    return [np.concatenate([a, b]) for a, b in zip(*paths, strict=True)]


def push(sweep: Sweep, speed: float, half_width: float = HALF_WIDTH) -> list[np.ndarray]:
    """Targets (4,) of the push from the sweep's start to its end, then BACK_OFF back."""
    out = [clip(broom(c, sweep.direction, half_width)).reshape(4)
           for c in line(sweep.start, sweep.end, speed)]
    back = sweep.end - BACK_OFF * sweep.direction
    out += [clip(broom(c, sweep.direction, half_width)).reshape(4)
            for c in line(sweep.end, back, speed)]
    return out


def outside_goal(points: np.ndarray) -> np.ndarray:
    return points[~in_goal(points)] if len(points) else points
