"""Contact-heavy PushT play: the demonstrator's pushes for training, aimed strikes for held-out.

The scripted play of `primitives.py` moves the block in ~43 % of steps and retreats after every
push. Generation asks the world model for something else: long pushes that go through the T, and
bar ends pushed until the T turns far. Two generators cover that, kept apart on purpose:

- `demo` (training): one push planned by the demonstrator's own `PushPlanner` on the simulator's
  true pose, approached and executed as `PushTDemonstrator` executes it. Episodes of `demo` are
  what the demonstrator does in gym-pusht, so a model trained on them has seen what generation
  with `--policy PushTDemonstrator` will ask of it.
- `aimed` (held-out only): chains of *strikes* (the agent comes in from a random side and drives
  straight through the T's centre and beyond, no gap, no pause) and *levers* (a crossbar tip or
  the stem's foot pushed sideways until the T has turned far), each starting where the last one
  ended. No training set uses it (`scripts/collect_pusht_sets.sh` says which store is which), so
  a score on an `aimed` set is a score on action streams the model never saw.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

from pipeline.pusht.env import (
    ACTION_HIGH,
    ACTION_LOW,
    CLEARANCE,
    T_RADIUS,
    PushTSim,
    block_centre,
    distance_to_block,
    follow,
    in_bounds,
    plan_path,
    rotation,
)
from pipeline.pusht.primitives import (
    BLOCK_HIGH,
    BLOCK_LOW,
    CANVAS_CENTRE,
    PRIMITIVES,
    Primitive,
    block_moved,
    first_approach,
    push,
    reposition,
)
from pipeline.pusht.push_planner import APPROACH_SPEED, FINAL_SPEED, PushPlanner, route
from pipeline.pusht.scorer import coverage_of_pose

DONE_COVERAGE = 0.98  # as the demonstrator: at this coverage it stops pushing
STRIKE_TRAVEL = 20.0  # canvas units the T's centre must travel for a strike to count
LEVER_TURN = np.deg2rad(10.0)  # radians a lever must turn the T to count
# Bar ends as (block-local contact point, outward normal): the crossbar's tips on its outer and
# inner edges (pushed along y, they turn the T about its centre) and the stem's foot (along x).
BAR_ENDS = [
    (np.array([side * 54.0, 0.0]), np.array([0.0, -1.0])) for side in (-1.0, 1.0)
] + [
    (np.array([side * 54.0, 30.0]), np.array([0.0, 1.0])) for side in (-1.0, 1.0)
] + [
    (np.array([side * 15.0, 110.0]), np.array([side, 0.0])) for side in (-1.0, 1.0)
]


@cache
def _planner() -> PushPlanner:
    """One planner per process: it holds a pymunk space, built once."""
    return PushPlanner()


def demo(sim: PushTSim, rng: np.random.Generator) -> Primitive:
    """One push the demonstrator would make from here, on the true pose (module doc); once the T
    is at the goal, a scripted push knocks it away. Succeeds when the block moved; None when no
    push helps (the agent moves elsewhere instead)."""
    pose0, agent = sim.last.block_pose, sim.last.agent
    if coverage_of_pose(pose0) >= DONE_COVERAGE:  # at the goal: knock it off to have work again
        return (yield from push(sim, rng))
    plan = _planner().plan(agent, pose0)
    if plan is None:
        yield from reposition(sim, rng)
        return None
    path = route(agent, plan.staging, pose0) or [plan.staging]
    yield from follow(agent, path, APPROACH_SPEED)
    yield from follow(plan.staging, [plan.start], FINAL_SPEED)
    yield plan.start
    yield from plan.targets
    return block_moved(pose0, sim.last.block_pose)


def strike(sim: PushTSim, rng: np.random.Generator) -> Primitive:
    """Come in from a side (mostly the agent's) and drive through the T's centre, 50-130 units
    past it, at 8-15 units a step (a lever where there is no room). Succeeds when the centre
    travelled >= STRIKE_TRAVEL."""
    pose0 = sim.last.block_pose
    centre = block_centre(pose0)
    towards = np.arctan2(*(centre - sim.last.agent)[::-1])
    inward = (CANVAS_CENTRE - centre) / max(np.linalg.norm(CANVAS_CENTRE - centre), 1e-9)
    for tries in range(30):
        # Mostly from the agent's side of the T (a short run-up, as a person would strike next),
        # from anywhere when that side has no room.
        spread = np.deg2rad(60.0) if tries < 15 else np.pi
        heading = rotation(towards + rng.uniform(-spread, spread)) @ np.array([1.0, 0.0])
        # Keep the T off the walls, unless the strike frees a T that is already near one.
        if not (in_bounds(centre + heading * 70.0, BLOCK_LOW, BLOCK_HIGH) or heading @ inward > 0.5):
            continue
        staging = _run_up(pose0, heading, T_RADIUS + CLEARANCE + rng.uniform(5.0, 25.0))
        end = np.clip(centre + heading * rng.uniform(50.0, 130.0), ACTION_LOW, ACTION_HIGH)
        if staging is None or np.linalg.norm(end - staging) <= T_RADIUS + CLEARANCE:
            continue
        path = plan_path(sim.last.agent, staging, pose0)
        if path is not None:
            break
    else:  # no room to come in from any side (a T against a wall): turn it off the wall instead
        return (yield from lever(sim, rng))
    yield from follow(sim.last.agent, path, rng.uniform(18.0, 30.0))
    yield from follow(staging, [end], rng.uniform(8.0, 15.0))
    travelled = np.linalg.norm(block_centre(sim.last.block_pose) - centre)
    return bool(travelled >= STRIKE_TRAVEL)


def _run_up(pose: np.ndarray, heading: np.ndarray, longest: float) -> np.ndarray | None:
    """Where a strike along `heading` through the T's centre starts: the point furthest back on
    that line, at most `longest` from the centre, that is inside the walls and clear of the T."""
    centre = block_centre(pose)
    for back in np.arange(longest, 20.0, -5.0):
        point = centre - heading * back
        if in_bounds(point) and distance_to_block(point, pose) >= CLEARANCE:
            return point
    return None


def lever(sim: PushTSim, rng: np.random.Generator) -> Primitive:
    """Push a bar end sideways, open loop, 60-130 units at 6-12 a step: the T turns until the
    agent slides off. Succeeds when it turned >= LEVER_TURN."""
    pose0 = sim.last.block_pose
    found = first_approach(sim, pose0, lambda: BAR_ENDS[int(rng.integers(len(BAR_ENDS)))])
    if found is None:
        yield from reposition(sim, rng)
        return None
    start, path, normal = found
    push_along = rotation(pose0[2]) @ -normal
    end = np.clip(start + push_along * rng.uniform(60.0, 130.0), ACTION_LOW, ACTION_HIGH)
    yield from follow(sim.last.agent, path, rng.uniform(18.0, 30.0))
    yield from follow(start, [end], rng.uniform(6.0, 12.0))
    turned = abs(sim.last.block_pose[2] - pose0[2])
    return bool(turned >= LEVER_TURN)


def aimed(sim: PushTSim, rng: np.random.Generator) -> Primitive:
    """A strike (60 %) or a lever (40 %), starting where the agent is: no retreat in between."""
    move = strike if rng.uniform() < 0.6 else lever
    return (yield from move(sim, rng))


TRAINING = {"demo": demo}
HELDOUT = {"aimed": aimed}
ALL: dict[str, Callable[[PushTSim, np.random.Generator], Primitive]] = {
    **PRIMITIVES, **TRAINING, **HELDOUT}

