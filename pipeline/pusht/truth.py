"""PushT's ground truth: a policy rolled closed loop in gym-pusht itself, beside world-model rollouts
(`iws eval policy --ground-truth pusht`, through the PushT task).

The batch runs in lockstep, one PushTSim per row, so the policy sees exactly the batched
observation it sees inside the world model: frames (B, 1, H, W, 3) uint8 from camera 'top' and
state (B, 2), the agent position. Coverage is gym-pusht's own (`info["coverage"]`); success is
coverage > 0.95 at any step, as gym-pusht (which ends the episode there) reports it. Each
episode starts from the agent position (state) and block_pose an `iws collect pusht` store
recorded at its initial frame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.pusht.env import SUCCESS_COVERAGE, PushTSim
from pipeline.tasks.base import SideScore
from pipeline.tasks.truth import in_batches, recorded_starts
from schemas import EpisodeSpec, FeatureSpec, SpecError
from workers.actions.base import ActionSource, Observation, check_actions


@dataclass(frozen=True)
class InitialState:
    """Where a ground-truth episode starts: agent position (2,) and block pose (x, y, angle)."""

    agent: np.ndarray
    block_pose: np.ndarray


def seeded_states(seeds: Sequence[int]) -> list[InitialState]:
    """gym-pusht's own random initial states for `seeds` (what `env.reset(seed=s)` draws)."""
    sim = PushTSim(resolution=16)  # the frame is not used
    try:
        return [InitialState(o.agent, o.block_pose) for o in map(sim.reset, seeds)]
    finally:
        sim.close()


@dataclass
class TruthRollout:
    """Per row: gym-pusht coverage at every frame (B, T+1), the actions (B, T+1, 2) the policy
    chose at each frame (the last is not applied), the agent position (B, T+1, 2) and block pose
    (B, T+1, 3) at every frame, and frames (T+1, H, W, 3) uint8 of the rows asked to keep them."""

    coverage: np.ndarray
    actions: np.ndarray
    frames: dict[int, np.ndarray]
    agent: np.ndarray
    block_pose: np.ndarray

    @property
    def best(self) -> np.ndarray:
        return self.coverage.max(axis=1)

    @property
    def final(self) -> np.ndarray:
        return self.coverage[:, -1]

    @property
    def success(self) -> np.ndarray:
        return self.best > SUCCESS_COVERAGE


def roll_pusht(policy: ActionSource, specs: Sequence[EpisodeSpec], states: Sequence[InitialState],
               horizon: int, resolution: int, keep_frames: Sequence[int] = (),
               progress: Callable[[int], None] | None = None) -> TruthRollout:
    """Run `policy` for `horizon` steps from each initial state, all rows in lockstep.

    Frame t is the observation the policy chose action t at, and action t yields frame t+1, as in
    recordings; the policy also sees the last frame, so every frame has an action beside it.
    """
    if len(specs) != len(states):
        raise ValueError(f"{len(specs)} episode specs for {len(states)} initial states")
    sims = [PushTSim(resolution) for _ in states]
    try:
        obs = [sim.reset_to(s.agent, s.block_pose) for sim, s in zip(sims, states, strict=True)]
        b = len(sims)
        coverage = np.empty((b, horizon + 1))
        actions = np.empty((b, horizon + 1, 2), np.float32)
        agent = np.empty((b, horizon + 1, 2), np.float32)
        block_pose = np.empty((b, horizon + 1, 3), np.float32)
        kept = {r: np.empty((horizon + 1, resolution, resolution, 3), np.uint8) for r in keep_frames}
        observation = _observation(obs)
        policy.reset(specs, observation)
        for t in range(horizon + 1):
            coverage[:, t] = [o.coverage for o in obs]
            agent[:, t] = [o.agent for o in obs]
            block_pose[:, t] = [o.block_pose for o in obs]
            for r, frames in kept.items():
                frames[t] = obs[r].frame
            actions[:, t] = check_actions(policy.actions(t, observation), b, 2, "policy")
            if t == horizon:
                break
            obs = [sim.step(a) for sim, a in zip(sims, actions[:, t], strict=True)]
            observation = _observation(obs)
            if progress is not None:
                progress(b)  # episode-steps just done
        return TruthRollout(coverage=coverage, actions=actions, frames=kept, agent=agent,
                            block_pose=block_pose)
    finally:
        for sim in sims:
            sim.close()


def _observation(obs: Sequence) -> Observation:
    frames = np.stack([o.frame for o in obs])[:, None]  # (B, 1, H, W, 3)
    return Observation(frames, np.stack([o.agent for o in obs]).astype(np.float32))


def initial_states(specs: Sequence[EpisodeSpec]) -> list[InitialState]:
    """gym-pusht states of the specs' initial frames, from the Zarr store's recorded agent
    position (state) and block_pose."""
    starts = recorded_starts(specs, "pusht", 2, ["block_pose"], "the agent position and block_pose")
    return [InitialState(s["state"].astype(np.float64), s["block_pose"].astype(np.float64))
            for s in starts]


def evaluate_in_pusht(policy: ActionSource, specs: Sequence[EpisodeSpec], features: FeatureSpec,
                      horizon: int, batch_size: int, videos: int,
                      progress: Callable[[int], None] | None = None,
                      ) -> tuple[list[SideScore], list[np.ndarray]]:
    """The same policy from the same initial states in gym-pusht: a score per episode and frames
    (T+1, H, W, 3) of the first `videos`; `progress(steps)` after each batch step."""
    cam = features.cameras[0]
    if len(features.cameras) != 1 or cam.height != cam.width or features.action_dim != 2:
        raise SpecError("--ground-truth pusht needs a PushT-like model: one square camera and 2-D "
                        f"actions; this model has cameras {list(features.camera_names)} and "
                        f"action_dim {features.action_dim}.")
    states = initial_states(specs)

    def roll(batch: Sequence[EpisodeSpec], first: int) -> tuple[list[SideScore], list[np.ndarray]]:
        keep = [r for r, s in enumerate(batch) if s.index < videos]
        result = roll_pusht(policy, batch, states[first:first + len(batch)], horizon, cam.height,
                            keep_frames=keep, progress=progress)
        scores = [SideScore(score=float(result.best[row]), success=bool(result.success[row]),
                            final=float(result.final[row])) for row in range(len(batch))]
        return scores, [result.frames[r] for r in keep]

    return in_batches(specs, batch_size, roll)
