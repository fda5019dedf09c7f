"""The action-source interface: a batch of episodes advances in lockstep, one call per step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from schemas import EpisodeSpec, FeatureSpec, SpecError


@dataclass(frozen=True)
class Observation:
    """What an action source sees at one step, for every row of its batch."""

    frames: np.ndarray  # (B, V, H, W, 3) uint8, the world model's latest frames
    state: np.ndarray | None  # (B, S) float32 predicted proprioceptive state, or None

    def rows(self, index: np.ndarray) -> Observation:
        """The observation of a subset of rows (index: int array)."""
        return Observation(self.frames[index], None if self.state is None else self.state[index])

    def __len__(self) -> int:
        return len(self.frames)


class ActionSource(Protocol):
    """Produces actions for a fixed batch of episodes stepping together.

    `reset` is called once with the batch's episode specs and first observation; then
    `actions(step, observation)` once per step (step 0 sees the initial frames) and returns
    float32 (B, A) actions in the dataset's raw units. A row's actions depend only on that
    row's spec (its seed) and observations, never on the other rows of the batch.
    """

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None: ...

    def actions(self, step: int, observation: Observation) -> np.ndarray: ...

    def describe(self, row: int) -> str:
        """Label stored as EpisodeMeta.source for `row`, e.g. 'scripted:push'."""
        ...


@dataclass(frozen=True)
class ActionBounds:
    """Per-dimension action range from the FeatureSpec."""

    low: np.ndarray  # (A,) float32
    high: np.ndarray  # (A,) float32

    @classmethod
    def from_features(cls, features: FeatureSpec, *, purpose: str) -> ActionBounds:
        if features.action_low is None or features.action_high is None:
            raise SpecError(f"{purpose} needs the action range, but the model's FeatureSpec has no "
                            "action_low/action_high; set them in the checkpoint's features.")
        return cls(np.asarray(features.action_low, np.float32), np.asarray(features.action_high, np.float32))

    @property
    def span(self) -> np.ndarray:
        return self.high - self.low

    def clip(self, actions: np.ndarray) -> np.ndarray:
        return np.clip(actions, self.low, self.high).astype(np.float32)


def episode_rng(spec: EpisodeSpec, stream: str) -> np.random.Generator:
    """A generator private to one episode and one purpose (actions, augmentation, ...)."""
    return np.random.default_rng([spec.seed, int.from_bytes(stream.encode()[:8].ljust(8, b"\0"), "little")])


def check_actions(actions: np.ndarray, batch: int, action_dim: int, who: str) -> np.ndarray:
    """Validate what an action source (possibly user code) returned."""
    actions = np.asarray(actions, dtype=np.float32)
    if actions.shape != (batch, action_dim):
        raise SpecError(f"{who} returned actions of shape {actions.shape}; expected ({batch}, {action_dim}) "
                        "(batch rows x action_dim).")
    if not np.isfinite(actions).all():
        raise SpecError(f"{who} returned NaN or inf actions.")
    return actions
