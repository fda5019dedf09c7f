"""The mug task's ground truth: a policy rolled closed loop in the MuJoCo table itself, beside
world-model rollouts (`iws eval policy --ground-truth mug`).

Each episode starts from the gripper (state: x, y, z, width) and the mug's pose (`mug_pose`) that
a mug store recorded at the spec's initial frame. The batch runs in lockstep, one MugSim per
row, and the policy sees what it sees inside the world model: frames (B, 3, H, W, 3) from
cameras front, side and wrist, and state (B, 4). The score is the simulator's own reading of the
last frame (pipeline.mug.scorer.truth_score: the mug's lift, 1 from 0.1 m); success when the mug
is held at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pipeline.mug.env import CAMERAS, MugSim, State
from pipeline.mug.scorer import truth_score
from pipeline.tasks.base import SideScore
from pipeline.tasks.truth import in_batches, recorded_starts, table_resolution
from schemas import EpisodeSpec, FeatureSpec
from workers.actions.base import ActionSource, Observation, check_actions


def initial_states(specs: Sequence[EpisodeSpec]) -> list[State]:
    """The table at each spec's initial frame, from the Zarr store's state and mug pose."""
    starts = recorded_starts(specs, "mug", 4, ["mug_pose"], "the gripper and the mug's pose")
    return [State(hand=s["state"][:3].astype(np.float64), width=float(s["state"][3]),
                  mug_pos=s["mug_pose"][:3].astype(np.float64), mug_quat=s["mug_pose"][3:].astype(np.float64))
            for s in starts]


def _observation(sims: Sequence[MugSim]) -> Observation:
    frames = np.stack([np.stack([sim.render()[name] for name in CAMERAS]) for sim in sims])
    states = [sim.state() for sim in sims]
    return Observation(frames, np.array([[*s.hand, s.width] for s in states], np.float32))


def roll_mug(policy: ActionSource, specs: Sequence[EpisodeSpec], starts: Sequence[State],
             resolution: int, horizon: int, progress: Callable[[int], None] | None = None,
             ) -> tuple[list[State], list[bool], np.ndarray]:
    """Run `policy` for `horizon` steps from each start, all rows in lockstep: the last states,
    whether each ends held, and the front frames (B, T+1, R, R, 3)."""
    sims = [MugSim(resolution) for _ in starts]
    try:
        for sim, start in zip(sims, starts, strict=True):
            sim.reset_to(start)
        b = len(sims)
        frames = np.empty((b, horizon + 1, resolution, resolution, 3), np.uint8)
        observation = _observation(sims)
        policy.reset(specs, observation)
        for t in range(horizon + 1):
            frames[:, t] = observation.frames[:, 0]
            if t == horizon:
                break
            actions = check_actions(policy.actions(t, observation), b, 4, "policy")
            for sim, action in zip(sims, actions, strict=True):
                sim.step(action)
            observation = _observation(sims)
            if progress is not None:
                progress(b)
        return [sim.state() for sim in sims], [sim.held() for sim in sims], frames
    finally:
        for sim in sims:
            sim.close()


def evaluate_in_mug(policy: ActionSource, specs: Sequence[EpisodeSpec], features: FeatureSpec,
                    horizon: int, batch_size: int, videos: int,
                    progress: Callable[[int], None] | None = None,
                    ) -> tuple[list[SideScore], list[np.ndarray]]:
    """The same policy from the same initial states on the table: a score per episode and
    front frames (T+1, H, W, 3) of those with index < videos."""
    resolution = table_resolution(features, "mug", CAMERAS, 4)
    starts = initial_states(specs)

    def roll(batch: Sequence[EpisodeSpec], first: int) -> tuple[list[SideScore], list[np.ndarray]]:
        last, held, frames = roll_mug(policy, batch, starts[first:first + len(batch)], resolution,
                                      horizon, progress)
        scores = [SideScore(score=truth_score(s), success=h, final=truth_score(s))
                  for s, h in zip(last, held, strict=True)]
        return scores, [frames[row] for row, spec in enumerate(batch) if spec.index < videos]

    return in_batches(specs, batch_size, roll)
