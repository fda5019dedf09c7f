"""Action and state scaling to [-1, 1], fitted on the training data and stored in checkpoints."""

from __future__ import annotations

import numpy as np
import torch

from schemas import FeatureSpec
from sim_model.config import Normalization


def _bounds(values: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    low, high = values.min(axis=0).astype(np.float64), values.max(axis=0).astype(np.float64)
    pad = np.maximum((high - low) * 0.01, 1e-3)  # a constant dimension must not divide by zero
    return tuple((low - pad).tolist()), tuple((high + pad).tolist())


def fit_normalization(features: FeatureSpec, actions: np.ndarray | None = None,
                      states: np.ndarray | None = None) -> Normalization:
    """Action bounds from the FeatureSpec when it declares them, else from the data (or [-1, 1]).

    actions: (N, A); states: (N, S) — every step of the training data.
    """
    if features.action_low is not None and features.action_high is not None:
        a_low, a_high = features.action_low, features.action_high
    elif actions is not None and len(actions):
        a_low, a_high = _bounds(actions)
    else:
        a_low, a_high = (-1.0,) * features.action_dim, (1.0,) * features.action_dim
    s_low = s_high = None
    if features.state_dim:
        if states is not None and len(states):
            s_low, s_high = _bounds(states)
        else:
            s_low, s_high = (-1.0,) * features.state_dim, (1.0,) * features.state_dim
    return Normalization(action_low=tuple(a_low), action_high=tuple(a_high),
                         state_low=s_low, state_high=s_high)


class Normalizer:
    """Tensor-side scaling; raw <-> [-1, 1]."""

    def __init__(self, norm: Normalization, device: torch.device) -> None:
        def t(values: tuple[float, ...] | None) -> torch.Tensor | None:
            return None if values is None else torch.tensor(values, dtype=torch.float32, device=device)

        self.a_low = torch.tensor(norm.action_low, dtype=torch.float32, device=device)
        self.a_high = torch.tensor(norm.action_high, dtype=torch.float32, device=device)
        self.s_low, self.s_high = t(norm.state_low), t(norm.state_high)

    def action(self, raw: torch.Tensor) -> torch.Tensor:
        return 2 * (raw - self.a_low) / (self.a_high - self.a_low) - 1

    def state(self, raw: torch.Tensor) -> torch.Tensor:
        assert self.s_low is not None and self.s_high is not None
        return 2 * (raw - self.s_low) / (self.s_high - self.s_low) - 1

    def state_raw(self, normed: torch.Tensor) -> torch.Tensor:
        assert self.s_low is not None and self.s_high is not None
        return (normed.float() + 1) / 2 * (self.s_high - self.s_low) + self.s_low
