"""How a job's native shard is laid out: objects per shard against random-access read cost (issue 34).

One group's shard (8 episodes x 100 steps at 96x96, the README main job's shape; a disc moving
over a noisy floor, as benchmarks/bench_output.py) written three ways, same codec (Blosc zstd 3,
byte shuffle):

    dp-zarr2        zarr format 2, 8 frames per chunk: Diffusion Policy's layout, one file per
                    chunk (the shards before group commits; `iws export zarr-dp` still writes it)
    episode-chunks  zarr format 2, one chunk per episode per array
    zarr3-sharded   zarr format 3, each array one object: images through the sharding codec
                    (inner chunks of 8 frames), low-dim arrays one chunk (EpisodeStore.write_packed,
                    what a job writes now)

and read the way training and export read: random 16-frame windows of the camera array (the
trainer's access), one whole episode, and the whole shard. Local disk, and with --s3 a local
SeaweedFS (every read a GET, or a ranged GET inside a shard).

    .venv/bin/python benchmarks/bench_shard_layout.py [--windows 200] [--s3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

EPISODES, STEPS, SIZE = 8, 100, 96


def episodes() -> list:
    from bench_output import episode

    return [episode(i, STEPS, SIZE, "layout") for i in range(EPISODES)]


def features():  # -> FeatureSpec
    from bench_output import features as bench_features

    return bench_features(SIZE)


def write_dp(uri: str, eps: list) -> None:
    from sim_model.data.store import EpisodeStore

    store = EpisodeStore.create(uri, features())
    for e in eps:
        store.append(e)


def write_episode_chunks(uri: str, eps: list) -> None:
    """zarr 2, one chunk per episode: the DP layout's arrays with chunks of STEPS rows."""
    import numcodecs
    import zarr

    from sim_model.data import store_layout as layout

    blosc = numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.SHUFFLE)
    root = zarr.open_group(layout.zarr_store(uri, read_only=False, storage_options=None), mode="w", zarr_format=2)
    data = root.require_group("data")
    arrays = {k: np.concatenate([e.arrays()[k] for e in eps]) for k in layout.data_layout(features())}
    for key, value in arrays.items():
        data.create_array(key, shape=value.shape, chunks=(STEPS, *value.shape[1:]), dtype=value.dtype,
                          compressors=blosc)[:] = value
    meta = root.require_group("meta")
    meta.create_array("episode_ends", shape=(EPISODES,), chunks=(EPISODES,), dtype=np.int64,
                      compressors=blosc)[:] = np.arange(1, EPISODES + 1) * STEPS


def write_sharded(uri: str, eps: list) -> None:
    from sim_model.data.store import EpisodeStore

    EpisodeStore.write_packed(uri, features(), eps)


LAYOUTS = {"dp-zarr2": write_dp, "episode-chunks": write_episode_chunks, "zarr3-sharded": write_sharded}


def census(uri: str) -> tuple[int, int]:
    from bench_output import census as bench_census

    return bench_census(uri)


def measure(name: str, uri: str, eps: list, windows: int) -> dict:
    import zarr

    from sim_model.data import store_layout as layout

    started = time.perf_counter()
    LAYOUTS[name](uri, eps)
    write_s = time.perf_counter() - started
    objects, size = census(uri)
    root = zarr.open_group(layout.zarr_store(uri, read_only=True, storage_options=None), mode="r")
    top = root["data/top"]
    rng = np.random.default_rng(0)
    starts = rng.integers(0, EPISODES * STEPS - 16, windows)
    started = time.perf_counter()
    for s in starts:
        window = top[int(s):int(s) + 16]
    window_ms = (time.perf_counter() - started) / windows * 1000
    assert window.shape == (16, SIZE, SIZE, 3)
    started = time.perf_counter()
    for e in range(EPISODES):
        top[e * STEPS:(e + 1) * STEPS]
    episode_ms = (time.perf_counter() - started) / EPISODES * 1000
    started = time.perf_counter()
    whole = top[:]
    whole_ms = (time.perf_counter() - started) * 1000
    expected = np.concatenate([e.frames["top"] for e in eps])
    assert np.array_equal(whole, expected), name
    return {"layout": name, "objects": objects, "kb": size / 1e3, "write_ms": write_s * 1000,
            "window_ms": window_ms, "episode_ms": episode_ms, "whole_ms": whole_ms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, default=200, help="random 16-frame windows read per layout")
    parser.add_argument("--s3", action="store_true", help="also on a local SeaweedFS (needs `weed`)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench_layout_"))
    eps = episodes()
    rows = [{**measure(name, str(root / name), eps, args.windows), "where": "local"} for name in LAYOUTS]
    if args.s3:
        from tests.fixtures.s3 import running_server

        with running_server(root / "weed") as server:
            os.environ.update(server.env())
            bucket = server.create_bucket("layout")
            rows += [{**measure(name, f"s3://{bucket}/{name}", eps, args.windows), "where": "SeaweedFS"}
                     for name in LAYOUTS]
    shutil.rmtree(root, ignore_errors=True)
    print(f"# one shard: {EPISODES} episodes x {STEPS} steps at {SIZE}x{SIZE}, {args.windows} random 16-frame "
          f"windows, load average {os.getloadavg()[0]:.1f} at the end\n")
    print("| where | layout | objects | objects/episode | kB | write ms | 16-frame window ms | episode ms | whole shard ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['where']} | {r['layout']} | {r['objects']} | {r['objects'] / EPISODES:.2f} | {r['kb']:.0f} | "
              f"{r['write_ms']:.0f} | {r['window_ms']:.2f} | {r['episode_ms']:.1f} | {r['whole_ms']:.1f} |")


if __name__ == "__main__":
    main()
