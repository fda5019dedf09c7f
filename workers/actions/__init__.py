"""Action sources: scripted motions, replayed recordings and closed-loop policies.

Each implements `workers.actions.base.ActionSource`: `reset(episodes, observation)` then
`actions(step, observation) -> (B, A)`. `GroupActions` drives a batch whose rows come from
different sources, so a replica can roll any group of episodes in lockstep.

    base.py          ActionSource, Observation, ActionBounds, episode_rng
    scripted.py      seeded parametric motions in action space (random_walk_actions, ...)
    replay.py        recorded action streams, optionally augmented per episode
    streams.py       reading streams from a Zarr store, a LeRobot dataset or JSONL
    policy.py        closed-loop policies (make_policy_source): lerobot's and `module:factory`
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from schemas import EpisodeSpec, FeatureSpec
from schemas.job import ActionSourceSpec, PolicySource, ReplaySource, ScriptedSource
from workers.actions.base import ActionBounds, ActionSource, Observation, check_actions

__all__ = ["ActionBounds", "ActionSource", "GroupActions", "Observation", "make_action_source"]


def make_action_source(cfg: ActionSourceSpec, features: FeatureSpec, device: str = "cpu") -> ActionSource:
    """Build the source a job's `action_sources` entry describes."""
    from workers.actions.policy import make_policy_source
    from workers.actions.replay import ReplayActions
    from workers.actions.scripted import ScriptedActions

    match cfg:
        case ScriptedSource():
            return ScriptedActions(cfg, features)
        case ReplaySource():
            return ReplayActions(cfg, features)
        case PolicySource():
            return make_policy_source(cfg, features, device)
    raise TypeError(f"unknown action source {cfg!r}")


class GroupActions:
    """Lockstep actions for a batch whose rows may use different named sources."""

    def __init__(self, sources: Mapping[str, ActionSource], action_dim: int) -> None:
        self.sources = sources
        self.action_dim = action_dim
        self._rows: dict[str, np.ndarray] = {}
        self._batch = 0

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        self._batch = len(episodes)
        names = [e.action_source for e in episodes]
        self._rows = {n: np.flatnonzero(np.array(names) == n) for n in dict.fromkeys(names)}
        for name, rows in self._rows.items():
            self.sources[name].reset([episodes[r] for r in rows], observation.rows(rows))

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        out = np.empty((self._batch, self.action_dim), np.float32)  # (B, A)
        for name, rows in self._rows.items():
            out[rows] = check_actions(self.sources[name].actions(step, observation.rows(rows)),
                                      len(rows), self.action_dim, f"action source '{name}'")
        return out

    def describe(self, row: int) -> str:
        for name, rows in self._rows.items():
            hit = np.flatnonzero(rows == row)
            if hit.size:
                return self.sources[name].describe(int(hit[0]))
        raise IndexError(row)

