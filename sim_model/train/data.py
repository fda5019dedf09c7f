"""Training data: every action and state of an episode store in RAM, split by episode; its
frames in RAM too, or, with a cache size, read as batches need them (frames.py)."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from schemas import FeatureSpec
from schemas.errors import SpecError
from sim_model.data.episode import Episode
from sim_model.train.frames import StreamedFrames

if TYPE_CHECKING:
    from sim_model.data.shards import ShardedDataset
    from sim_model.data.store import EpisodeStore

log = logging.getLogger(__name__)


def open_training_store(path: str | os.PathLike[str]) -> EpisodeStore | ShardedDataset:
    """An episode store, or a generation job's sharded dataset (OUT/dataset), which trains as it
    is, like one store."""
    from sim_model.data.shards import ShardedDataset, is_sharded
    from sim_model.data.store import EpisodeStore

    return ShardedDataset(path) if is_sharded(os.fspath(path)) else EpisodeStore.open(path, mode="r")


@dataclass
class TrainingData:
    features: FeatureSpec
    frames: torch.Tensor | StreamedFrames  # (N, V, H, W, 3) uint8
    actions: np.ndarray  # (N, A) float32
    states: np.ndarray | None  # (N, S) float32
    ends: np.ndarray  # (E,) int64 cumulative episode ends
    cache_bytes: int | None = None  # streamed: the budget of each cache (frames, latents)

    @classmethod
    def from_store(cls, path: str | os.PathLike[str], cache_mb: float | None = None) -> TrainingData:
        """The store's data; with `cache_mb`, frames are streamed through a cache of that many
        MiB (and the dynamics' latent cache gets as much) instead of loaded whole."""
        store = open_training_store(path)
        if len(store) == 0:
            raise SpecError(f"the episode store at {path} holds no complete episodes; collect data "
                            "first (e.g. `iws collect`).")
        features = store.features
        names = features.camera_names
        if cache_mb is not None:
            if cache_mb <= 0:
                raise SpecError(f"the frame cache must be a positive size in MiB, not {cache_mb}.")
            budget = int(cache_mb * 2**20)
            lowdim = ["action"] + (["state"] if features.state_dim else [])
            arrays, ends = store.load_all(lowdim)
            streamed = StreamedFrames(store, list(names), budget)
            log.info("%d episodes, %d frames in %s: actions loaded, frames streamed through a %.0f MiB "
                     "cache (%.0f MiB in all)", len(ends), len(streamed), path, cache_mb,
                     len(streamed) * streamed.frame_bytes / 2**20)
            return cls(features, streamed, arrays["action"].astype(np.float32),
                       arrays["state"].astype(np.float32) if features.state_dim else None, ends, budget)
        keys = [*names, "action"] + (["state"] if features.state_dim else [])
        arrays, ends = store.load_all(keys)
        # (N, V, H, W, 3); one camera needs no copy of what may be gigabytes
        frames = arrays[names[0]][:, None] if len(names) == 1 else np.stack([arrays[c] for c in names], 1)
        log.info("loaded %d episodes, %d frames from %s", len(ends), len(frames), path)
        return cls(features, torch.from_numpy(frames), arrays["action"].astype(np.float32),
                   arrays["state"].astype(np.float32) if features.state_dim else None, ends)

    @classmethod
    def from_episodes(cls, episodes: Sequence[Episode], features: FeatureSpec) -> TrainingData:
        frames = np.concatenate([np.stack([e.frames[c] for c in features.camera_names], 1)
                                 for e in episodes])
        actions = np.concatenate([e.action for e in episodes]).astype(np.float32)
        states = (np.concatenate([e.state for e in episodes if e.state is not None]).astype(np.float32)
                  if features.state_dim else None)
        ends = np.cumsum([len(e) for e in episodes]).astype(np.int64)
        return cls(features, torch.from_numpy(frames), actions, states, ends)

    def data_hash(self) -> str:
        """sha256 (16 hex) over episode boundaries, actions, states and frames."""
        digest = hashlib.sha256()
        for array in (self.ends, self.actions, self.states):
            if array is not None:
                digest.update(np.ascontiguousarray(array).data)  # the buffer itself: no copy
        # Streamed frames are hashed one episode at a time: the same bytes in the same order.
        blocks = (self.frames.episode_blocks() if isinstance(self.frames, StreamedFrames)
                  else [self.frames.numpy()])
        for block in blocks:
            digest.update(np.ascontiguousarray(block).data)
        return digest.hexdigest()[:16]

    def split(self, val_fraction: float, seed: int) -> tuple[DataView, DataView]:
        """Train/validation views by whole episodes (at least one each when there are two)."""
        n = len(self.ends)
        order = np.random.default_rng(seed).permutation(n)
        n_val = 0 if n < 2 or val_fraction == 0 else max(1, round(n * val_fraction))
        val, train = np.sort(order[:n_val]), np.sort(order[n_val:])
        return DataView(self, train), DataView(self, val if n_val else train)


class DataView:
    """A subset of episodes; draws frame indices or time windows from them."""

    def __init__(self, data: TrainingData, episodes: np.ndarray) -> None:
        self.data, self.episodes = data, episodes
        starts = np.concatenate([[0], data.ends[:-1]])
        self._starts, self._stops = starts[episodes], data.ends[episodes]
        self._window_cache: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return int((self._stops - self._starts).sum())

    def frame_indices(self, rng: np.random.Generator, batch: int) -> np.ndarray:
        """(B,) global frame indices, uniform over this view's frames."""
        all_idx = self._window_starts(1)
        return all_idx[rng.integers(0, len(all_idx), batch)]

    def window_indices(self, rng: np.random.Generator, batch: int, length: int) -> np.ndarray:
        """(B, length) global indices of consecutive frames inside one episode each."""
        starts = self._window_starts(length)
        if len(starts) == 0:
            longest = int((self._stops - self._starts).max())
            raise SpecError(f"no episode is {length} steps long (longest: {longest}); lower the "
                            "dynamics window / context or record longer episodes.")
        first = starts[rng.integers(0, len(starts), batch)]
        return first[:, None] + np.arange(length)[None]

    def _window_starts(self, length: int) -> np.ndarray:
        if length not in self._window_cache:
            parts = [np.arange(a, b - length + 1) for a, b in zip(self._starts, self._stops, strict=True)
                     if b - a >= length]
            self._window_cache[length] = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return self._window_cache[length]
