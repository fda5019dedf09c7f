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
from schemas import EpisodeSpec, FeatureSpec, SpecError
from workers.actions.base import ActionSource, Observation, check_actions
from workers.init_frames import parse_ref


def initial_states(specs: Sequence[EpisodeSpec]) -> list[State]:
    """The arena at each spec's initial frame, from the Zarr store's state and particles."""
    from sim_model.data.formats import dataset_kind
    from sim_model.data.store import EpisodeStore

    states: list[State] = []
    stores: dict[str, EpisodeStore] = {}
    for spec in specs:
        path, episode, frame = parse_ref(spec.init_ref) or (spec.init_ref, 0, 0)
        if dataset_kind(path) != "zarr":
            raise SpecError(f"--ground-truth sweep needs a Zarr episode store as --init (got {path}): "
                            "it reads each start's recorded pushers and discs.")
        if path not in stores:
            stores[path] = EpisodeStore.open(path, "r")
        store = stores[path]
        names = {e.name for e in store.features.extras}
        if store.features.state_dim != 4 or not {"particles", "particle_count"} <= names:
            raise SpecError(f"--ground-truth sweep: {path} lacks the pushers (state, 4 values) or the "
                            "particles and particle_count extras; use a store recorded with "
                            "`iws collect sweep`.")
        step = store.window(episode, frame, frame + 1, keys=["state", "particles", "particle_count"])
        count = int(step["particle_count"][0])
        states.append(State(step["state"][0].astype(np.float64).reshape(2, 2),
                            step["particles"][0, :count].astype(np.float64)))
    return states


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
    scores: list[SideScore] = []
    kept: list[np.ndarray] = []
    for first in range(0, len(specs), batch_size):
        batch = specs[first:first + batch_size]
        in_goal, frames = roll_sweep(policy, batch, starts[first:first + batch_size],
                                     features.camera_names, resolution, horizon, progress)
        for row, spec in enumerate(batch):
            final = float(in_goal[row, -1])
            scores.append(SideScore(score=final, success=final >= SUCCESS_FRACTION, final=final))
            if spec.index < videos:
                kept.append(frames[row])
    return scores, kept
