"""The Zarr episode store every part of iws reads and writes (layout: see store_layout.py).

One writer per store; any number of readers, in any number of processes. Crash consistency:
an append writes the data arrays first, then the episode's metadata, and extends
`meta/episode_ends` last, so a writer killed at any instant leaves every earlier episode intact.
Readers trust only the committed prefix; `open(mode="a")` truncates a torn tail. A file that is
there but cannot be decoded (disk damage, a half-copied store) raises StoreDamaged naming it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import zarr

from schemas import EpisodeMeta, FeatureSpec, SpecError
from sim_model.data import store_layout as layout
from sim_model.data.episode import Episode
from sim_model.data.reader import EpisodeReader
from sim_model.data.store_damage import DECODE_ERRORS, StoreDamaged, bad_chunk, damaged, locate
from sim_model.storage.uri import is_url

__all__ = ["EpisodeStore", "StoreDamaged", "StoreNotFound"]

log = logging.getLogger(__name__)

Mode = Literal["r", "a"]


class StoreNotFound(SpecError):
    """No episode store at the location."""


class EpisodeStore(EpisodeReader):
    """Episodes concatenated along time in `data/<key>`, delimited by `meta/episode_ends`.

    Build with `EpisodeStore.create` or `EpisodeStore.open`. A pickled store (e.g. sent to
    DataLoader workers) reopens by location in read-only mode in the receiving process.
    """

    def __init__(self, location: str, root: Any, mode: Mode,
                 storage_options: dict[str, Any] | None) -> None:
        self._location = location
        self._root = root
        self._mode = mode
        self._storage_options = storage_options
        self._features = _read_features(root, location)
        self._keys = tuple(layout.data_layout(self._features))
        self._ids: set[str] | None = None  # episode ids, loaded on first append
        self.refresh()

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def create(cls, path: str | os.PathLike[str], features: FeatureSpec, *, overwrite: bool = False,
               storage_options: dict[str, Any] | None = None) -> EpisodeStore:
        """A new empty store at `path`, opened for appending."""
        location = layout.location_str(path)
        store = layout.zarr_store(location, read_only=False, storage_options=storage_options)
        existing = _try_open_group(store)
        if existing is not None and not overwrite:
            raise SpecError(f"a Zarr store already exists at {location}; pass overwrite=True to "
                            "replace it, or EpisodeStore.open(path, mode='a') to append to it.")
        if existing is None and _holds_other_data(location, store):
            # zarr's mode="w" below would delete whatever is there (a whole bucket, for s3://b).
            kind = "prefix" if is_url(location) else "directory"
            raise SpecError(f"{location} is a non-empty {kind} that is not a Zarr store; "
                            "choose a new path for the episode store.")
        root = zarr.open_group(store, mode="w", zarr_format=2)
        layout.create_arrays(root, features)
        # Attributes last: a store without them is rejected on open, never half-trusted.
        root.attrs[layout.ATTR_KEY] = {"version": layout.FORMAT_VERSION,
                                       "features": features.model_dump(mode="json")}
        log.debug("created episode store at %s", location)
        return cls(location, root, "a", storage_options)

    @classmethod
    def write_packed(cls, path: str | os.PathLike[str], features: FeatureSpec, episodes: list[Episode],
                     *, storage_options: dict[str, Any] | None = None) -> None:
        """Write `episodes` as a new packed store at `path` (zarr format 3, each array one
        object: store_layout.create_packed_arrays), in one go; it opens with `open` like any
        store. Data first, then the episodes' metadata, `meta/episode_ends` and the root
        attributes last, so a store cut short is never taken for a whole one (`open` refuses
        it). For a location that is built and then published whole (a job's shard)."""
        location = layout.location_str(path)
        store = layout.zarr_store(location, read_only=False, storage_options=storage_options)
        if _try_open_group(store) is not None or _holds_other_data(location, store):
            raise SpecError(f"{location} is not empty; a packed store is written whole to a new path.")
        checked = [layout.check_episode(e, features) for e in episodes]
        ids = [e.meta.episode_id for e in episodes]
        if len(set(ids)) != len(ids):
            raise SpecError(f"episode ids must be unique in a store; {location} was given {ids}.")
        lengths = np.array([len(e) for e in episodes], dtype=np.int64)
        root = zarr.open_group(store, mode="w", zarr_format=3)
        arrays = layout.create_packed_arrays(root, features, int(lengths.sum()), len(episodes))
        for key in layout.data_layout(features):
            if checked:
                arrays[key][:] = np.concatenate([c[key] for c in checked])
        if episodes:
            arrays[layout.META_KEY][:] = np.array([e.meta.model_dump_json() for e in episodes], dtype=object)
            arrays[layout.ENDS_KEY][:] = np.cumsum(lengths)
        root.attrs[layout.ATTR_KEY] = {"version": layout.FORMAT_VERSION,
                                       "features": features.model_dump(mode="json")}

    @classmethod
    def open(cls, path: str | os.PathLike[str], mode: Mode = "r", *,
             storage_options: dict[str, Any] | None = None) -> EpisodeStore:
        """Open an existing store: "r" read-only, "a" append (first repairs a torn tail)."""
        if mode not in ("r", "a"):
            raise SpecError(f"mode={mode!r} is not valid; use 'r' (read) or 'a' (append).")
        location = layout.location_str(path)
        missing = not is_url(location) and not Path(location).is_dir()
        store = None if missing else layout.zarr_store(location, read_only=mode == "r",
                                                       storage_options=storage_options)
        root = None
        try:
            root = None if store is None else _try_open_group(store)
            episode_store = None if root is None else cls(location, root, mode, storage_options)
        except DECODE_ERRORS as error:
            raise damaged(location, locate(location, root, (layout.ENDS_KEY, layout.META_KEY)),
                          error) from None
        if episode_store is None:  # outside the try: a missing store is not a damaged one
            raise StoreNotFound(_not_found(location))
        if mode == "a":
            episode_store._repair()
        return episode_store

    def __getstate__(self) -> dict[str, Any]:
        return {"location": self._location, "storage_options": self._storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        other = EpisodeStore.open(state["location"], "r", storage_options=state["storage_options"])
        self.__dict__.update(other.__dict__)

    # -- what is in it --------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._location

    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def keys(self) -> tuple[str, ...]:
        """Data keys in store order: cameras, "action", "state" (if any), extras."""
        return self._keys

    def __repr__(self) -> str:
        return (f"EpisodeStore({self._location!r}, mode={self._mode!r}, episodes={len(self)}, "
                f"frames={self.n_frames})")

    def refresh(self) -> None:
        """Re-read the committed episodes (a reader following a live writer calls this)."""
        self._arrays = {key: self._root[f"data/{key}"] for key in self._keys}
        self._meta_array = self._root[layout.META_KEY]
        ends_array = self._root[layout.ENDS_KEY]
        stored = ends_array[:]
        rows = min(a.shape[0] for a in self._arrays.values())
        count = layout.committed_count(stored, rows, self._meta_array.shape[0])
        ends = np.array(stored[:count], dtype=np.int64)
        ends.setflags(write=False)
        self._ends = ends

    # -- reading --------------------------------------------------------------------------

    def meta(self, i: int) -> EpisodeMeta:
        self.episode_range(i)  # bounds check
        i %= len(self)
        return EpisodeMeta.model_validate_json(str(self._rows(self._meta_array, i, i + 1)[0]))

    def attr(self, name: str) -> Any:
        """An attribute stored with the episodes under `name` (see `set_attr`), or None."""
        return self._root.attrs.get(name)

    def set_attr(self, name: str, value: Any) -> None:
        """Store a JSON value in the store's root attributes (its own key is reserved)."""
        if self._mode != "a" or name == layout.ATTR_KEY:
            raise SpecError(f"cannot set attribute {name!r} of {self._location}: "
                            + ("the key is reserved." if self._mode == "a" else "it is open read-only."))
        self._root.attrs[name] = value

    def _read(self, i: int, start: int, stop: int, keys: list[str]) -> dict[str, np.ndarray]:
        first = int(self._ends[i - 1]) if i else 0
        return {key: self._rows(self._arrays[key], first + start, first + stop) for key in keys}

    def load_all(self, keys: Iterable[str] | None = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Whole concatenated arrays in memory (the trainer's fast path) and episode_ends."""
        n = self.n_frames
        arrays = {key: self._rows(self._arrays[key], 0, n) for key in self._pick(keys)}
        return arrays, self._ends.copy()

    def _rows(self, array: Any, start: int, stop: int) -> np.ndarray:
        """array[start:stop]; StoreDamaged naming the chunk file that does not decode."""
        try:
            return array[start:stop]
        except DECODE_ERRORS as error:
            where = bad_chunk(self._location, array, start, stop) or f"{self._location}/{array.path}"
            raise damaged(self._location, where, error) from None

    # -- writing --------------------------------------------------------------------------

    def append(self, episode: Episode) -> int:
        """Append one episode and return its index; validated against `features` first."""
        if self._mode != "a":
            raise SpecError(f"the store at {self._location} is open read-only; open it with "
                            "EpisodeStore.open(path, mode='a') to append.")
        arrays = layout.check_episode(episode, self._features)
        if episode.meta.episode_id in self._episode_ids():
            raise SpecError(f"episode id '{episode.meta.episode_id}' is already in the store at "
                            f"{self._location}; episode ids must be unique.")
        index, start = len(self), self.n_frames
        stop = start + len(episode)
        # Data first; an interrupted append leaves only rows past the committed end.
        for key, value in arrays.items():
            array = self._arrays[key]
            array.resize((stop, *array.shape[1:]))
            array[start:stop] = value
        self._meta_array.resize((index + 1,))
        self._meta_array[index] = episode.meta.model_dump_json()
        ends_array = self._root[layout.ENDS_KEY]
        ends_array.resize((index + 1,))
        ends_array[index] = stop  # the commit
        ends = np.append(self._ends, np.int64(stop))
        ends.setflags(write=False)
        self._ends = ends
        self._episode_ids().add(episode.meta.episode_id)
        return index

    # -- internals ------------------------------------------------------------------------

    def _name(self) -> str:
        return "the store"

    def _episode_ids(self) -> set[str]:
        if self._ids is None:
            metas = self._meta_array[: len(self)] if len(self) else []
            self._ids = {EpisodeMeta.model_validate_json(str(m)).episode_id for m in metas}
        return self._ids

    def _repair(self) -> None:
        """Truncate every array to the committed prefix, dropping a killed writer's torn tail."""
        count, rows = len(self), self.n_frames
        torn = [key for key, a in self._arrays.items() if a.shape[0] != rows]
        for key in torn:
            array = self._arrays[key]
            array.resize((rows, *array.shape[1:]))
        for key, array in ((layout.META_KEY, self._meta_array),
                           (layout.ENDS_KEY, self._root[layout.ENDS_KEY])):
            if array.shape[0] != count:
                torn.append(key)
                array.resize((count,))
        if not is_url(self._location):
            # Temp files of LocalStore's atomic writes, orphaned by a kill mid-write.
            for stray in Path(self._location).rglob("*.partial"):
                stray.unlink(missing_ok=True)
        if torn:
            log.warning("repaired torn tail in %s (writer was interrupted): truncated %s to %d "
                        "episodes / %d frames", self._location, torn, count, rows)
        self.refresh()


def _not_found(location: str) -> str:
    """Why there is no episode store at `location`, and the commands that make one."""
    if not is_url(location) and (Path(location) / "meta" / "info.json").is_file():
        return (f"{location} is a LeRobot dataset, not an iws episode store; convert it with "
                f"`iws import {location} DEST` and pass DEST.")
    return (f"no episode store at {location}; record one with `iws collect`, or convert a LeRobot "
            "v3.0 dataset or Diffusion-Policy Zarr store with `iws import SRC DEST`.")


def _try_open_group(store: Any) -> Any | None:
    try:
        return zarr.open_group(store, mode="r" if store.read_only else "r+")
    except (FileNotFoundError, zarr.errors.GroupNotFoundError, zarr.errors.NodeTypeValidationError):
        return None


def _holds_other_data(location: str, store: Any) -> bool:
    if is_url(location):
        from zarr.core.sync import sync

        return not sync(store.is_empty(""))
    path = Path(location)
    return path.is_dir() and any(path.iterdir())


def _read_features(root: Any, location: str) -> FeatureSpec:
    attrs = root.attrs.asdict()
    info = attrs.get(layout.ATTR_KEY)
    if not isinstance(info, dict) or "features" not in info:
        raise SpecError(f"{location} is a Zarr store but not an iws episode store (no "
                        f"'{layout.ATTR_KEY}' attribute); import it with `iws import` first.")
    if info.get("version") != layout.FORMAT_VERSION:
        raise SpecError(f"{location} has episode-store format version {info.get('version')}, but "
                        f"this iws reads version {layout.FORMAT_VERSION}; upgrade iws.")
    return FeatureSpec.model_validate(info["features"])
