"""Scripted play for PushT, after the Interactive World Simulator paper's play data: linear
pushes, rotations, small random contacts, contact-free motions, and chains of them.

A primitive is a generator of agent targets: it yields one (2,) target per control step, the
caller steps the simulator in between, and the primitive reads the new state from `sim.last`
(the rotation is closed-loop). It returns its outcome: True when it did what it meant to (the
block travelled, turned, was touched, or was left alone), False when not, None when it found no
feasible plan and only moved the agent elsewhere. Every primitive yields at least one target.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass

import numpy as np

from pipeline.pusht.env import (
    ACTION_HIGH,
    ACTION_LOW,
    AGENT_RADIUS,
    CLEARANCE,
    T_COG,
    T_OUTLINE,
    T_RADIUS,
    Observation,
    PushTSim,
    block_centre,
    distance_to_block,
    follow,
    in_bounds,
    plan_path,
    rotation,
    to_world,
)

Primitive = Generator[np.ndarray, None, bool | None]

GAP = 4.0  # the agent stops this far short of the contact point before pushing
PLAN_TRIES = 30
# Keep the block's centre this far inside the canvas so pushes do not pin it against a wall.
BLOCK_LOW, BLOCK_HIGH = T_RADIUS + 15.0, 512.0 - T_RADIUS - 15.0
CANVAS_CENTRE = np.array([256.0, 256.0])
# Outline edges of the T with their outward normals (x right, y down: normal = (dy, -dx)).
_EDGE_START = T_OUTLINE
_EDGE_VEC = np.roll(T_OUTLINE, -1, axis=0) - T_OUTLINE
_EDGE_LEN = np.linalg.norm(_EDGE_VEC, axis=1)
_EDGE_NORMAL = np.stack([_EDGE_VEC[:, 1], -_EDGE_VEC[:, 0]], axis=1) / _EDGE_LEN[:, None]


def _hold(target: np.ndarray, steps: int) -> Iterator[np.ndarray]:
    for _ in range(steps):
        yield target


def _sample_contact(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A block-local point on the T's outline, away from corners, and its outward normal."""
    edge = int(rng.choice(len(_EDGE_LEN), p=_EDGE_LEN / _EDGE_LEN.sum()))
    margin = min(8.0, _EDGE_LEN[edge] / 4)
    t = rng.uniform(margin, _EDGE_LEN[edge] - margin) / _EDGE_LEN[edge]
    return _EDGE_START[edge] + t * _EDGE_VEC[edge], _EDGE_NORMAL[edge]


def approach(sim: PushTSim, pose: np.ndarray, point: np.ndarray, normal: np.ndarray,
              ) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """Pre-contact position (canvas) off local `point` along `normal`, and a path to it: clear
    of the T to a staging point further out on the normal, then straight in along it."""
    contact_point = to_world(point, pose)
    outward = rotation(pose[2]) @ normal
    start = contact_point + outward * (AGENT_RADIUS + GAP)
    staging = contact_point + outward * (CLEARANCE + 8.0)
    if not (in_bounds(start) and in_bounds(staging)):
        return None
    line = start + np.linspace(0.0, 1.0, 8)[:, None] * (staging - start)
    if np.any(distance_to_block(line, pose) < AGENT_RADIUS + 1.0):
        return None  # inside a concave corner of the T: the agent would not fit
    path = plan_path(sim.last.agent, staging, pose)
    return None if path is None else (start, [*path, start])


def first_approach(sim: PushTSim, pose: np.ndarray,
                   draw: Callable[[], tuple[np.ndarray, np.ndarray]],
                   ) -> tuple[np.ndarray, list[np.ndarray], np.ndarray] | None:
    """(pre-contact position, path to it, local normal) of the first of PLAN_TRIES contacts
    `draw()` gives (block-local point, outward normal) that the agent can reach; None if none."""
    for _ in range(PLAN_TRIES):
        point, normal = draw()
        plan = approach(sim, pose, point, normal)
        if plan is not None:
            return plan[0], plan[1], normal
    return None


def _retreat(sim: PushTSim, away: np.ndarray) -> Iterator[np.ndarray]:
    """Back the agent off the block by about one clearance along the unit vector `away`."""
    yield np.clip(sim.last.agent + away * (CLEARANCE + 8.0), ACTION_LOW, ACTION_HIGH)


