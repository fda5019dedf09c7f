"""Choose the next push of the PushT demonstrator by trying candidate pushes in a physics model.

A candidate is a contact point on the T's outline, a push direction near its inward normal and a
push length. Each is tried in a private copy of gym-pusht's physics (pymunk; no rendering), set
to the T pose estimated from pixels and the agent at rest just off the contact point. The
planner keeps the candidate whose predicted end pose is nearest the goal, counting the steps
spent getting there. Pushes are one-step lookahead and re-planned after every push, so the
demonstrator stays closed-loop on whatever frames it is shown (simulator or world model).

Executing a push: reach `start` (clear of the T, then straight in), wait until the agent is
there, then send `targets` (the push, then `SETTLE_STEPS` of easing off) exactly as simulated.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pipeline.pusht.env import (
    ACTION_HIGH,
    ACTION_LOW,
    AGENT_RADIUS,
    CLEARANCE,
    T_OUTLINE,
    block_centre,
    distance_to_block,
    in_bounds,
    plan_path,
    rotation,
    to_world,
)
from pipeline.pusht.scorer import GOAL_POSE, coverage_of_pose

ANGLE_WEIGHT = 100.0  # canvas units of position error worth one radian of angle error
STEP_COST = 0.25  # error units one control step is worth: prefer short plans when gains tie
GAP = 3.0  # the agent waits this far off the contact point before pushing
NEAR = 3.0  # an agent this close to a push's start pushes from where it is, without approach
SETTLE_STEPS = 2  # after a push the agent eases back for this many steps (simulated too)
APPROACH_SPEED = 22.0  # canvas units per step while travelling clear of the T
FINAL_SPEED = 6.0  # ... and on the last straight stretch in toward the contact
EXPECTED_WAIT = 2  # steps a push usually waits at `start` for the agent to settle
MIN_GAIN = 0.1  # a push must bring the T at least this much closer to the goal
SHORTLIST = 8  # contact points whose approach is planned (path planning costs more than a push)
_EDGE_VEC = np.roll(T_OUTLINE, -1, axis=0) - T_OUTLINE
_EDGE_LEN = np.linalg.norm(_EDGE_VEC, axis=1)
_EDGE_NORMAL = np.stack([_EDGE_VEC[:, 1], -_EDGE_VEC[:, 0]], axis=1) / _EDGE_LEN[:, None]  # outward


def _contacts(spacing: float = 12.0, margin: float = 4.0) -> tuple[np.ndarray, np.ndarray]:
    """Block-local contact points (N, 2) along the T's outline and their outward normals (N, 2)."""
    points, normals = [], []
    for start, vec, length, normal in zip(T_OUTLINE, _EDGE_VEC, _EDGE_LEN, _EDGE_NORMAL, strict=True):
        count = max(1, int((length - 2 * margin) // spacing) + 1)
        for t in np.linspace(margin, length - margin, count) / length:
            points.append(start + t * vec)
            normals.append(normal)
    return np.array(points), np.array(normals)


CONTACTS, NORMALS = _contacts()


def angle_error(pose: np.ndarray) -> float:
    return float(np.angle(np.exp(1j * (pose[2] - GOAL_POSE[2]))))


def pose_error(pose: np.ndarray) -> float:
    """Distance of a block pose from the goal: centre offset + ANGLE_WEIGHT x |angle offset|."""
    offset = np.linalg.norm(block_centre(pose) - block_centre(GOAL_POSE))
    return float(offset + ANGLE_WEIGHT * abs(angle_error(pose)))


def coverage_error(pose: np.ndarray) -> float:
    """Uncovered share of the goal in percent: what success is judged on, for the last pushes."""
    return 100.0 * (1.0 - coverage_of_pose(pose))


@dataclass(frozen=True)
class Stage:
    """How pushes are tried at some distance from the goal: coarse and long far away, short and
    judged by coverage itself close by."""

    step: float  # canvas units the target advances per control step
    checkpoints: tuple[int, ...]  # push lengths (in steps) that are evaluated
    turns: tuple[float, ...]  # push directions about the inward normal, degrees
    objective: Callable[[np.ndarray], float]  # error of a pose; lower is better


FAR = Stage(10.0, (1, 2, 3, 4, 6, 8, 10, 13), (-25.0, 0.0, 25.0), pose_error)
MID = Stage(5.0, (1, 2, 3, 4, 5, 6, 8), (-25.0, 0.0, 25.0), pose_error)
FINE = Stage(2.0, (1, 2, 3, 4, 5, 6), (-35.0, -15.0, 0.0, 15.0, 35.0), coverage_error)
FINEST = Stage(1.0, (1, 2, 3, 4, 5, 6, 8), (-40.0, -20.0, 0.0, 20.0, 40.0), coverage_error)


def stages_for(pose: np.ndarray) -> tuple[Stage, ...]:
    """Stages to try in order (the next only when the previous finds no helpful push)."""
    error = pose_error(pose)
    return (FAR, MID) if error > 40.0 else (MID, FINE) if error > 12.0 else (FINE, FINEST)


@dataclass(frozen=True)
class Push:
    """A planned push: approach `start`, then send `targets`; `predicted` is the end pose."""

    start: np.ndarray  # (2,) canvas point just off the contact
    staging: np.ndarray  # (2,) point further out on the contact normal, reached first
    targets: tuple[np.ndarray, ...]  # push then settle targets, one per step
    predicted: np.ndarray  # (3,) block pose expected after the targets
    error: float  # the planning stage's objective at `predicted`


class PushPhysics:
    """gym-pusht's physics (same space, bodies and PD agent) stepped without rendering."""

    def __init__(self) -> None:
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from gym_pusht.envs.pusht import PushTEnv

            self.env = PushTEnv(obs_type="state")
        self.env.reset(seed=0)
        self.substeps = int(1 / (self.env.dt * self.env.control_hz))

    def set(self, agent: np.ndarray, pose: np.ndarray, velocity: np.ndarray | None = None) -> None:
        env = self.env
        env.agent.position = tuple(map(float, agent))
        env.agent.velocity = (0.0, 0.0) if velocity is None else tuple(map(float, velocity))
        env.block.angle = float(pose[2])  # angle first: the position setter then places the origin
        env.block.position = (float(pose[0]), float(pose[1]))
        env.block.velocity, env.block.angular_velocity = (0.0, 0.0), 0.0

    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(agent position, agent velocity, block pose)."""
        env = self.env
        return (np.array(env.agent.position), np.array(env.agent.velocity),
                np.array([*env.block.position, env.block.angle]))

    def step(self, target: np.ndarray) -> None:
        """One control step toward `target`, as PushTEnv.step does (PD on the kinematic agent)."""
        env, agent, space = self.env, self.env.agent, self.env.space
        gx, gy = float(target[0]), float(target[1])
        kp, kv, dt = env.k_p, env.k_v, env.dt
        for _ in range(self.substeps):  # the same arithmetic on floats: Vec2d costs 3x the physics
            (px, py), (vx, vy) = agent.position, agent.velocity
            agent.velocity = (vx + (kp * (gx - px) - kv * vx) * dt, vy + (kp * (gy - py) - kv * vy) * dt)
            space.step(dt)


class PushPlanner:
    """Picks the push that brings the T nearest the goal (see the module docstring)."""

    def __init__(self) -> None:
        self.physics = PushPhysics()

    def _feasible(self, pose: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(start, staging, inward unit normal) of every contact the agent can reach and fit at.

        Staging lies out on the contact's normal, far enough to be clear of the whole T (in the
        crook between stem and crossbar that is further than beside a straight edge).
        """
        out = []
        for point, normal in zip(CONTACTS, NORMALS, strict=True):
            contact = to_world(point, pose)
            outward = rotation(pose[2]) @ normal
            start = contact + outward * (AGENT_RADIUS + GAP)
            for reach in (8.0, 20.0, 35.0, 55.0):
                staging = contact + outward * (CLEARANCE + reach)
                if distance_to_block(staging, pose) >= CLEARANCE + 1.0:
                    break
            else:
                continue
            if not (in_bounds(start) and in_bounds(staging)):
                continue
            line = start + np.linspace(0.0, 1.0, 12)[:, None] * (staging - start)
            if np.all(distance_to_block(line, pose) >= AGENT_RADIUS + 0.5):  # the disc fits
                out.append((start, staging, -outward))
        return out

    def _try(self, agent: np.ndarray, start: np.ndarray, direction: np.ndarray, pose: np.ndarray,
             stage: Stage) -> list[tuple[float, tuple[np.ndarray, ...], np.ndarray]]:
        """(error, targets, end pose) of the push from `start` along `direction` stopped at each
        checkpoint length, easing off for SETTLE_STEPS after it; the agent starts at rest at
        `agent` (`start`, or near it)."""
        physics = self.physics
        physics.set(agent, pose)
        results = []
        pushed: list[np.ndarray] = []
        for k in range(1, max(stage.checkpoints) + 1):
            target = np.clip(start + direction * stage.step * k, ACTION_LOW, ACTION_HIGH)
            physics.step(target)
            pushed.append(target)
            if k not in stage.checkpoints:
                continue
            saved = physics.state()
            ease = np.clip(saved[0] - direction * 3.0, ACTION_LOW, ACTION_HIGH)
            for _ in range(SETTLE_STEPS):
                physics.step(ease)
            end = physics.state()[2]
            results.append((stage.objective(end), (*pushed, *[ease] * SETTLE_STEPS), end))
            physics.set(saved[0], saved[2], saved[1])
        return results

    def plan(self, agent: np.ndarray, pose: np.ndarray) -> Push | None:
        """The best push for the agent at `agent` and the T at `pose`; None when no push is
        predicted to bring the T closer to the goal than it is."""
        for stage in stages_for(pose):
            push = self._plan_stage(agent, pose, stage)
            if push is not None:
                return push
        return None

    def _plan_stage(self, agent: np.ndarray, pose: np.ndarray, stage: Stage) -> Push | None:
        now = stage.objective(pose)
        tried = []
        for start, staging, inward in self._feasible(pose):
            # Already there (e.g. after the previous push): simulate from where the agent is, as
            # fine pushes only just touch the T and a unit or two decides whether they do.
            origin = agent if np.linalg.norm(agent - start) < NEAR else start
            for turn in np.radians(stage.turns):
                direction = rotation(turn) @ inward
                for error, targets, end in self._try(origin, start, direction, pose, stage):
                    if error > now - MIN_GAIN:
                        continue  # time only breaks ties between pushes that help
                    tried.append((error + STEP_COST * len(targets), start, staging, targets, end, error))
        tried.sort(key=lambda c: c[0])
        best: tuple[float, Push] | None = None
        approach: dict[tuple[float, float], float | None] = {}  # per start point
        for cost, start, staging, targets, end, error in tried:
            key = (float(start[0]), float(start[1]))
            if key not in approach:
                if len(approach) == SHORTLIST:
                    break
                approach[key] = self._approach_steps(agent, start, staging, pose)
            steps = approach[key]
            if steps is None:
                continue
            total = cost + STEP_COST * steps
            if best is None or total < best[0]:
                best = (total, Push(start, staging, targets, end, error))
        return None if best is None else best[1]

    @staticmethod
    def _approach_steps(agent: np.ndarray, start: np.ndarray, staging: np.ndarray,
                        pose: np.ndarray) -> float | None:
        """Steps to reach `start` from `agent`, or None when no clear route exists."""
        if np.linalg.norm(agent - start) < NEAR:
            return 0.0
        path = route(agent, staging, pose)
        if path is None:
            return None
        length = np.linalg.norm(np.diff(np.stack([agent, *path]), axis=0), axis=1).sum()
        final = np.linalg.norm(staging - start)
        return float(np.ceil(length / APPROACH_SPEED) + np.ceil(final / FINAL_SPEED) + EXPECTED_WAIT)


def route(agent: np.ndarray, goal: np.ndarray, pose: np.ndarray) -> list[np.ndarray] | None:
    """Waypoints from `agent` to `goal` clear of the T (env.plan_path); when the agent starts
    tangled up with the T (gym-pusht may place it overlapping), first the shortest straight
    move out of the T's clearance in one of 16 directions."""
    path = plan_path(agent, goal, pose)
    if path is not None or distance_to_block(agent, pose) >= CLEARANCE:
        return path
    angles = np.linspace(0.0, 2 * np.pi, 16, endpoint=False)
    for reach in (30.0, 50.0, 80.0, 120.0):
        exits = agent + reach * np.stack([np.cos(angles), np.sin(angles)], axis=1)
        for point in sorted(exits, key=lambda p: -float(distance_to_block(p, pose))):
            if not in_bounds(point) or distance_to_block(point, pose) < CLEARANCE:
                continue
            rest = plan_path(point, goal, pose)
            if rest is not None:
                return [point, *rest]
    return None
