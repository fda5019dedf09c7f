"""Score a policy closed loop inside a world model (and in a task's ground truth beside it).

Episode i starts from initial-frame reference i (the init dataset's episodes in order, reused
round-robin when more episodes are asked for) with seed SeedSequence((seed, i)), so the world
model's noise and a stochastic policy's draws are the same for a row whatever the batch size.
The policy is the generation job's policy source (workers.actions.policy): a 'module:function'
callable or class, or a LeRobot pretrained-policy directory, seeing frames (B, V, H, W, 3) uint8
and state (B, S) and returning actions (B, A). Every episode is scored by a workers.scoring
scorer from its frames (and predicted state). With a task (pipeline.tasks.base.Task) as ground
truth, the same policy also runs from the same initial frames in the task's own environment,
e.g. gym-pusht.
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
from workers.actions.base import ActionSource
from workers.closed_loop import ClosedLoopRollout, roll_closed_loop
from workers.scoring import Scorer, score_episode

if TYPE_CHECKING:
    from pipeline.tasks.base import Task

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


def roll_world_model(model: WorldModel, policy: ActionSource, specs: Sequence[EpisodeSpec],
                     progress: Progress | None = None) -> ClosedLoopRollout:
    """Roll one batch closed loop (workers.closed_loop): the policy acts on each generated frame."""
    on_step = None if progress is None else functools.partial(progress, "world model")
    return roll_closed_loop(model, policy, specs, on_step=on_step)


def as_episode(spec: EpisodeSpec, rollout: ClosedLoopRollout, row: int, features: FeatureSpec,
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
                      specs: Sequence[EpisodeSpec], batch_size: int, videos: int,
                      progress: Progress | None = None) -> tuple[list[SideScore], list[np.ndarray]]:
    """Scores of every episode, and first-camera frames (T+1, H, W, 3) of the first `videos`."""
    scores: list[SideScore] = []
    kept: list[np.ndarray] = []
    for batch in _batches(specs, batch_size):
        rollout = roll_world_model(model, policy, batch, progress)
        for row, spec in enumerate(batch):
            episode = as_episode(spec, rollout, row, model.features, model.checkpoint_hash,
                                 policy.describe(row))
            score, success = score_episode(scorer, episode)
            scores.append(SideScore(score=score, success=success))
            if spec.index < videos:
                kept.append(rollout.frames[row, :, 0].copy())
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
                    ground_truth: Task | None, seed: int, labels: Mapping[str, str],
                    progress: Progress | None = None) -> PolicyEvaluation:
    """Both sides, then the report; labels name the policy, model, init and scorer in it."""
    model_scores, model_videos = evaluate_in_model(model, policy, scorer, specs, batch_size, videos,
                                                   progress)
    truth_scores, truth_videos = None, None
    if ground_truth is not None:
        tick = None if progress is None else functools.partial(progress, "ground truth")
        truth_scores, truth_videos = ground_truth.roll_ground_truth(
            policy, specs, model.features, horizon, batch_size, videos, tick)
    report = summarize(specs, model_scores, truth_scores, seed,
                       {**labels, "checkpoint_hash": model.checkpoint_hash, "horizon": horizon,
                        "ground_truth_env": None if ground_truth is None else ground_truth.name})
    return PolicyEvaluation(report, model_videos, truth_videos)
