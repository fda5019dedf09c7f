"""The read side of the episode-store contract, shared by the EpisodeStore and the readers of
foreign formats (LeRobot, Diffusion-Policy Zarr) so that either can stand in for the other."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from schemas import EpisodeMeta, FeatureSpec
from sim_model.data.episode import Episode
from sim_model.data.store_layout import data_layout


class EpisodeReader:
    """Episode bookkeeping over concatenated per-step arrays. Subclasses set `_features` and
    `_ends` (cumulative int64) and implement `meta(i)` and `_read(i, start, stop, keys)`."""

    _features: FeatureSpec
    _ends: np.ndarray

    @property
    def features(self) -> FeatureSpec:
        return self._features

    @property
    def keys(self) -> tuple[str, ...]:
        """Data keys in store order: cameras, "action", "state" (if any), extras."""
        return tuple(data_layout(self._features))

    @property
    def episode_ends(self) -> np.ndarray:
        """Cumulative end row of every committed episode, int64."""
        return self._ends

    @property
    def n_frames(self) -> int:
        return int(self._ends[-1]) if len(self._ends) else 0

    def __len__(self) -> int:
        return len(self._ends)

    def episode_range(self, i: int) -> tuple[int, int]:
        """Rows [start, stop) of episode `i` in the concatenated timeline."""
        n = len(self._ends)
        if not -n <= i < n:
            raise IndexError(f"episode {i} is out of range; {self._name()} has {n} episodes")
        i %= n
        return (int(self._ends[i - 1]) if i else 0), int(self._ends[i])

    def window(self, i: int, start: int, stop: int,
               keys: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """Steps [start, stop) of episode `i` for `keys` (default: every key)."""
        first, last = self.episode_range(i)
        if not 0 <= start <= stop <= last - first:
            raise IndexError(f"window [{start}, {stop}) does not fit episode {i} of length "
                             f"{last - first}; need 0 <= start <= stop <= length")
        return self._read(i % len(self), start, stop, self._pick(keys))

    def episode(self, i: int) -> Episode:
        first, last = self.episode_range(i)
        data = self.window(i, 0, last - first)
        return Episode(
            frames={c: data[c] for c in self._features.camera_names},
            action=data["action"],
            meta=self.meta(i),
            state=data.get("state"),
            extras={e.name: data[e.name] for e in self._features.extras},
        )

    def __iter__(self) -> Iterator[Episode]:
        for i in range(len(self)):
            yield self.episode(i)

    def meta(self, i: int) -> EpisodeMeta:
        raise NotImplementedError

    def _read(self, i: int, start: int, stop: int, keys: list[str]) -> dict[str, np.ndarray]:
        """Steps [start, stop) of episode `i` (already bounds-checked) for `keys`."""
        raise NotImplementedError

    def _name(self) -> str:
        """How messages name this dataset."""
        return str(getattr(self, "path", "the dataset"))

    def _pick(self, keys: Iterable[str] | None) -> list[str]:
        if keys is None:
            return list(self.keys)
        keys = [keys] if isinstance(keys, str) else list(keys)
        unknown = [k for k in keys if k not in self.keys]
        if unknown:
            raise KeyError(f"unknown keys {unknown}; {self._name()} has {list(self.keys)}")
        return keys
