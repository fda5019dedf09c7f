"""On-disk layout of the episode store: where it lives, how arrays are chunked and compressed,
and what an episode must look like to be appended.

Layout (Diffusion Policy's ReplayBuffer, zarr format 2)::

    <root>/.zattrs                 {"iws_store": {"version": 1, "features": FeatureSpec JSON}}
    <root>/data/<camera>           uint8   (N, H, W, 3)  one chunk per IMAGE_CHUNK_FRAMES frames
    <root>/data/action             float32 (N, A)
    <root>/data/state              float32 (N, S)        only when features.state_dim > 0
    <root>/data/<extra>            extra.dtype (N, *extra.shape)
    <root>/meta/episode_ends       int64   (E,)          cumulative; written last = the commit
    <root>/meta/episode_meta       vlen-utf8 (E,)        one EpisodeMeta JSON per episode

Format and codecs were chosen by measurement (benchmarks/bench_store.py, numbers in
benchmarks/results/store.md): zarr format 2 so that Diffusion Policy's zarr 2.x opens the store
unchanged, and Blosc, a standard numcodecs compressor that zarr 2.12+ decodes.

A *packed* store (`create_packed_arrays`: a generation job's shard, written once, whole) holds
the same arrays in zarr format 3, each array one object: images through the sharding codec (one
shard over all rows, inner chunks of IMAGE_CHUNK_FRAMES frames, so a training window still
decodes only the chunks it needs), the low-dimensional arrays as one chunk. A shard is then 13
objects at any episode count instead of one file per 8 frames per camera (chosen by
benchmarks/bench_shard_layout.py; benchmarks/results/output.md). Diffusion Policy's zarr 2.x
cannot read zarr 3: `iws export zarr-dp` writes its layout.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np

from schemas import FeatureSpec, SpecError
from sim_model.data.episode import Episode
from sim_model.storage.uri import is_url

FORMAT_VERSION = 1
ATTR_KEY = "iws_store"
ENDS_KEY = "meta/episode_ends"
META_KEY = "meta/episode_meta"

# Chosen by benchmarks/bench_store.py on 96x96 gym-pusht frames (benchmarks/results/store.md):
# 8 frames per chunk with Blosc-zstd level 3 stores ~270 B/frame (1 frame/chunk: ~720; lz4:
# ~650); per CPU-second it writes ~4x, reads 16-frame training windows ~2x and loads whole arrays
# ~7x faster than one frame per chunk, with random single-frame reads within noise (zarr's
# per-chunk overhead, not decompression, dominates those at this size). An append rewrites the
# one partial chunk it shares with the previous episode; LocalStore's temp-file + rename makes
# that rewrite all-or-nothing, so finished episodes survive a kill (tests/sim_model/data/test_store.py).
IMAGE_CHUNK_FRAMES = 8
IMAGE_COMPRESSOR = numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.SHUFFLE)
# Low-dim arrays: an append rewrites at most one partial chunk per array, so append stays O(1).
LOWDIM_CHUNK_ROWS = 1024
LOWDIM_COMPRESSOR = numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.SHUFFLE)
META_CHUNK_EPISODES = 64


def location_str(path: str | os.PathLike[str]) -> str:
    """Normalise a store location: an fsspec URL stays as it is, a local path becomes absolute."""
    text = os.fspath(path)
    if is_url(text):
        return text.rstrip("/")
    return str(Path(text).expanduser().absolute())


def zarr_store(location: str, *, read_only: bool, storage_options: dict[str, Any] | None) -> Any:
    """A zarr storage object for a local path or an fsspec URL (s3://bucket/prefix, memory://x).

    Crash safety relies on whole-object writes: LocalStore writes temp-file + rename, object
    stores replace objects atomically.
    """
    from zarr.storage import FsspecStore, LocalStore

    if is_url(location):
        from sim_model.storage.s3_zarr import open_s3_store
        from sim_model.storage.uri import is_s3

        if is_s3(location):  # fails fast, with the fix, on a missing bucket or bad credentials
            return open_s3_store(location, read_only=read_only, storage_options=storage_options)
        return FsspecStore.from_url(location, storage_options=storage_options, read_only=read_only)
    if storage_options:
        raise SpecError(f"storage_options were given for the local path {location}; they only "
                        "apply to URLs such as s3://bucket/prefix. Drop them or pass a URL.")
    return LocalStore(location.removeprefix("file://"), read_only=read_only)


def data_layout(features: FeatureSpec) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Every data key -> (per-step shape, dtype), in store order: cameras, action, state, extras."""
    layout: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    for cam in features.cameras:
        layout[cam.name] = ((cam.height, cam.width, 3), np.dtype(np.uint8))
    layout["action"] = ((features.action_dim,), np.dtype(np.float32))
    if features.state_dim > 0:
        layout["state"] = ((features.state_dim,), np.dtype(np.float32))
    for extra in features.extras:
        layout[extra.name] = (tuple(extra.shape), np.dtype(extra.dtype))
    return layout


def create_arrays(root: Any, features: FeatureSpec) -> None:
    """Create the empty data and meta arrays of a new store in `root` (a zarr format-2 group)."""
    data = root.require_group("data")
    cameras = set(features.camera_names)
    for key, (shape, dtype) in data_layout(features).items():
        if key in cameras:
            chunks = (IMAGE_CHUNK_FRAMES, *shape)
            compressor = IMAGE_COMPRESSOR
        else:
            chunks = (LOWDIM_CHUNK_ROWS, *shape)
            compressor = LOWDIM_COMPRESSOR
        data.create_array(key, shape=(0, *shape), chunks=chunks, dtype=dtype,
                          compressors=compressor)
    meta = root.require_group("meta")
    meta.create_array("episode_ends", shape=(0,), chunks=(LOWDIM_CHUNK_ROWS,), dtype=np.int64,
                      compressors=LOWDIM_COMPRESSOR)
    meta.create_array("episode_meta", shape=(0,), chunks=(META_CHUNK_EPISODES,), dtype=str)


def create_packed_arrays(root: Any, features: FeatureSpec, frames: int, episodes: int) -> dict[str, Any]:
    """Create, in `root` (a zarr format-3 group), the arrays of a packed store of `episodes`
    episodes and `frames` rows: each one object (see the module docstring). Returns them by
    store key, the data arrays first, then META_KEY and ENDS_KEY."""
    from zarr.codecs import BloscCodec

    blosc = BloscCodec(cname="zstd", clevel=3, shuffle="shuffle")
    data = root.require_group("data")
    cameras = set(features.camera_names)
    arrays: dict[str, Any] = {}
    rows = max(frames, 1)
    for key, (shape, dtype) in data_layout(features).items():
        if key in cameras:
            inner = min(IMAGE_CHUNK_FRAMES, rows)
            shard = -(-rows // inner) * inner  # a multiple of the inner chunk
            arrays[key] = data.create_array(key, shape=(frames, *shape), chunks=(inner, *shape),
                                            shards=(shard, *shape), dtype=dtype, compressors=blosc)
        else:
            arrays[key] = data.create_array(key, shape=(frames, *shape), chunks=(rows, *shape),
                                            dtype=dtype, compressors=blosc)
    meta = root.require_group("meta")
    count = max(episodes, 1)
    arrays[META_KEY] = meta.create_array("episode_meta", shape=(episodes,), chunks=(count,), dtype=str)
    arrays[ENDS_KEY] = meta.create_array("episode_ends", shape=(episodes,), chunks=(count,), dtype=np.int64,
                                         compressors=blosc)
    return arrays


def committed_count(ends: np.ndarray, data_rows: int, meta_rows: int) -> int:
    """Number of episodes whose commit completed.

    Appends write data arrays, then the metadata entry, then extend `episode_ends` (resize, then
    write the value). A writer killed between that resize and write leaves the fill value 0 at
    the tail, so only the prefix that is strictly increasing and backed by data counts.
    """
    ends = np.asarray(ends, dtype=np.int64)
    prev = np.concatenate([[0], ends[:-1]])
    ok = (ends > prev) & (ends <= data_rows)
    bad = np.flatnonzero(~ok)
    count = int(bad[0]) if bad.size else len(ends)
    return min(count, meta_rows)


def check_episode(episode: Episode, features: FeatureSpec) -> dict[str, np.ndarray]:
    """The episode's arrays by store key, or SpecError listing every mismatch with `features`."""
    problems: list[str] = []
    arrays = episode.arrays()
    layout = data_layout(features)
    expected_cams, got_cams = set(features.camera_names), set(episode.frames)
    if got_cams != expected_cams:
        problems.append(f"cameras are {sorted(got_cams)} but the store has {sorted(expected_cams)}")
    if features.state_dim > 0 and episode.state is None:
        problems.append(f"state is missing; the store records state of size {features.state_dim}")
    if features.state_dim == 0 and episode.state is not None:
        problems.append("state was given but the store's features have state_dim=0")
    extra_names, got_extras = {e.name for e in features.extras}, set(episode.extras)
    if got_extras != extra_names:
        problems.append(f"extras are {sorted(got_extras)} but the store expects {sorted(extra_names)}")
    if episode.meta.fps != features.fps:
        problems.append(f"meta.fps={episode.meta.fps} but the store runs at {features.fps} fps")
    for key, (shape, dtype) in layout.items():
        if key not in arrays:
            continue
        value = arrays[key]
        if tuple(value.shape[1:]) != shape:
            problems.append(f"'{key}' has per-step shape {tuple(value.shape[1:])}, expected {shape}")
        if value.dtype != dtype:
            problems.append(f"'{key}' has dtype {value.dtype}, expected {dtype} "
                            f"(convert with .astype(np.{dtype.name}))")
        elif dtype.kind == "f" and not np.isfinite(value).all():
            problems.append(f"'{key}' contains NaN or inf values")
    if problems:
        raise SpecError(f"episode '{episode.meta.episode_id}' does not fit the store's features:\n  - "
                        + "\n  - ".join(problems))
    return {key: np.ascontiguousarray(arrays[key]) for key in layout}
