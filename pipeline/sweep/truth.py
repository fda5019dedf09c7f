"""The sweep task's ground truth: a policy rolled closed loop in the pymunk arena itself, beside
world-model rollouts (`iws eval policy --ground-truth sweep`).

Each episode starts from the pushers (state) and discs (`particles`, `particle_count`) that an
`iws collect sweep` store recorded at the spec's initial frame. The batch runs in lockstep, one
SweepSim per row, and the policy sees what it sees inside the world model: frames (B, V, H, W, 3)
of the model's cameras in the model's order, and state (B, 4). The score is the simulator's own
in-goal fraction (disc centres) at the last frame; success at SUCCESS_FRACTION.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pipeline.sweep.env import SUCCESS_FRACTION, State, SweepSim
from pipeline.sweep.render import CAMERAS, render
from pipeline.tasks.base import SideScore
from pipeline.tasks.truth import in_batches, recorded_starts
from schemas import EpisodeSpec, FeatureSpec, SpecError
from workers.actions.base import ActionSource, Observation, check_actions


def initial_states(specs: Sequence[EpisodeSpec]) -> list[State]:
    """The arena at each spec's initial frame, from the Zarr store's state and particles."""
    starts = recorded_starts(specs, "sweep", 4, ["particles", "particle_count"],
                             "the pushers and the particles")
    return [State(s["state"].astype(np.float64).reshape(2, 2),
                  s["particles"][:int(s["particle_count"])].astype(np.float64)) for s in starts]


def _views(states: Sequence[State], cameras: Sequence[str], resolution: int) -> np.ndarray:
    """(B, V, R, R, 3) uint8: each row's cameras in the given order."""
    rendered = [render(s.pushers, s.particles, resolution) for s in states]
    return np.stack([np.stack([views[c] for c in cameras]) for views in rendered])


def _observation(states: Sequence[State], cameras: Sequence[str], resolution: int) -> Observation:
    state = np.stack([s.pushers.reshape(4) for s in states]).astype(np.float32)
    return Observation(_views(states, cameras, resolution), state)


def roll_sweep(policy: ActionSource, specs: Sequence[EpisodeSpec], starts: Sequence[State],
               cameras: Sequence[str], resolution: int, horizon: int,
               progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Run `policy` for `horizon` steps from each start, all rows in lockstep: the true in-goal
    fraction (B, T+1) and first-camera frames (B, T+1, R, R, 3). Frame t is what the policy
    chose action t at; action t yields frame t+1."""
    sims = [SweepSim() for _ in starts]
    states = [sim.reset_to(s.pushers, s.particles) for sim, s in zip(sims, starts, strict=True)]
    b = len(sims)
    in_goal = np.empty((b, horizon + 1))
    frames = np.empty((b, horizon + 1, resolution, resolution, 3), np.uint8)
    observation = _observation(states, cameras, resolution)
    policy.reset(specs, observation)
    for t in range(horizon + 1):
        in_goal[:, t] = [s.in_goal for s in states]
        frames[:, t] = observation.frames[:, 0]
        if t == horizon:
            break
        actions = check_actions(policy.actions(t, observation), b, 4, "policy")
        states = [sim.step(a) for sim, a in zip(sims, actions, strict=True)]
        observation = _observation(states, cameras, resolution)
        if progress is not None:
            progress(b)  # episode-steps just done
    return in_goal, frames


def evaluate_in_sweep(policy: ActionSource, specs: Sequence[EpisodeSpec], features: FeatureSpec,
                      horizon: int, batch_size: int, videos: int,
                      progress: Callable[[int], None] | None = None,
                      ) -> tuple[list[SideScore], list[np.ndarray]]:
    """The same policy from the same initial states in the arena: a score per episode and
    first-camera frames (T+1, H, W, 3) of those with index < videos."""
    sizes = {(c.height, c.width) for c in features.cameras}
    resolution = features.cameras[0].height
    unknown = [c for c in features.camera_names if c not in CAMERAS]
    if unknown or sizes != {(resolution, resolution)} or features.action_dim != 4:
        raise SpecError("--ground-truth sweep needs a sweep-like model: cameras among "
                        f"{', '.join(CAMERAS)}, all square and of one size, and 4-D actions; this "
                        f"model has cameras {list(features.camera_names)} and action_dim "
                        f"{features.action_dim}.")
    starts = initial_states(specs)

    def roll(batch: Sequence[EpisodeSpec], first: int) -> tuple[list[SideScore], list[np.ndarray]]:
        in_goal, frames = roll_sweep(policy, batch, starts[first:first + len(batch)],
                                     features.camera_names, resolution, horizon, progress)
        finals = [float(in_goal[row, -1]) for row in range(len(batch))]
        scores = [SideScore(score=f, success=f >= SUCCESS_FRACTION, final=f) for f in finals]
        return scores, [frames[row] for row, spec in enumerate(batch) if spec.index < videos]

    return in_batches(specs, batch_size, roll)
