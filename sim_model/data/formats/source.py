"""The read side of the EpisodeStore contract, shared by readers of foreign formats.

Anything that offers these members can stand in for an EpisodeStore opened read-only: the
generation job's initial-frame and replay sources, the exporters and `iws import`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol, runtime_checkable

import numpy as np

from schemas import EpisodeMeta, FeatureSpec
from sim_model.data.episode import Episode
from sim_model.data.reader import EpisodeReader


@runtime_checkable
class EpisodeSource(Protocol):
    """Read-only episode access, as `EpisodeStore.open(path, "r")` provides it."""

    @property
    def features(self) -> FeatureSpec: ...

    @property
    def episode_ends(self) -> np.ndarray: ...

    @property
    def n_frames(self) -> int: ...

    def __len__(self) -> int: ...

    def meta(self, i: int) -> EpisodeMeta: ...

    def window(self, i: int, start: int, stop: int,
               keys: Iterable[str] | None = None) -> dict[str, np.ndarray]: ...

    def episode(self, i: int) -> Episode: ...

    def __iter__(self) -> Iterator[Episode]: ...


# The readers of foreign formats share the EpisodeStore's own read side.
ReaderBase = EpisodeReader
