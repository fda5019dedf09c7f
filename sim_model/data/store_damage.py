"""Naming the file that makes an episode store unreadable.

A torn metadata file surfaces from zarr as a bare JSONDecodeError, a damaged chunk as
"error during blosc decompression: -1", neither saying which file. The store catches those
(DECODE_ERRORS) and asks here which file it was, so the user gets the file and what to do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from schemas import SpecError
from sim_model.storage.uri import is_url

# JSONDecodeError and UnicodeDecodeError are ValueErrors; numcodecs' codecs raise RuntimeError.
DECODE_ERRORS = (ValueError, RuntimeError)
METADATA_FILES = (".zgroup", ".zattrs", ".zarray", "zarr.json")
ADVICE = ("Restore the file from a copy, or rebuild the store: collect or import it again; for a "
          "shard of a generation job's dataset (OUT/dataset/shards/<key>.zarr), delete the shard and "
          "its part record OUT/parts/<key>.json and rerun `iws generate`, which makes that group's "
          "episodes again.")


class StoreDamaged(SpecError):
    """A file of an episode store exists but cannot be decoded."""


def damaged(location: str, file: str, error: BaseException) -> StoreDamaged:
    return StoreDamaged(f"the Zarr store at {location} is damaged: {file} cannot be decoded "
                        f"({type(error).__name__}: {error}). {ADVICE}")


def bad_metadata(location: str) -> str | None:
    """The first metadata file of a local store that is not valid JSON (None for URLs)."""
    if is_url(location):
        return None
    for path in sorted(Path(location).rglob("*")):
        if path.name in METADATA_FILES and path.is_file():
            try:
                json.loads(path.read_bytes())
            except ValueError:
                return str(path)
    return None


def bad_chunk(location: str, array: Any, start: int, stop: int) -> str | None:
    """The first chunk file of a zarr `array` over rows [start, stop) that fails to decode."""
    rows = (array.shards or array.chunks)[0]  # a chunk key names a shard where there are shards
    for index in range(start // rows, (max(stop, start + 1) - 1) // rows + 1):
        try:
            array[index * rows:min((index + 1) * rows, array.shape[0])]
        except DECODE_ERRORS:
            key = array.metadata.encode_chunk_key((index,) + (0,) * (array.ndim - 1))
            return f"{location}/{array.path}/{key}"
    return None


def locate(location: str, root: Any | None, arrays: tuple[str, ...]) -> str:
    """Which file stops a store from opening: a metadata file, else a chunk of one of `arrays`."""
    found = bad_metadata(location)
    if found is None and root is not None:
        found = next(filter(None, (_bad_array(location, root, key) for key in arrays)), None)
    return found or f"one of its metadata files ({', '.join(METADATA_FILES)})"


def _bad_array(location: str, root: Any, key: str) -> str | None:
    try:
        array = root[key]
    except (KeyError, *DECODE_ERRORS):
        return None
    return bad_chunk(location, array, 0, array.shape[0])