def push(sim: PushTSim, rng: np.random.Generator) -> Primitive:
    """Linear push: approach a contact point, push 100-160 canvas units (the crossbar is 120
    long; the paper pushes ~15 cm) along a direction within 20 degrees of the inward normal.
    Succeeds when the block's centre travels >= 40% of that."""
    pose0 = sim.last.block_pose
    for _ in range(PLAN_TRIES):
        point, normal = _sample_contact(rng)
        direction = rotation(pose0[2] + rng.uniform(-0.35, 0.35)) @ -normal
        length = rng.uniform(100.0, 160.0)
        centre = block_centre(pose0)
        inward = (CANVAS_CENTRE - centre) / max(np.linalg.norm(CANVAS_CENTRE - centre), 1e-9)
        # Stay off the walls, unless the push frees a block that is already near one.
        if not (in_bounds(centre + direction * length, BLOCK_LOW, BLOCK_HIGH)
                or direction @ inward > 0.5):
            continue
        plan = approach(sim, pose0, point, normal)
        if plan is not None and in_bounds(plan[0] + direction * (GAP + length)):
            break
    else:
        yield from reposition(sim, rng)
        return None
    start, path = plan
    yield from follow(sim.last.agent, path, rng.uniform(18.0, 32.0))
    yield from _hold(start, 1)
    yield from follow(start, [start + direction * (GAP + length)], rng.uniform(9.0, 16.0))
    yield from _retreat(sim, -direction)
    travelled = np.linalg.norm(block_centre(sim.last.block_pose) - block_centre(pose0))
    return bool(travelled >= 0.4 * length)


def rotate(sim: PushTSim, rng: np.random.Generator) -> Primitive:
    """Rotation by 25-35 degrees either way: push one arm of the crossbar off-centre, following
    the arm as it turns (closed loop). Succeeds when it turned >= 60% of that the right way."""
    pose0 = sim.last.block_pose
    for _ in range(PLAN_TRIES):
        side, face = rng.choice([-1.0, 1.0]), rng.integers(2)  # face 0: outer edge, 1: inner
        point = np.array([side * rng.uniform(38.0, 54.0), 30.0 * face])
        normal = np.array([0.0, 1.0 if face else -1.0])
        lever = point - T_COG  # torque of a push along -normal: lever x (-normal)
        turn = np.sign(lever[1] * normal[0] - lever[0] * normal[1]) * np.deg2rad(rng.uniform(25, 35))
        plan = approach(sim, pose0, point, normal)
        if plan is not None:
            break
    else:
        yield from reposition(sim, rng)
        return None
    start, path = plan
    yield from follow(sim.last.agent, path, rng.uniform(18.0, 32.0))
    yield from _hold(start, 1)
    depth = rng.uniform(5.0, 9.0)  # how far inside the arm the target sits: sets the turn rate
    for _ in range(30):
        pose = sim.last.block_pose
        if (pose[2] - pose0[2]) * np.sign(turn) >= abs(turn):
            break
        outward = rotation(pose[2]) @ normal
        yield np.clip(to_world(point, pose) + outward * (AGENT_RADIUS - depth), ACTION_LOW, ACTION_HIGH)
    yield from _retreat(sim, rotation(sim.last.block_pose[2]) @ normal)
    return bool((sim.last.block_pose[2] - pose0[2]) * np.sign(turn) >= 0.6 * abs(turn))


def contact(sim: PushTSim, rng: np.random.Generator) -> Primitive:
    """Small random contact: approach a random point of the outline, press in 8-30 units
    slowly, pause, back off. Succeeds when the block moved at all."""
    pose0 = sim.last.block_pose
    found = first_approach(sim, pose0, lambda: _sample_contact(rng))
    if found is None:
        yield from reposition(sim, rng)
        return None
    start, path, normal = found
    inward = rotation(pose0[2]) @ -normal
    yield from follow(sim.last.agent, path, rng.uniform(15.0, 30.0))
    yield from follow(start, [start + inward * (GAP + rng.uniform(8.0, 30.0))], rng.uniform(3.0, 8.0))
    yield from _hold(sim.last.agent.copy(), int(rng.integers(0, 3)))
    yield from _retreat(sim, -inward)
    return block_moved(pose0, sim.last.block_pose)


