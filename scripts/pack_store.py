"""Copy an episode store with its camera frames recompressed for travel (zstd 19, 200 frames a chunk).

A lent GPU machine takes at most 64 MiB of working tree and carried files per call; PushT's
training store is 38 MB with the collector's fast compression and 12 MB packed. The frames are
identical (the checkpoint's recorded data hash does not change); only the chunking and codec do.

    .venv/bin/python scripts/pack_store.py data/pusht_train.zarr .gpudata/pusht_train.zarr
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import zarr
from numcodecs import Zstd

FRAMES_PER_CHUNK = 200
COPY_ROWS = 4000


def pack(src: Path, dst: Path) -> None:
    root = zarr.open_group(src, mode="r")
    images = [name for name, array in root["data"].arrays() if array.ndim == 4]
    shutil.rmtree(dst, ignore_errors=True)
    # Everything but the image chunks is copied as it is; the image arrays are rewritten.
    shutil.copytree(src, dst, ignore=lambda folder, names: names if Path(folder).name in images else [])
    out = zarr.open_group(dst, mode="a")
    for name in images:
        array = root["data"][name]
        shutil.rmtree(dst / "data" / name)
        packed = out.create_array(f"data/{name}", shape=array.shape, dtype=array.dtype,
                                  chunks=(FRAMES_PER_CHUNK, *array.shape[1:]),
                                  compressors=Zstd(level=19), attributes=dict(array.attrs))
        for start in range(0, array.shape[0], COPY_ROWS):
            packed[start:start + COPY_ROWS] = array[start:start + COPY_ROWS]
        print(f"data/{name}: {array.shape[0]} frames packed", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", type=Path, help="the episode store (Zarr, local)")
    parser.add_argument("dst", type=Path, help="where the packed copy goes (replaced)")
    args = parser.parse_args()
    if not (args.src / "data").is_dir():
        parser.error(f"{args.src} is not an episode store (no data/ group)")
    pack(args.src, args.dst)


if __name__ == "__main__":
    main()
