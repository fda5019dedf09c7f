"""Recorded action streams: from a Zarr EpisodeStore, a LeRobot v3.0 dataset (both read through
sim_model.data.formats), or JSONL files."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from schemas import SpecError
from sim_model import storage
from sim_model.data.formats import dataset_kind
from sim_model.data.formats.lerobot_reader import read_actions


def _read_jsonl(path: Path) -> list[np.ndarray]:
    episodes: list[np.ndarray] = []
    steps: dict[int, list[list[float]]] = defaultdict(list)
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            action = np.asarray(row["action"], dtype=np.float32)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            raise SpecError(f"{path}:{number}: expected a JSON object with an 'action' list ({error}).") from None
        if action.ndim == 2:  # one episode per line
            episodes.append(action)
        elif action.ndim == 1 and "episode" in row:  # one step per line
            steps[int(row["episode"])].append(action.tolist())
        else:
            raise SpecError(f"{path}:{number}: 'action' must be a list of steps, or one step with an "
                            "'episode' index beside it.")
    if episodes and steps:
        raise SpecError(f"{path} mixes per-episode and per-step lines; use one form.")
    if steps:
        episodes = [np.asarray(steps[k], np.float32) for k in sorted(steps)]
    if not episodes:
        raise SpecError(f"{path} holds no action streams.")
    return episodes


class ActionStreams:
    """Lazily loaded action streams (each (T, A) float32) of one recording, selected by index."""

    def __init__(self, path: str, episodes: list[int] | None = None) -> None:
        self.path = path
        self.kind = dataset_kind(path)
        self._store: Any = None  # EpisodeStore for Zarr recordings
        self._all: list[np.ndarray] | None = None
        total = self._total()
        self.indices = list(range(total)) if episodes is None else list(episodes)
        bad = [i for i in self.indices if not 0 <= i < total]
        if bad:
            raise SpecError(f"replay episodes {bad} are out of range: {path} holds {total} episodes.")
        if not self.indices:
            raise SpecError(f"replay source {path} selects no episodes.")
        self._cache: dict[int, np.ndarray] = {}

    def _total(self) -> int:
        if self.kind in ("zarr", "shards"):
            from sim_model.data.formats import open_dataset
            from sim_model.data.store import EpisodeStore

            self._store = (EpisodeStore.open(self.path, "r") if self.kind == "zarr"
                           else open_dataset(self.path))
            return len(self._store)
        local = storage.fetch(self.path)  # s3://: a cached local copy
        self._all = _read_jsonl(local) if self.kind == "jsonl" else read_actions(local)
        return len(self._all)

    @property
    def action_dim(self) -> int:
        return int(self.stream(0).shape[-1])

    def __len__(self) -> int:
        return len(self.indices)

    def stream(self, k: int) -> np.ndarray:
        """The k-th selected stream (k wraps around), (T, A) float32."""
        index = self.indices[k % len(self.indices)]
        if index not in self._cache:
            if self._store is not None:
                start, stop = self._store.episode_range(index)
                self._cache[index] = np.asarray(
                    self._store.window(index, 0, stop - start, keys=["action"])["action"], np.float32)
            else:
                assert self._all is not None
                self._cache[index] = self._all[index]
        return self._cache[index]
