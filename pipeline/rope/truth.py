"""The rope task's ground truth: a policy rolled closed loop on the pymunk table itself, beside
world-model rollouts (`iws eval policy --ground-truth rope`).

Each episode starts from the effector (state), the rope's points (`rope`) and the clip (`clip`)
that an `iws collect rope` store recorded at the spec's initial frame. The batch runs in
lockstep, one RopeSim per row, and the policy sees what it sees inside the world model: frames
(B, 1, H, W, 3) from camera `top` and state (B, 2). The score is the simulator's own reading of
the last frame (pipeline.rope.scorer.truth_score: 1 through the clip, below 0.5 near it); success
when the rope is through the clip at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pipeline.rope.env import RopeSim, State
from pipeline.rope.render import CAMERAS, render_top
from pipeline.rope.scorer import truth_score
from pipeline.tasks.base import SideScore
from pipeline.tasks.truth import in_batches, recorded_starts, table_resolution
from schemas import EpisodeSpec, FeatureSpec
from workers.actions.base import ActionSource, Observation, check_actions


def initial_states(specs: Sequence[EpisodeSpec]) -> list[State]:
    """The table at each spec's initial frame, from the Zarr store's state, rope and clip."""
    starts = recorded_starts(specs, "rope", 2, ["rope", "clip"], "the effector, the rope and the clip")
    return [State(effector=s["state"].astype(np.float64), rope=s["rope"].astype(np.float64),
                  clip=s["clip"][:2].astype(np.float64), clip_angle=float(s["clip"][2])) for s in starts]


def _observation(states: Sequence[State], resolution: int) -> Observation:
    frames = np.stack([render_top(s, resolution) for s in states])[:, None]
    return Observation(frames, np.stack([s.effector for s in states]).astype(np.float32))


def roll_rope(policy: ActionSource, specs: Sequence[EpisodeSpec], starts: Sequence[State],
              resolution: int, horizon: int, progress: Callable[[int], None] | None = None,
              ) -> tuple[list[State], np.ndarray]:
    """Run `policy` for `horizon` steps from each start, all rows in lockstep: the last states
    and the frames (B, T+1, R, R, 3). Frame t is what the policy chose action t at."""
    sims = [RopeSim() for _ in starts]
    states = [sim.reset_to(s) for sim, s in zip(sims, starts, strict=True)]
    b = len(sims)
    frames = np.empty((b, horizon + 1, resolution, resolution, 3), np.uint8)
    observation = _observation(states, resolution)
    policy.reset(specs, observation)
    for t in range(horizon + 1):
        frames[:, t] = observation.frames[:, 0]
        if t == horizon:
            break
        actions = check_actions(policy.actions(t, observation), b, 2, "policy")
        states = [sim.step(a) for sim, a in zip(sims, actions, strict=True)]
        observation = _observation(states, resolution)
        if progress is not None:
            progress(b)
    return states, frames


def evaluate_in_rope(policy: ActionSource, specs: Sequence[EpisodeSpec], features: FeatureSpec,
                     horizon: int, batch_size: int, videos: int,
                     progress: Callable[[int], None] | None = None,
                     ) -> tuple[list[SideScore], list[np.ndarray]]:
    """The same policy from the same initial states on the table: a score per episode and
    frames (T+1, H, W, 3) of those with index < videos."""
    resolution = table_resolution(features, "rope", CAMERAS, 2)
    starts = initial_states(specs)

    def roll(batch: Sequence[EpisodeSpec], first: int) -> tuple[list[SideScore], list[np.ndarray]]:
        last, frames = roll_rope(policy, batch, starts[first:first + len(batch)], resolution,
                                 horizon, progress)
        scores = [SideScore(score=truth_score(s), success=s.inserted, final=truth_score(s)) for s in last]
        return scores, [frames[row] for row, spec in enumerate(batch) if spec.index < videos]

    return in_batches(specs, batch_size, roll)
