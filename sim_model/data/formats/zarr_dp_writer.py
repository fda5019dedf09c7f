"""Export to the Zarr layout Diffusion Policy's ReplayBuffer (zarr 2.x) opens unchanged.

    <dest>/data/<key>         (N, ...) time on axis 0; images uint8 (N, H, W, 3), one frame per chunk
    <dest>/meta/episode_ends  int64 (E,) cumulative
    <dest>/.zattrs            {"iws_export": {features, episode metadata}}: ignored by DP, lets
                              `iws import` restore fps, task text and episode ids

Zarr format 2 and Blosc (a standard numcodecs compressor that zarr 2.12+ decodes; DP's vendored
Jpeg2k codec cannot read what current imagecodecs writes). Images use the episode store's
Blosc-zstd setting, chosen by measurement in benchmarks/results/store.md; low-dim arrays are
chunked ~1 MB along time.

Key names. Diffusion Policy's PushT image dataset reads `img`, `state` and `action`; iws names its
arrays after cameras (`top`), `state` and `action`. So a dataset with a single camera exports that
camera as `img` by default, and DP's loaders open the store with their own defaults; a store with
several cameras keeps the camera names. `keys` (`--keys top=image,state=agent_pos`) renames
anything, overriding the default.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from schemas import FeatureSpec, SpecError
from sim_model import storage
from sim_model.data.formats.dataset import check_apart, open_dataset
from sim_model.data.formats.source import EpisodeSource
from sim_model.data.store_layout import IMAGE_COMPRESSOR, LOWDIM_COMPRESSOR, data_layout
from sim_model.storage import atomic

log = logging.getLogger(__name__)
ATTR_KEY = "iws_export"
DP_IMAGE_KEY = "img"  # the camera array of DP's single-camera image datasets (PushTImageDataset)
LOWDIM_CHUNK_BYTES = 1 << 20


def parse_key_map(text: str | None) -> dict[str, str]:
    """'top=img,state=state' -> {'top': 'img', 'state': 'state'} (iws name -> DP name)."""
    if not text:
        return {}
    mapping: dict[str, str] = {}
    for pair in text.split(","):
        name, sep, target = (part.strip() for part in pair.partition("="))
        if not sep or not name or not target or "/" in target:
            raise SpecError(f"--keys entry {pair!r} is not of the form iws_key=dp_key "
                            "(e.g. --keys top=img,state=state,action=action).")
        if name in mapping:
            raise SpecError(f"--keys names '{name}' twice.")
        mapping[name] = target
    return mapping


def dp_key_map(keys: tuple[str, ...], renames: dict[str, str]) -> dict[str, str]:
    """Every iws key -> its DP name: renamed where `renames` says so, else unchanged."""
    unknown = sorted(set(renames) - set(keys))
    if unknown:
        raise SpecError(f"--keys renames {unknown}, which the dataset lacks; its keys are "
                        f"{list(keys)}.")
    mapping = {key: renames.get(key, key) for key in keys}
    names = list(mapping.values())
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise SpecError(f"--keys gives several arrays the DP name(s) {clashes}; names must be "
                        "unique.")
    return mapping


def default_dp_keys(features: FeatureSpec) -> dict[str, str]:
    """DP's own names where they are unambiguous: the only camera becomes `img`."""
    cameras = features.camera_names
    if len(cameras) == 1 and DP_IMAGE_KEY not in data_layout(features):
        return {cameras[0]: DP_IMAGE_KEY}
    return {}


def resolve_dp_keys(features: FeatureSpec, renames: dict[str, str] | None = None) -> dict[str, str]:
    """Every iws key -> the array name written under data/: `renames` over `default_dp_keys`
    (a default is dropped where `renames` renames that key or takes its name)."""
    renames = renames or {}
    taken = set(renames.values())
    defaults = {k: v for k, v in default_dp_keys(features).items()
                if k not in renames and v not in taken}
    return dp_key_map(tuple(data_layout(features)), {**defaults, **renames})


def export_zarr_dp(src: str | os.PathLike[str] | EpisodeSource, dest: str | os.PathLike[str], *,
                   keys: dict[str, str] | None = None, overwrite: bool = False,
                   on_episode: Callable[[int], None] | None = None) -> Path | str:
    """Write `src` as a Diffusion-Policy Zarr store at `dest` (a directory or s3:// prefix;
    appears only when complete). `keys` renames arrays (iws key -> DP name) over the defaults
    of `resolve_dp_keys`."""
    import zarr

    if not isinstance(src, EpisodeSource):
        check_apart(src, dest)
    source = src if isinstance(src, EpisodeSource) else open_dataset(src)
    if storage.is_remote(os.fspath(dest)):
        return storage.build_and_publish(os.fspath(dest), overwrite=overwrite, write=lambda local: export_zarr_dp(
            source, local, keys=keys, on_episode=on_episode))
    if len(source) == 0:
        raise SpecError("the source dataset has no episodes; there is nothing to export.")
    dest = Path(dest).expanduser().absolute()
    if dest.exists() and not overwrite:
        raise SpecError(f"{dest} already exists; choose a new destination or pass --overwrite.")
    mapping = resolve_dp_keys(source.features, keys)
    tmp = dest.with_name(f".{dest.name}.partial-{uuid.uuid4().hex[:8]}")
    try:
        root = zarr.open_group(str(tmp), mode="w", zarr_format=2)
        arrays = _create_arrays(root, source, mapping)
        _copy_episodes(source, mapping, arrays, on_episode)
        root.create_array("meta/episode_ends", data=np.asarray(source.episode_ends, np.int64),
                          chunks=(max(1, len(source)),), compressors=None)
        root.attrs[ATTR_KEY] = {
            "features": source.features.model_dump(mode="json"), "keys": mapping,
            "episodes": [source.meta(i).model_dump(mode="json") for i in range(len(source))]}
        atomic.move_dir_into_place(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("exported %d episodes (%d frames) to %s", len(source), source.n_frames, dest)
    return dest


def _create_arrays(root: Any, source: EpisodeSource, mapping: dict[str, str]) -> dict[str, Any]:
    cameras = set(source.features.camera_names)
    n = source.n_frames
    arrays = {}
    for key, (shape, dtype) in data_layout(source.features).items():
        if key in cameras:
            chunks, compressor = (1, *shape), IMAGE_COMPRESSOR
        else:
            row_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            chunks = (max(1, min(n, LOWDIM_CHUNK_BYTES // max(1, row_bytes))), *shape)
            compressor = LOWDIM_COMPRESSOR
        arrays[key] = root.create_array(f"data/{mapping[key]}", shape=(n, *shape), chunks=chunks,
                                        dtype=dtype, compressors=compressor)
    return arrays


def _copy_episodes(source: EpisodeSource, mapping: dict[str, str], arrays: dict[str, Any],
                   on_episode: Callable[[int], None] | None) -> None:
    """Images episode by episode (one chunk per frame: no chunk is written twice); low-dim
    arrays gathered in memory and written once, so no chunk is rewritten per episode."""
    cameras = set(source.features.camera_names)
    lowdim: dict[str, list[np.ndarray]] = {k: [] for k in mapping if k not in cameras}
    ends = source.episode_ends
    for i in range(len(source)):
        start = int(ends[i - 1]) if i else 0
        data = source.window(i, 0, int(ends[i]) - start)
        for key, value in data.items():
            if key in cameras:
                arrays[key][start:start + len(value)] = value
            else:
                lowdim[key].append(value)
        if on_episode is not None:
            on_episode(int(ends[i]) - start)
    for key, parts in lowdim.items():
        arrays[key][:] = np.concatenate(parts)
