"""The one closed-loop rollout: a policy acts on each generated frame, the world model steps.

Generation replicas (workers/replica.py) and policy evaluation inside the model
(pipeline/evaluation/policy.py) both roll batches this way, so both record the same thing.
Step t records the frame the policy saw and the action it took there (the Diffusion Policy /
LeRobot convention): an episode of T frames takes T-1 model steps, and its last action is chosen
but never applied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from schemas import EpisodeSpec
from workers.actions.base import ActionSource, Observation, check_actions
from workers.init_frames import load_init

if TYPE_CHECKING:
    from sim_model.world_model import WorldModel


class GroupAbandoned(Exception):
    """A rollout stopped on request before anything of its group was written."""


@dataclass
class ClosedLoopRollout:
    frames: np.ndarray  # (B, T, V, H, W, 3) uint8; frame 0 the initial one
    state: np.ndarray | None  # (B, T, S) predicted state (state 0 recorded, if known), or None
    actions: np.ndarray  # (B, T, A) the action chosen at each frame


def roll_closed_loop(model: WorldModel, policy: ActionSource, specs: Sequence[EpisodeSpec], *,
                     who: str = "policy", abandon: Callable[[], bool] | None = None,
                     on_step: Callable[[int], None] | None = None) -> ClosedLoopRollout:
    """Roll `specs` (one batch, the same horizon T = frames per episode) in lockstep from their
    initial frames, seeded per row. `policy` is reset here; `who` names it in errors about what it
    returned. `abandon` is polled before every model step (True: GroupAbandoned); `on_step(b)`
    is told after each step of the b episodes."""
    horizon = specs[0].horizon
    frames0, state0 = load_init([s.init_ref for s in specs], model.features)  # (B, V, H, W, 3)
    model.reset(frames0, state=state0, seeds=[s.seed for s in specs])
    b, features = len(specs), model.features
    frames = np.empty((b, horizon, *frames0.shape[1:]), np.uint8)
    actions = np.empty((b, horizon, features.action_dim), np.float32)
    state = np.empty((b, horizon, features.state_dim), np.float32) if model.has_state else None
    frames[:, 0] = frames0
    observation = Observation(frames0, state0)
    policy.reset(specs, observation)
    for t in range(horizon):
        actions[:, t] = check_actions(policy.actions(t, observation), b, features.action_dim, who)
        if t == horizon - 1:
            break
        if abandon is not None and abandon():
            raise GroupAbandoned(f"group {specs[0].episode_id}.. abandoned at step {t}")
        result = model.step(actions[:, t])
        frames[:, t + 1] = result.frames
        if state is not None and result.state is not None:
            state[:, t + 1] = result.state
        observation = Observation(result.frames, result.state)
        if on_step is not None:
            on_step(b)
    if state is not None:
        # Without a recorded initial state, the first predicted one stands in for it.
        state[:, 0] = state0 if state0 is not None else state[:, min(1, horizon - 1)]
    return ClosedLoopRollout(frames, state, actions)
