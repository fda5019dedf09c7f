"""A scripted PushT pusher that sees only pixels: the role of the paper's human teleoperator.

Each time it needs a new plan it estimates the T's pose from the frame (pipeline.pusht.vision)
and the agent's position from the state (or, without one, from the frame), then lets
`PushPlanner` choose the push that brings the T nearest the goal: approach behind the T relative
to where it must go, push, and turn it by pushing an arm. It re-plans after every push, so it is
closed-loop on simulator and world-model frames alike, and rests clear of the T once the
estimated coverage passes `DONE_COVERAGE` (checking again now and then).

A batched policy in the shape the generation job's policy source and `iws eval policy` load:

    action_sources: {demo: {kind: policy, policy: "pipeline.pusht.demonstrator:PushTDemonstrator"}}
    iws eval policy --policy pipeline.pusht.demonstrator:PushTDemonstrator ...
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pipeline.pusht.env import (
    ACTION_HIGH,
    ACTION_LOW,
    CLEARANCE,
    block_centre,
    distance_to_block,
    follow,
)
from pipeline.pusht.push_planner import (
    APPROACH_SPEED,
    FINAL_SPEED,
    NEAR,
    Push,
    PushPlanner,
    route,
)
from pipeline.pusht.scorer import coverage_of_pose
from pipeline.pusht.vision import agent_position, estimate_block_pose
from schemas import EpisodeSpec, FeatureSpec, SpecError
from workers.actions.base import Observation, episode_rng

log = logging.getLogger(__name__)

DONE_COVERAGE = 0.98  # estimated coverage at which the demonstrator stops pushing and rests
GATE_TOLERANCE = 0.5  # canvas units: the agent counts as arrived at a push's start
MAX_WAIT = 8  # steps to wait at a push's start before pushing anyway
RECHECK_STEPS = 8  # while resting, look at the T again this often
RETREAT = 45.0  # how far from the T the agent rests


@dataclass
class _Row:
    """Execution state of one episode: targets queued for the coming steps."""

    rng: np.random.Generator
    approach: deque[np.ndarray] = field(default_factory=deque)
    gate: np.ndarray | None = None  # wait here until the agent arrives, then push
    waited: int = 0
    push: deque[np.ndarray] = field(default_factory=deque)
    hold: np.ndarray | None = None  # resting target
    recheck: int = 0
    plans: int = 0


class PushTDemonstrator:
    """Batched closed-loop PushT pusher: `reset(episodes, observation)`, then
    `actions(step, observation) -> (B, 2)` agent targets in canvas units (see module doc)."""

    def __init__(self, features: FeatureSpec) -> None:
        if features.action_dim != 2:
            raise SpecError(f"the PushT demonstrator drives a 2-D agent target; this model's "
                            f"action_dim is {features.action_dim}.")
        names = features.camera_names
        self.camera = names.index("top") if "top" in names else 0
        self.use_state = features.state_dim == 2
        self.planner = PushPlanner()
        self.rows: list[_Row] = []

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        self.rows = [_Row(rng=episode_rng(spec, "pusht-demonstrator")) for spec in episodes]

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        if len(self.rows) != len(observation):
            raise SpecError(f"PushTDemonstrator was reset for {len(self.rows)} episodes but is asked "
                            f"for {len(observation)}; call reset() with the batch first.")
        out = np.empty((len(observation), 2), np.float32)
        for r, row in enumerate(self.rows):
            frame = observation.frames[r, self.camera]  # (H, W, 3)
            agent = self._agent(observation, r, frame, row)
            out[r] = np.clip(self._next(row, agent, frame), ACTION_LOW, ACTION_HIGH)
        return out

    def describe(self, row: int) -> str:
        return "policy:pusht-demonstrator"

    def _agent(self, observation: Observation, r: int, frame: np.ndarray, row: _Row) -> np.ndarray:
        if self.use_state and observation.state is not None:
            return np.asarray(observation.state[r], np.float64)
        seen = agent_position(frame)
        if seen is not None:
            return seen
        return row.hold if row.hold is not None else np.array([256.0, 256.0])

    def _next(self, row: _Row, agent: np.ndarray, frame: np.ndarray) -> np.ndarray:
        """The target for this step: continue the current plan, or make a new one."""
        for _ in range(2):  # a fresh plan always queues at least one target
            if row.approach:
                return row.approach.popleft()
            if row.gate is not None:
                arrived = np.linalg.norm(agent - row.gate) < GATE_TOLERANCE
                if not arrived and row.waited < MAX_WAIT:
                    row.waited += 1
                    return row.gate
                row.gate = None
            if row.push:
                return row.push.popleft()
            if row.hold is not None and row.recheck > 0:
                row.recheck -= 1
                return row.hold
            self._replan(row, agent, frame)
        return agent

    def _replan(self, row: _Row, agent: np.ndarray, frame: np.ndarray) -> None:
        row.hold, row.plans = None, row.plans + 1
        pose = estimate_block_pose(frame)
        if pose is None:  # no T in sight: stay put and look again
            self._rest(row, agent, agent)
            return
        push = None if coverage_of_pose(pose) >= DONE_COVERAGE else self.planner.plan(agent, pose)
        if push is not None:
            self._queue(row, agent, pose, push)
        elif coverage_of_pose(pose) >= DONE_COVERAGE - 0.05:
            self._rest(row, agent, self._retreat_point(agent, pose))
        else:  # no push helps from here: move somewhere else around the T, then re-plan
            self._wander(row, agent, pose)

    def _queue(self, row: _Row, agent: np.ndarray, pose: np.ndarray, push: Push) -> None:
        if np.linalg.norm(agent - push.start) >= NEAR:  # else it was planned from where it is
            path = route(agent, push.staging, pose) or [push.staging]
            row.approach.extend(follow(agent, path, APPROACH_SPEED))
            row.approach.extend(follow(push.staging, [push.start], FINAL_SPEED))
            row.gate, row.waited = push.start, 0
        row.push.extend(push.targets)

    def _rest(self, row: _Row, agent: np.ndarray, point: np.ndarray) -> None:
        row.hold, row.recheck = point, RECHECK_STEPS
        if np.linalg.norm(point - agent) > 1.0:
            row.approach.extend(follow(agent, [point], APPROACH_SPEED))

    @staticmethod
    def _retreat_point(agent: np.ndarray, pose: np.ndarray) -> np.ndarray:
        """Where to rest: here when already clear of the T, else RETREAT further from it."""
        if distance_to_block(agent, pose) >= RETREAT - 10.0:
            return agent
        away = agent - block_centre(pose)
        away = away / max(float(np.linalg.norm(away)), 1e-6)
        return np.clip(agent + away * RETREAT, ACTION_LOW, ACTION_HIGH)

    def _wander(self, row: _Row, agent: np.ndarray, pose: np.ndarray) -> None:
        for _ in range(20):
            angle = row.rng.uniform(0.0, 2 * np.pi)
            point = block_centre(pose) + 110.0 * np.array([np.cos(angle), np.sin(angle)])
            point = np.clip(point, ACTION_LOW, ACTION_HIGH)
            path = None if distance_to_block(point, pose) < CLEARANCE else route(agent, point, pose)
            if path is not None:
                row.approach.extend(follow(agent, path, APPROACH_SPEED))
                return
        self._rest(row, agent, agent)
