"""Callables that job specs in tests name as 'tests.workers.policies:<name>'."""

from __future__ import annotations

import numpy as np

from schemas import FeatureSpec
from sim_model.data.episode import Episode
from workers.actions import Observation


def brightness_policy(step: int, observation: Observation) -> np.ndarray:
    """Closed loop on pixels: x follows the mean brightness of the frame, y the step."""
    mean = observation.frames.reshape(len(observation), -1).mean(axis=1)  # (B,)
    return np.stack([mean * 2.0, np.full_like(mean, 10.0 * step)], axis=1).astype(np.float32)


class StatefulPolicy:
    """A class policy: built once with the FeatureSpec, remembers its last action per row."""

    def __init__(self, features: FeatureSpec) -> None:
        self.dim = features.action_dim
        self.last: np.ndarray | None = None

    def reset(self, episodes, observation: Observation) -> None:
        self.last = np.full((len(episodes), self.dim), 100.0, np.float32)

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        assert self.last is not None
        self.last = self.last + 5.0
        return self.last


def wrong_shape_policy(step: int, observation: Observation) -> np.ndarray:
    return np.zeros((len(observation), 7), np.float32)


def even_seed_scorer(episode: Episode) -> tuple[float, bool]:
    """Success for episodes whose index is even (deterministic, easy to check)."""
    index = int(episode.meta.info["index"])
    return float(index), index % 2 == 0


def thirds_plausibility(episode: Episode) -> dict[str, float]:
    """A plausibility check by episode index: 0, 1/2, 1 in turn (deterministic, easy to check)."""
    index = int(episode.meta.info["index"])
    return {"plausibility": (index % 3) / 2, "index": float(index)}


NOT_CALLABLE = 42
