"""Which kind of dataset lives at a local path or an s3:// URI: the one place that knows.

`dataset_kind` looks only at marker files (a few HEADs on s3://): 'zarr' (a root .zgroup or
zarr.json), 'shards' (index.parquet: a sharded dataset, sim_model/data/shards.py, as generation
jobs write), 'lerobot' (meta/info.json) or 'jsonl' (a .jsonl/.json file of action streams).
`detect_format` goes one step further for the datasets `open_dataset` reads: an iws
EpisodeStore ('iws'), iws shards ('iws-shards'), a Diffusion-Policy replay buffer ('zarr-dp') or
LeRobot v3.0 ('lerobot').
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from schemas import SpecError
from sim_model import storage
from sim_model.data.shards import INDEX_FILE

Kind = Literal["zarr", "shards", "lerobot", "jsonl"]
Format = Literal["iws", "iws-shards", "zarr-dp", "lerobot"]


def _marker_kind(uri: str) -> Kind | None:
    if uri.endswith((".jsonl", ".json")) and storage.is_file(uri):
        return "jsonl"
    if storage.is_file(storage.join(uri, INDEX_FILE)):
        return "shards"
    if storage.is_file(storage.join(uri, ".zgroup")) or storage.is_file(storage.join(uri, "zarr.json")):
        return "zarr"
    if storage.is_file(storage.join(uri, "meta/info.json")):
        return "lerobot"
    return None


def dataset_kind(path: str | os.PathLike[str]) -> Kind:
    """'zarr', 'shards', 'lerobot' or 'jsonl' by the marker files present; SpecError when it is none of them."""
    uri = os.fspath(path)
    remote = storage.on_s3(uri)
    kind = _marker_kind(uri)
    if kind is not None:
        return kind
    if not storage.exists(uri):
        where = ("the s3:// URI of a Zarr episode store, a LeRobot dataset prefix" if remote else
                 "the path of a Zarr episode store, a LeRobot dataset directory")
        raise SpecError(f"{uri} does not exist; give {where} or a JSONL file.")
    raise SpecError(f"{uri} is neither a Zarr {'store' if remote else 'episode store'} (no "
                    f"{'.zgroup/zarr.json' if remote else 'zarr.json/.zgroup'}), a LeRobot dataset "
                    "(no meta/info.json) nor a .jsonl file.")


def detect_format(path: str | os.PathLike[str]) -> Format:
    """Which kind of dataset lives at `path`: an iws EpisodeStore, a DP Zarr store or LeRobot."""
    text = os.fspath(path)
    if storage.is_url(text):
        return _remote_format(text)
    local = Path(text.removeprefix("file://")).expanduser()
    if not local.exists():
        raise SpecError(f"no dataset at {local}; pass an iws Zarr store, a Diffusion-Policy Zarr "
                        "store or a LeRobot v3.0 dataset root.")
    marker = _marker_kind(str(local))
    if marker in ("lerobot", "shards"):
        return "iws-shards" if marker == "shards" else "lerobot"
    import zarr

    from sim_model.data.store_damage import bad_metadata, damaged
    from sim_model.data.store_layout import ATTR_KEY

    try:
        group = zarr.open_group(str(local), mode="r")
    except Exception as error:
        torn = bad_metadata(str(local))  # a Zarr store whose metadata is damaged: say which file
        if torn is not None:
            raise damaged(str(local), torn, error) from None
        raise SpecError(f"{local} is neither a Zarr store nor a LeRobot dataset root (no "
                        "meta/info.json); pass one of those.") from None
    if ATTR_KEY in group.attrs:
        return "iws"
    if "data" in group and "meta" in group:
        return "zarr-dp"
    raise SpecError(f"{local} is a Zarr group without 'data' and 'meta' groups; it is not an "
                    "iws episode store or a Diffusion-Policy replay buffer.")


def _remote_format(uri: str) -> Format:
    """The format of an s3:// dataset, from its marker objects (a few small requests)."""
    from sim_model.data.store_layout import ATTR_KEY

    kind = dataset_kind(uri)
    if kind in ("lerobot", "shards"):
        return "iws-shards" if kind == "shards" else "lerobot"
    attrs = storage.try_read_text(storage.join(uri, ".zattrs")) or ""
    if kind == "zarr" and ATTR_KEY in attrs:
        return "iws"
    if kind == "zarr":
        return "zarr-dp"
    raise SpecError(f"{uri} is a JSONL file, not a dataset; pass an iws Zarr store, a "
                    "Diffusion-Policy Zarr store or a LeRobot v3.0 dataset root.")
