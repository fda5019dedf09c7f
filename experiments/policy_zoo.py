"""PushT policies of graded skill, for ranking experiments: the demonstrator, degraded versions of
it, and trivial baselines. Each is a 'module:Class' policy (built with the FeatureSpec), e.g.
`experiments.policy_zoo:Noisy30` (run from the repository root so `experiments` imports).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pipeline.pusht.demonstrator import PushTDemonstrator
from schemas import EpisodeSpec, FeatureSpec
from workers.actions.base import Observation, episode_rng


class _Noisy(PushTDemonstrator):
    """The demonstrator with seeded Gaussian noise (`sigma` canvas units) on every action."""

    sigma = 0.0

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        super().reset(episodes, observation)
        self.noise = [episode_rng(spec, "zoo-noise") for spec in episodes]

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        out = super().actions(step, observation)
        jitter = np.stack([rng.normal(0.0, self.sigma, 2) for rng in self.noise])
        return np.clip(out + jitter, 0.0, 512.0).astype(np.float32)


class Noisy10(_Noisy):
    sigma = 10.0


class Noisy30(_Noisy):
    sigma = 30.0


class Noisy60(_Noisy):
    sigma = 60.0


class Sluggish(PushTDemonstrator):
    """The demonstrator acting only every third step (holding its last target in between)."""

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        super().reset(episodes, observation)
        self.last: np.ndarray | None = None

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        if self.last is None or step % 3 == 0:
            self.last = super().actions(step, observation)
        return self.last


class Still:
    """Keeps the agent where it starts (from the state): never touches the T unless it starts so."""

    def __init__(self, features: FeatureSpec) -> None:
        self.start: np.ndarray | None = None

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        state = observation.state
        self.start = np.full((len(episodes), 2), 256.0, np.float32) if state is None else state[:, :2].copy()

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        assert self.start is not None
        return self.start


class Random:
    """A new uniformly random agent target every `hold` steps (seeded per episode)."""

    hold = 5

    def __init__(self, features: FeatureSpec) -> None:
        self.rngs: list[np.random.Generator] = []
        self.target: np.ndarray | None = None

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        self.rngs = [episode_rng(spec, "zoo-random") for spec in episodes]
        self.target = None

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        if self.target is None or step % self.hold == 0:
            self.target = np.stack([rng.uniform(0.0, 512.0, 2) for rng in self.rngs]).astype(np.float32)
        return self.target


ZOO = ["PushTDemonstrator", "Noisy10", "Sluggish", "Noisy30", "Noisy60", "Still", "Random"]
