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


class NoisyMixin:
    """A demonstrator with seeded Gaussian noise (`sigma` canvas units) on every action, clipped
    to the canvas [0, `high`]; mixed in before the demonstrator's class."""

    sigma = 0.0
    high = 512.0
    stream = "zoo-noise"

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        super().reset(episodes, observation)  # type: ignore[misc]
        self.noise = [episode_rng(spec, self.stream) for spec in episodes]

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        out = super().actions(step, observation)  # type: ignore[misc]
        jitter = np.stack([rng.normal(0.0, self.sigma, out.shape[1]) for rng in self.noise])
        return np.clip(out + jitter, 0.0, self.high).astype(np.float32)


class Noisy10(NoisyMixin, PushTDemonstrator):
    sigma = 10.0


class Noisy30(NoisyMixin, PushTDemonstrator):
    sigma = 30.0


class Noisy60(NoisyMixin, PushTDemonstrator):
    sigma = 60.0


class SluggishMixin:
    """A demonstrator acting only every third step (holding its last target in between)."""

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        super().reset(episodes, observation)  # type: ignore[misc]
        self.last: np.ndarray | None = None

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        if self.last is None or step % 3 == 0:
            self.last = super().actions(step, observation)  # type: ignore[misc]
        return self.last


class Sluggish(SluggishMixin, PushTDemonstrator):
    pass


class Still:
    """Keeps the agent where it starts (from the state): never touches the T unless it starts so.
    `dims` action dimensions, taken from the state's first ones (the canvas centre without one)."""

    dims = 2

    def __init__(self, features: FeatureSpec) -> None:
        self.start: np.ndarray | None = None

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        state = observation.state
        self.start = (np.full((len(episodes), self.dims), 256.0, np.float32) if state is None
                      else np.asarray(state[:, :self.dims], np.float32).copy())

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        assert self.start is not None
        return self.start


class Random:
    """A new uniformly random target (`dims` values in [0, `high`]) every `hold` steps (seeded per
    episode)."""

    hold = 5
    dims = 2
    high = 512.0
    stream = "zoo-random"

    def __init__(self, features: FeatureSpec) -> None:
        self.rngs: list[np.random.Generator] = []
        self.target: np.ndarray | None = None

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        self.rngs = [episode_rng(spec, self.stream) for spec in episodes]
        self.target = None

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        if self.target is None or step % self.hold == 0:
            self.target = np.stack([rng.uniform(0.0, self.high, self.dims) for rng in self.rngs]).astype(np.float32)
        return self.target


ZOO = ["PushTDemonstrator", "Noisy10", "Sluggish", "Noisy30", "Noisy60", "Still", "Random"]
