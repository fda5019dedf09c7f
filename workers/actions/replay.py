"""Replay action source: recorded action streams, optionally augmented per episode."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from schemas import EpisodeSpec, FeatureSpec, SpecError
from schemas.job import ReplaySource
from workers.actions.base import ActionBounds, Observation, episode_rng
from workers.actions.streams import ActionStreams


def stretch(stream: np.ndarray, factor: float, steps: int) -> np.ndarray:
    """Resample (T, A) so step t reads time t / factor (linear interpolation), holding the last action."""
    times = np.minimum(np.arange(steps) / factor, len(stream) - 1)
    lo = np.floor(times).astype(int)
    hi = np.minimum(lo + 1, len(stream) - 1)
    w = (times - lo)[:, None]
    return ((1 - w) * stream[lo] + w * stream[hi]).astype(np.float32)


class ReplayActions:
    """Episode k of the job replays stream (k mod count); augmentation drawn from the episode seed."""

    def __init__(self, cfg: ReplaySource, features: FeatureSpec) -> None:
        self.cfg = cfg
        self.streams = ActionStreams(cfg.path, cfg.episodes)
        if self.streams.action_dim != features.action_dim:
            raise SpecError(f"replay source {cfg.path} has {self.streams.action_dim}-D actions but the "
                            f"model takes {features.action_dim}-D actions.")
        augmenting = cfg.noise_std > 0 or cfg.offset_std > 0
        has_bounds = features.action_low is not None and features.action_high is not None
        self.bounds = (ActionBounds.from_features(features, purpose="replay augmentation (noise/offset)")
                       if augmenting or has_bounds else None)
        self._plans = np.zeros((0, 0, features.action_dim), np.float32)
        self._labels: list[str] = []

    def plan(self, spec: EpisodeSpec) -> np.ndarray:
        """Actions (horizon, A) of one episode."""
        rng = episode_rng(spec, "replay")
        factor = float(rng.uniform(*self.cfg.time_stretch))
        actions = stretch(self.streams.stream(spec.index), factor, spec.horizon)
        if self.bounds is not None:
            span = self.bounds.span
            actions = actions + rng.normal(size=span.shape) * self.cfg.offset_std * span
            actions = actions + rng.normal(size=actions.shape) * self.cfg.noise_std * span
            actions = self.bounds.clip(actions)
        return actions.astype(np.float32)

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        plans = [self.plan(spec) for spec in episodes]
        self._labels = [f"replay:{self.streams.indices[s.index % len(self.streams)]}" for s in episodes]
        self._plans = np.stack(plans) if plans else self._plans  # (B, T, A)

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        return self._plans[:, step]

    def describe(self, row: int) -> str:
        return self._labels[row]
