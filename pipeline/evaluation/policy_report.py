"""What `iws eval policy` reports: per-episode scores, summaries with 95% intervals, agreement
between the world model and the ground truth, a terminal table and the rollout video."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from rich.table import Table

from pipeline.evaluation.report import label_strip
from pipeline.evaluation.stats import bootstrap_mean_interval, pearson, wilson_interval
from pipeline.tasks.base import SideScore  # a task's result type, which a report's episodes hold

CONVENTION = ("horizon T: the policy acts at frames 0..T-1, each action yields the next frame; "
              "frames 0..T are scored. World-model side: the scorer on generated frames. Ground "
              "truth (gym-pusht): score = best gym-pusht coverage over frames 0..T, success = "
              "coverage > 0.95 at any frame, as gym-pusht (which ends the episode there) reports.")


class Interval(BaseModel):
    model_config = ConfigDict(extra="forbid")

    low: float
    high: float
    method: str = Field(description="'wilson' (success rate) or 'bootstrap' (mean score).")


class Summary(BaseModel):
    """One side's result over all episodes."""

    model_config = ConfigDict(extra="forbid")

    episodes: int
    mean_score: float
    mean_score_ci95: Interval
    successes: int
    success_rate: float
    success_rate_ci95: Interval

    @classmethod
    def of(cls, scores: Sequence[float], successes: Sequence[bool], seed: int) -> Summary:
        n, k = len(scores), int(np.sum(successes))
        low, high = bootstrap_mean_interval(scores, seed=seed)
        s_low, s_high = wilson_interval(k, n)
        return cls(episodes=n, mean_score=float(np.mean(scores)),
                   mean_score_ci95=Interval(low=low, high=high, method="bootstrap"),
                   successes=k, success_rate=k / n,
                   success_rate_ci95=Interval(low=s_low, high=s_high, method="wilson"))


class EpisodeResult(BaseModel):
    """One episode: where it started and how each side scored it."""

    model_config = ConfigDict(extra="forbid")

    index: int
    episode_id: str
    seed: int
    init: str = Field(description="Initial-frame reference '<dataset>#<episode>:<frame>'.")
    world_model: SideScore
    ground_truth: SideScore | None = None


class Agreement(BaseModel):
    """How far the world model's verdicts follow the ground truth's, episode by episode."""

    model_config = ConfigDict(extra="forbid")

    score_pearson: float | None = Field(description="Pearson r of the paired scores (None if "
                                        "either side is constant).")
    success_agreement: float = Field(description="Share of episodes both sides call the same.")
    mean_score_difference: float = Field(description="Mean of world-model minus ground-truth score.")

    @classmethod
    def of(cls, results: Sequence[EpisodeResult]) -> Agreement:
        pairs = [(r.world_model, r.ground_truth) for r in results if r.ground_truth is not None]
        model = [m.score for m, _ in pairs]
        truth = [t.score for _, t in pairs]
        same = [m.success == t.success for m, t in pairs]
        return cls(score_pearson=pearson(model, truth) if len(pairs) > 1 else None,
                   success_agreement=float(np.mean(same)),
                   mean_score_difference=float(np.mean(np.subtract(model, truth))))


class PolicyReport(BaseModel):
    """metrics.json of `iws eval policy`."""

    model_config = ConfigDict(extra="forbid")

    policy: str
    model: str
    checkpoint_hash: str
    init: str
    scorer: str
    horizon: int
    seed: int
    convention: str = CONVENTION
    world_model: Summary
    ground_truth: Summary | None = None
    ground_truth_env: str | None = Field(default=None, description="e.g. 'pusht' (gym-pusht 0.1.8).")
    agreement: Agreement | None = None
    episodes: list[EpisodeResult]
    videos: list[str] = Field(default_factory=list, description="Files of rollout videos, in --out.")


def _row(name: str, s: Summary) -> list[str]:
    return [name, str(s.episodes), f"{s.mean_score:.3f}",
            f"[{s.mean_score_ci95.low:.3f}, {s.mean_score_ci95.high:.3f}]",
            f"{s.success_rate:.3f} ({s.successes}/{s.episodes})",
            f"[{s.success_rate_ci95.low:.3f}, {s.success_rate_ci95.high:.3f}]"]


def policy_table(report: PolicyReport) -> Table:
    table = Table(title=f"policy {report.policy}: {report.horizon} steps, scorer {report.scorer}")
    for name in ("side", "episodes", "mean score", "95% CI (bootstrap)", "success rate",
                 "95% CI (Wilson)"):
        table.add_column(name, justify="left" if name == "side" else "right")
    table.add_row(*_row("world model", report.world_model))
    if report.ground_truth is not None:
        table.add_row(*_row(f"ground truth ({report.ground_truth_env})", report.ground_truth))
    if report.agreement is not None:
        a = report.agreement
        r = "-" if a.score_pearson is None else f"{a.score_pearson:.3f}"
        table.caption = (f"paired: score Pearson r {r}, success agreement "
                         f"{a.success_agreement:.3f}, mean score difference {a.mean_score_difference:+.3f}")
    return table


def rollout_grid(model: Sequence[np.ndarray], truth: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """(T, H', W', 3): one row per episode of (T, H, W, 3) first-camera frames under a label
    strip; with ground truth, its frames left of the world model's. Small frames are upscaled."""
    rows = []
    for i, frames in enumerate(model):
        parts = [frames] if truth is None else [truth[i], _gap(frames, axis=2), frames]
        rows.append(np.concatenate(parts, axis=2))
    grid = np.concatenate([p for r in rows for p in (r, _gap(r, axis=1))][:-1], axis=1)
    factor = max(1, -(-96 // model[0].shape[1]))
    grid = grid.repeat(factor, axis=1).repeat(factor, axis=2)
    width = (model[0].shape[2] + 2) * factor  # one view and its gap, upscaled
    labels = ["world model"] if truth is None else ["ground truth", "world model"]
    header = label_strip(grid.shape[2], [(i * width, text) for i, text in enumerate(labels)])
    return np.concatenate([np.broadcast_to(header, (len(grid), *header.shape)), grid], axis=1)


def _gap(frames: np.ndarray, axis: int, width: int = 2) -> np.ndarray:
    shape = list(frames.shape)
    shape[axis] = width
    return np.full(shape, 255, np.uint8)
