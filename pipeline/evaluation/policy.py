"""Score a policy closed loop inside a world model (and, for PushT, in gym-pusht beside it).

Episode i starts from initial-frame reference i (the init dataset's episodes in order, reused
round-robin when more episodes are asked for) with seed SeedSequence((seed, i)), so the world
model's noise and a stochastic policy's draws are the same for a row whatever the batch size.
The policy is the generation job's policy source (workers.actions.policy): a 'module:function'
callable or class, or a LeRobot pretrained-policy directory, seeing frames (B, V, H, W, 3) uint8
and state (B, S) and returning actions (B, A). Every episode is scored by a workers.scoring
scorer from its frames (and predicted state).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pipeline.evaluation.policy_report import (
    Agreement,
    EpisodeResult,
    PolicyReport,
    SideScore,
    Summary,
)
from schemas import EpisodeMeta, EpisodeSpec, FeatureSpec, SpecError
from sim_model.data.episode import Episode
from sim_model.world_model import WorldModel
from workers.actions.base import ActionSource, Observation, check_actions
from workers.init_frames import load_init, parse_ref
from workers.scoring import Scorer, score_episode

if TYPE_CHECKING:  # PushT code is imported only when the PushT ground truth is asked for
    from pipeline.evaluation.pusht_truth import InitialState
    from sim_model.data.store import EpisodeStore

log = logging.getLogger(__name__)

JOB_ID = "eval-policy"
Progress = Callable[[str, int], None]  # (side, steps just done)


def episode_specs(refs: Sequence[str], episodes: int, horizon: int, seed: int) -> list[EpisodeSpec]:
    """The evaluated episodes: initial frames round-robin over `refs`, seeds from (seed, index)."""
    if not refs:
        raise SpecError("the init dataset offers no initial frames.")
    if episodes > len(refs):
        log.warning("%d episodes from %d initial frames: each is used %d+ times (with other seeds)",
                    episodes, len(refs), episodes // len(refs))
    return [EpisodeSpec(job_id=JOB_ID, index=i, episode_id=f"{JOB_ID}-{i:06d}",
                        seed=int(np.random.SeedSequence((seed, i)).generate_state(1)[0] >> 1),
                        init_ref=refs[i % len(refs)], action_source="policy", horizon=horizon + 1)
            for i in range(episodes)]


@dataclass
class ModelRollout:
    frames: np.ndarray  # (B, T+1, V, H, W, 3) uint8, frame 0 the initial one
    state: np.ndarray | None  # (B, T+1, S) float32 predicted state (state 0 recorded, if known)
    actions: np.ndarray  # (B, T+1, A) action chosen at each frame (the last is not applied)


def roll_world_model(model: WorldModel, policy: ActionSource, specs: Sequence[EpisodeSpec],
                     horizon: int, progress: Progress | None = None) -> ModelRollout:
    """Roll one batch closed loop: the policy acts on each generated frame, the model steps."""
    frames0, state0 = load_init([s.init_ref for s in specs], model.features)  # (B, V, H, W, 3)
    model.reset(frames0, state=state0, seeds=[s.seed for s in specs])
    b, f = len(specs), model.features
    frames = np.empty((b, horizon + 1, *frames0.shape[1:]), np.uint8)
    actions = np.empty((b, horizon + 1, f.action_dim), np.float32)
    state = np.empty((b, horizon + 1, f.state_dim), np.float32) if model.has_state else None
    frames[:, 0] = frames0
    observation = Observation(frames0, state0)
    policy.reset(specs, observation)
    for t in range(horizon + 1):
        actions[:, t] = check_actions(policy.actions(t, observation), b, f.action_dim, "policy")
        if t == horizon:
            break
        result = model.step(actions[:, t])
        frames[:, t + 1] = result.frames
        if state is not None and result.state is not None:
            state[:, t + 1] = result.state
        observation = Observation(result.frames, result.state)
        if progress is not None:
            progress("world model", b)
    if state is not None:
        state[:, 0] = state0 if state0 is not None else state[:, min(1, horizon)]
    return ModelRollout(frames, state, actions)


def as_episode(spec: EpisodeSpec, rollout: ModelRollout, row: int, features: FeatureSpec,
               model_hash: str, source: str) -> Episode:
    meta = EpisodeMeta(episode_id=spec.episode_id, length=rollout.actions.shape[1], source=source,
                       seed=spec.seed, model_hash=model_hash, job_id=JOB_ID, fps=features.fps,
                       info={"index": spec.index, "init": spec.init_ref})
    return Episode(frames={c: rollout.frames[row, :, v] for v, c in enumerate(features.camera_names)},
                   action=rollout.actions[row], meta=meta,
                   state=None if rollout.state is None else rollout.state[row])


def _batches(specs: Sequence[EpisodeSpec], size: int) -> list[Sequence[EpisodeSpec]]:
    return [specs[i:i + size] for i in range(0, len(specs), size)]


def evaluate_in_model(model: WorldModel, policy: ActionSource, scorer: Scorer,
                      specs: Sequence[EpisodeSpec], horizon: int, batch_size: int, videos: int,
                      progress: Progress | None = None) -> tuple[list[SideScore], list[np.ndarray]]:
    """Scores of every episode, and first-camera frames (T+1, H, W, 3) of the first `videos`."""
    scores: list[SideScore] = []
    kept: list[np.ndarray] = []
    for batch in _batches(specs, batch_size):
        rollout = roll_world_model(model, policy, batch, horizon, progress)
        for row, spec in enumerate(batch):
            episode = as_episode(spec, rollout, row, model.features, model.checkpoint_hash,
                                 policy.describe(row))
            score, success = score_episode(scorer, episode)
            scores.append(SideScore(score=score, success=success))
            if spec.index < videos:
                kept.append(rollout.frames[row, :, 0].copy())
    return scores, kept


def pusht_initial_states(specs: Sequence[EpisodeSpec]) -> list[InitialState]:
    """gym-pusht states of the specs' initial frames, from the Zarr store's recorded agent
    position (state) and block_pose."""
    from pipeline.evaluation.pusht_truth import InitialState
    from sim_model.data.store import EpisodeStore
    from workers.actions.streams import dataset_kind

    states: list[InitialState] = []
    stores: dict[str, EpisodeStore] = {}
    for spec in specs:
        path, episode, frame = parse_ref(spec.init_ref) or (spec.init_ref, 0, 0)
        if dataset_kind(path) != "zarr":
            raise SpecError(f"--ground-truth pusht needs a Zarr episode store as --init (got {path}): "
                            "it reads each start's recorded state and block_pose.")
        if path not in stores:
            stores[path] = EpisodeStore.open(path, "r")
        store = stores[path]
        names = [e.name for e in store.features.extras]
        if store.features.state_dim != 2 or "block_pose" not in names:
            raise SpecError(f"--ground-truth pusht: {path} lacks the agent position (state, 2 values) "
                            "or the block_pose extra; use a store recorded with `iws collect pusht`.")
        step = store.window(episode, frame, frame + 1, keys=["state", "block_pose"])
        states.append(InitialState(step["state"][0].astype(np.float64),
                                   step["block_pose"][0].astype(np.float64)))
    return states


def evaluate_in_pusht(policy: ActionSource, specs: Sequence[EpisodeSpec], features: FeatureSpec,
                      horizon: int, batch_size: int, videos: int, progress: Progress | None = None,
                      ) -> tuple[list[SideScore], list[np.ndarray]]:
    """The same policy from the same initial states in gym-pusht; frames of the first `videos`."""
    from pipeline.evaluation.pusht_truth import roll_pusht

    cam = features.cameras[0]
    if len(features.cameras) != 1 or cam.height != cam.width or features.action_dim != 2:
        raise SpecError("--ground-truth pusht needs a PushT-like model: one square camera and 2-D "
                        f"actions; this model has cameras {list(features.camera_names)} and "
                        f"action_dim {features.action_dim}.")
    states = pusht_initial_states(specs)
    scores: list[SideScore] = []
    kept: list[np.ndarray] = []
    for start in range(0, len(specs), batch_size):
        batch = specs[start:start + batch_size]
        keep = [r for r, s in enumerate(batch) if s.index < videos]
        tick = None if progress is None else functools.partial(progress, "ground truth")
        result = roll_pusht(policy, batch, states[start:start + batch_size], horizon,
                            cam.height, keep_frames=keep, progress=tick)
        for row in range(len(batch)):
            scores.append(SideScore(score=float(result.best[row]), success=bool(result.success[row]),
                                    final=float(result.final[row])))
        kept.extend(result.frames[r] for r in keep)
    return scores, kept


@dataclass
class PolicyEvaluation:
    report: PolicyReport
    model_videos: list[np.ndarray]  # (T+1, H, W, 3) per shown episode
    truth_videos: list[np.ndarray] | None


def summarize(specs: Sequence[EpisodeSpec], model_scores: list[SideScore],
              truth_scores: list[SideScore] | None, seed: int, labels: Mapping[str, object],
              ) -> PolicyReport:
    """The report from per-episode scores; labels: its remaining fields (policy, model, ...)."""
    results = [EpisodeResult(index=s.index, episode_id=s.episode_id, seed=s.seed, init=s.init_ref,
                             world_model=m, ground_truth=None if truth_scores is None else truth_scores[i])
               for i, (s, m) in enumerate(zip(specs, model_scores, strict=True))]

    def side(scores: list[SideScore]) -> Summary:
        return Summary.of([x.score for x in scores], [x.success for x in scores], seed)

    truth = None if truth_scores is None else side(truth_scores)
    return PolicyReport(seed=seed, world_model=side(model_scores), ground_truth=truth,
                        agreement=None if truth_scores is None else Agreement.of(results),
                        episodes=results, **labels)  # type: ignore[arg-type]


def evaluate_policy(model: WorldModel, policy: ActionSource, scorer: Scorer,
                    specs: Sequence[EpisodeSpec], horizon: int, batch_size: int, videos: int,
                    ground_truth: str | None, seed: int, labels: Mapping[str, str],
                    progress: Progress | None = None) -> PolicyEvaluation:
    """Both sides, then the report; labels name the policy, model, init and scorer in it."""
    model_scores, model_videos = evaluate_in_model(model, policy, scorer, specs, horizon,
                                                   batch_size, videos, progress)
    truth_scores, truth_videos = None, None
    if ground_truth == "pusht":
        truth_scores, truth_videos = evaluate_in_pusht(policy, specs, model.features, horizon,
                                                       batch_size, videos, progress)
    elif ground_truth is not None:
        raise SpecError(f"--ground-truth {ground_truth!r} is unknown; the one built in is 'pusht'.")
    report = summarize(specs, model_scores, truth_scores, seed,
                       {**labels, "checkpoint_hash": model.checkpoint_hash, "horizon": horizon,
                        "ground_truth_env": ground_truth})
    return PolicyEvaluation(report, model_videos, truth_videos)
