"""Sweep policies of graded skill, for ranking in the sweep model (issue 31's second regime): the
pixel sweeper, degraded versions of it, and trivial baselines, as `module:Class` policies, e.g.
`experiments.sweep_zoo:SweepNoisy30` (run from the repository root so `experiments` imports).

    iws eval ranking --model sweep --init data/sweep_heldout.zarr --ground-truth sweep \\
        $(for p in SweepDemonstrator SweepNoisy30 SweepNoisy90 SweepSluggish SweepStill SweepRandom; \\
          do echo --policy experiments.sweep_zoo:$p; done) --out runs/ranking_sweep
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pipeline.sweep.demonstrator import SweepDemonstrator
from pipeline.sweep.env import WORKSPACE
from schemas import EpisodeSpec, FeatureSpec
from workers.actions.base import Observation, episode_rng


class _Noisy(SweepDemonstrator):
    """The sweeper with seeded Gaussian noise (`sigma` canvas units) on both pushers' targets."""

    sigma = 0.0

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        super().reset(episodes, observation)
        self.noise = [episode_rng(spec, "sweep-zoo-noise") for spec in episodes]

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        out = super().actions(step, observation)
        jitter = np.stack([rng.normal(0.0, self.sigma, out.shape[1]) for rng in self.noise])
        return np.clip(out + jitter, 0.0, WORKSPACE).astype(np.float32)


class SweepNoisy30(_Noisy):
    sigma = 30.0


class SweepNoisy90(_Noisy):
    sigma = 90.0


class SweepSluggish(SweepDemonstrator):
    """The sweeper acting only every third step (holding its last targets in between)."""

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        super().reset(episodes, observation)
        self.last: np.ndarray | None = None

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        if self.last is None or step % 3 == 0:
            self.last = super().actions(step, observation)
        return self.last


class SweepStill:
    """Keeps both pushers where they start (from the state, else the workspace's centre)."""

    def __init__(self, features: FeatureSpec) -> None:
        self.start: np.ndarray | None = None

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        state = observation.state
        centre = np.full((len(episodes), 4), WORKSPACE / 2, np.float32)
        self.start = centre if state is None else np.asarray(state[:, :4], np.float32).copy()

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        assert self.start is not None
        return self.start


class SweepRandom:
    """New uniformly random pusher targets every `hold` steps (seeded per episode)."""

    hold = 5

    def __init__(self, features: FeatureSpec) -> None:
        self.rngs: list[np.random.Generator] = []
        self.target: np.ndarray | None = None

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        self.rngs = [episode_rng(spec, "sweep-zoo-random") for spec in episodes]
        self.target = None

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        if self.target is None or step % self.hold == 0:
            self.target = np.stack([rng.uniform(0.0, WORKSPACE, 4) for rng in self.rngs]).astype(np.float32)
        return self.target


ZOO = ["SweepDemonstrator", "SweepNoisy30", "SweepNoisy90", "SweepSluggish", "SweepStill", "SweepRandom"]
