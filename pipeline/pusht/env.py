"""gym-pusht 0.1.8 behind a small typed wrapper, the T's geometry, and paths around the T.

Coordinates are gym-pusht's canvas units: a 512 x 512 workspace, x to the right, y down (image
rows). gym-pusht draws every frame on a 512 x 512 canvas and resizes it to the observation size
with cv2 (bilinear), so any resolution renders the same scene; a canvas point p shows near pixel
p / 512 * R.

The physics is quasi-static: the space's damping of 0 removes all velocity every substep, so the
block moves only while the agent (a kinematic disc of radius 15 driven by a PD controller toward
the action target, 10 substeps of 10 ms per step) pushes it.

Block pose is (x, y, angle) of the block body's origin (the middle of the crossbar's outer edge);
the T's local point v appears at (x, y) + R(angle) v. `Observation.block_pose` keeps gym-pusht's
unwrapped angle (continuous across turns, what primitives measure rotations with);
`wrapped_pose` maps it into [0, 2 pi) as gym-pusht's `obs_type="state"` does.
"""

from __future__ import annotations

import heapq
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

WORKSPACE = 512.0
AGENT_RADIUS = 15.0
# Agent targets stay this far inside the walls (walls at 5 and 506, the agent's radius 15).
ACTION_LOW, ACTION_HIGH = 25.0, WORKSPACE - 25.0
SUCCESS_COVERAGE = 0.95  # gym-pusht's success threshold

# The T in body-local units (gym-pusht add_tee, scale 30): crossbar and stem rectangles as
# (xmin, ymin, xmax, ymax), and the union's outline, clockwise on screen (y points down).
T_RECTS = np.array([[-60.0, 0.0, 60.0, 30.0], [-15.0, 30.0, 15.0, 120.0]])
T_OUTLINE = np.array([[-60.0, 0.0], [60.0, 0.0], [60.0, 30.0], [15.0, 30.0],
                      [15.0, 120.0], [-15.0, 120.0], [-15.0, 30.0], [-60.0, 30.0]])
T_COG = np.array([0.0, 45.0])  # gym-pusht's centre of gravity (mean of the two rectangles')
T_RADIUS = float(np.max(np.linalg.norm(T_OUTLINE - T_COG, axis=1)))  # ~76.5: bounding circle
CLEARANCE = AGENT_RADIUS + 6.0  # planned paths keep the agent's centre this far from the T
RING = T_RADIUS + CLEARANCE + 10.0  # detour waypoints lie on this circle about the T's centre


def rotation(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s], [s, c]])


def to_world(local: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """Block-local points (..., 2) to canvas points, for block pose (x, y, angle)."""
    return np.asarray(local) @ rotation(pose[2]).T + pose[:2]


def to_local(points: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """Canvas points (..., 2) to block-local points."""
    return (np.asarray(points) - pose[:2]) @ rotation(pose[2])


def block_centre(pose: np.ndarray) -> np.ndarray:
    """Canvas position (2,) of the T's centre of gravity, the point it turns about."""
    return to_world(T_COG, pose)


def distance_to_block(points: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """Distance (...,) from canvas points (..., 2) to the T; 0 inside it."""
    local = to_local(points, pose)[..., None, :]  # (..., 1, 2) against the 2 rectangles
    below = T_RECTS[:, :2] - local
    above = local - T_RECTS[:, 2:]
    gap = np.maximum(np.maximum(below, above), 0.0)  # (..., 2, 2)
    return np.min(np.linalg.norm(gap, axis=-1), axis=-1)


def wrapped_pose(pose: np.ndarray) -> np.ndarray:
    """Block pose with the angle in [0, 2 pi), float32 (3,)."""
    return np.array([pose[0], pose[1], np.mod(pose[2], 2 * np.pi)], dtype=np.float32)


# -- motion planning around the T --------------------------------------------------------


def in_bounds(point: np.ndarray, low: float = ACTION_LOW, high: float = ACTION_HIGH) -> bool:
    return bool(np.all(point >= low) and np.all(point <= high))


def _segment_clear(a: np.ndarray, b: np.ndarray, pose: np.ndarray) -> bool:
    n = int(np.ceil(np.linalg.norm(b - a) / 3.0)) + 2
    points = a + np.linspace(0.0, 1.0, n)[:, None] * (b - a)
    return bool(np.all(distance_to_block(points, pose) >= CLEARANCE))


def _escape(start: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """A point out of the T's clearance zone, moving straight away from the nearest surface."""
    eps = np.eye(2)
    grad = np.array([distance_to_block(start + e, pose) - distance_to_block(start - e, pose)
                     for e in eps])
    if np.linalg.norm(grad) < 1e-6:  # inside the T: head away from its centre
        grad = start - block_centre(pose)
    direction = grad / max(np.linalg.norm(grad), 1e-9)
    point = start
    for _ in range(20):
        if distance_to_block(point, pose) >= CLEARANCE:
            break
        point = np.clip(point + 4.0 * direction, ACTION_LOW, ACTION_HIGH)
    return point


def plan_path(start: np.ndarray, goal: np.ndarray, pose: np.ndarray) -> list[np.ndarray] | None:
    """Waypoints (excluding `start`) that reach `goal` keeping CLEARANCE from the T.

    Straight when clear, otherwise the shortest route through 16 points on a ring about the T;
    None when no route exists (e.g. the T blocks a corridor against a wall).
    """
    prefix: list[np.ndarray] = []
    if distance_to_block(start, pose) < CLEARANCE:
        start = _escape(start, pose)
        prefix = [start]
    if _segment_clear(start, goal, pose):
        return [*prefix, goal]
    centre = block_centre(pose)
    angles = np.linspace(0.0, 2 * np.pi, 16, endpoint=False)
    ring = centre + RING * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    nodes = [start, goal] + [p for p in ring if in_bounds(p)]
    # Dijkstra over the visibility graph of at most 18 nodes.
    best = {0: 0.0}
    previous: dict[int, int] = {}
    queue = [(0.0, 0)]
    done: set[int] = set()
    while queue:
        cost, i = heapq.heappop(queue)
        if i in done:
            continue
        done.add(i)
        if i == 1:
            break
        for j in range(1, len(nodes)):
            if j in done or not _segment_clear(nodes[i], nodes[j], pose):
                continue
            new = cost + float(np.linalg.norm(nodes[j] - nodes[i]))
            if new < best.get(j, np.inf):
                best[j], previous[j] = new, i
                heapq.heappush(queue, (new, j))
    if 1 not in done:
        return None
    route, i = [], 1
    while i != 0:
        route.append(nodes[i])
        i = previous[i]
    return [*prefix, *route[::-1]]


def follow(start: np.ndarray, waypoints: list[np.ndarray], speed: float) -> Iterator[np.ndarray]:
    """Targets `speed` apart along the polyline start -> waypoints, ending on the last one."""
    points = np.stack([start, *waypoints])
    cumulative = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))])
    total = cumulative[-1]
    n = max(1, int(np.ceil(total / speed)))
    for distance in np.linspace(total / n, total, n):
        yield np.array([np.interp(distance, cumulative, points[:, k]) for k in range(2)])