def roam(sim: PushTSim, rng: np.random.Generator) -> Primitive:
    """Contact-free motion: 1-3 legs to random free points at random speeds, with pauses.
    Succeeds when the block did not move."""
    pose0 = sim.last.block_pose
    for _ in range(int(rng.integers(1, 4))):
        yield from reposition(sim, rng)
        yield from _hold(sim.last.agent.copy(), int(rng.integers(0, 3)))
    return not block_moved(pose0, sim.last.block_pose)


def reposition(sim: PushTSim, rng: np.random.Generator) -> Generator[np.ndarray, None, None]:
    """Move to a random point clear of the T (at least one step; holds if nothing is reachable)."""
    pose = sim.last.block_pose
    for _ in range(PLAN_TRIES):
        goal = rng.uniform(ACTION_LOW, ACTION_HIGH, size=2)
        if distance_to_block(goal, pose) < CLEARANCE + 5.0:
            continue
        path = plan_path(sim.last.agent, goal, pose)
        if path is not None:
            yield from follow(sim.last.agent, path, rng.uniform(6.0, 30.0))
            return None
    yield sim.last.agent.copy()
    return None


def block_moved(before: np.ndarray, after: np.ndarray) -> bool:
    return bool(moved_steps(np.stack([before, after]))[0])


BASIC: dict[str, Callable[[PushTSim, np.random.Generator], Primitive]] = {
    "push": push, "rotate": rotate, "contact": contact, "roam": roam,
}
CHAIN_WEIGHTS = {"push": 0.4, "rotate": 0.3, "contact": 0.15, "roam": 0.15}


def chain(sim: PushTSim, rng: np.random.Generator) -> Primitive:
    """One randomly chosen basic primitive; an episode of chains mixes them within itself."""
    name = str(rng.choice(list(CHAIN_WEIGHTS), p=list(CHAIN_WEIGHTS.values())))
    return (yield from BASIC[name](sim, rng))


PRIMITIVES: dict[str, Callable[[PushTSim, np.random.Generator], Primitive]] = {**BASIC, "chain": chain}


@dataclass
class Play:
    """One played episode: the observation before each action, the actions, and the outcomes
    of the primitive instances that finished within it."""

    observations: list[Observation]
    actions: list[np.ndarray]  # (2,) float32 agent targets
    outcomes: list[bool | None]

    def poses(self) -> np.ndarray:
        """(T, 3) unwrapped block poses."""
        return np.stack([obs.block_pose for obs in self.observations])


def play(sim: PushTSim, primitive: str, steps: int, seed: int,
         primitives: dict[str, Callable[[PushTSim, np.random.Generator], Primitive]] = PRIMITIVES,
         ) -> Play:
    """Reset to `seed` and chain instances of `primitive` (a name in `primitives`) until `steps`
    actions were taken."""
    obs = sim.reset(seed)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))  # apart from gym's own stream
    record = Play([], [], [])
    while len(record.actions) < steps:
        instance = primitives[primitive](sim, rng)
        try:
            while len(record.actions) < steps:
                # float32 before stepping, so that replaying the stored actions is exact.
                target = np.asarray(next(instance), dtype=np.float32)
                record.observations.append(obs)
                record.actions.append(target)
                obs = sim.step(target)
        except StopIteration as stop:
            record.outcomes.append(stop.value)
    return record


def kept(primitive: str, record: Play) -> bool:
    """Did the episode do what its primitive means? Contact-free play must never move the
    block; the others must move it, with at least half their finished instances succeeding."""
    poses = record.poses()
    moved = bool(moved_steps(poses).any() or moved_steps(poses[[0, -1]]).any())
    if primitive == "roam":
        return not moved
    decided = [o for o in record.outcomes if o is not None]
    return moved and (not decided or sum(decided) >= len(decided) / 2)


def moved_steps(poses: np.ndarray) -> np.ndarray:
    """(T-1,) bool: did the block move between consecutive poses (T, 3)? Angle wrap-safe."""
    shift = np.linalg.norm(np.diff(poses[:, :2], axis=0), axis=1)
    turn = np.abs((np.diff(poses[:, 2]) + np.pi) % (2 * np.pi) - np.pi)
    return (shift > 0.5) | (turn > 0.005)