@dataclass(frozen=True)
class Observation:
    """What the simulator shows at one instant."""

    frame: np.ndarray  # (R, R, 3) uint8
    agent: np.ndarray  # (2,) float64, agent position
    block_pose: np.ndarray  # (3,) float64, x, y, unwrapped angle
    coverage: float  # fraction of the goal region the block covers, in [0, 1]

    @property
    def success(self) -> bool:
        return self.coverage > SUCCESS_COVERAGE


class PushTSim:
    """One gym-pusht environment rendering R x R frames; `reset` then `step` agent targets.

    The wrapper talks to the unwrapped env: gym's TimeLimit (300 steps) and the termination on
    success would otherwise cut the scripted episodes short. A reset rebuilds the physics space,
    so an episode depends only on its seed and actions, never on earlier episodes.
    """

    def __init__(self, resolution: int = 96) -> None:
        # pygame prints a banner to stdout on import unless told not to.
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pygame's pkg_resources deprecation notice
            import gym_pusht  # noqa: F401  (registers the env)
            import gymnasium as gym

            self._env: Any = gym.make("gym_pusht/PushT-v0", obs_type="pixels_agent_pos",
                                      render_mode="rgb_array", observation_width=resolution,
                                      observation_height=resolution).unwrapped
        self.resolution = resolution
        self._last: Observation | None = None

    @property
    def last(self) -> Observation:
        """The most recent observation (after `reset` or `step`)."""
        if self._last is None:
            raise RuntimeError("call reset() before reading the simulator's state")
        return self._last

    def reset(self, seed: int) -> Observation:
        """Random agent position and block pose drawn by gym-pusht from `seed`."""
        obs, info = self._env.reset(seed=int(seed))
        # reset() reports no coverage; compute it the way step() does.
        return self._observe(obs, info, float(self._env._get_coverage()))

    def reset_to(self, agent: np.ndarray, block_pose: np.ndarray) -> Observation:
        """Start from a recorded state: agent position (2,) and block_pose (x, y, angle) exactly.

        gym-pusht's reset_to_state places the origin at (x, y) and then turns the block about its
        centre of gravity, which moves the origin; the position passed in compensates for that.
        """
        pose = np.asarray(block_pose, dtype=np.float64)
        origin = pose[:2] - T_COG + rotation(pose[2]) @ T_COG
        state = [*np.asarray(agent, dtype=np.float64), *origin, pose[2]]
        obs, info = self._env.reset(options={"reset_to_state": state})
        return self._observe(obs, info, float(self._env._get_coverage()))

    def step(self, target: np.ndarray) -> Observation:
        """Drive the agent toward `target` (2,) for one control step (0.1 s)."""
        action = np.clip(np.asarray(target, dtype=np.float64), 0.0, WORKSPACE)
        obs, _, _, _, info = self._env.step(action)
        return self._observe(obs, info, float(info["coverage"]))

    def close(self) -> None:
        self._env.close()

    def _observe(self, obs: dict, info: dict, coverage: float) -> Observation:
        frame = np.ascontiguousarray(obs["pixels"], dtype=np.uint8)
        self._last = Observation(frame=frame,
                                 agent=np.asarray(obs["agent_pos"], dtype=np.float64).copy(),
                                 block_pose=np.asarray(info["block_pose"], dtype=np.float64).copy(),
                                 coverage=float(np.clip(coverage, 0.0, 1.0)))
        return self._last
