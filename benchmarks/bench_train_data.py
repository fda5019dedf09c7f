"""Training data at paper scale: memory per rank and batch time with every frame loaded against
frames streamed from the store through a bounded cache (`iws train --cache-mb`).

    python benchmarks/bench_train_data.py                          # 600 x 200 frames at 128x128
    python benchmarks/bench_train_data.py --cache-mb 256 1024 --write benchmarks/results/train.md

A synthetic store of the paper's size (600 episodes x 200 frames at 128x128: a square
random-walking on a dark floor; the content changes compression, not the access pattern) is
written once, then each mode runs in a fresh process: it opens the data as `iws train` does,
draws --draws dynamics batches (--batch windows of --window frames, uniform over the training
episodes, gathered into image tensors as the stage does) and --draws autoencoder batches (single
frames), and reports its peak RSS. Between batches it sleeps --compute-ms, standing in for the
model's step (a GPU's ~115 ms); "batch ms" is the time a step waits for its frames. With
prefetch, the next batch's indices are drawn from a copy of the RNG (as the stages do,
`TrainRNG.next_numpy`) and their blocks read on background threads during that sleep. "frames held" is what the mode keeps of the frames at the end;
"latents" is the dynamics' latent cache it would allocate for the `small` preset's 4-channel
latent at 1/4 resolution (the whole dataset's when loaded, at most the cache size when streamed).
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_train import make_store  # the same synthetic store (this script's folder is on sys.path)

ROOT = Path(__file__).resolve().parent.parent


def measure(store: str, cache_mb: float | None, prefetch: bool, batch: int, window: int, draws: int,
            compute_ms: float) -> dict[str, float]:
    """One mode, in this (fresh) process."""
    import torch

    from sim_model.train.data import TrainingData
    from sim_model.train.decoder_loss import batch_images
    from sim_model.train.frames import StreamedFrames

    torch.set_num_threads(1)
    started = time.perf_counter()
    data = TrainingData.from_store(store, cache_mb)
    open_s = time.perf_counter() - started
    train, _ = data.split(0.05, 0)
    rng = np.random.default_rng(0)
    cpu = torch.device("cpu")
    frames = data.frames
    streamed = isinstance(frames, StreamedFrames)
    timings = {}
    for kind in ("windows", "frames"):
        def draw(generator: np.random.Generator, kind: str = kind) -> np.ndarray:
            return (train.window_indices(generator, batch, window) if kind == "windows"
                    else train.frame_indices(generator, 2 * batch))

        waited = 0.0
        for _ in range(draws):
            idx = draw(rng)
            if prefetch and isinstance(frames, StreamedFrames):
                frames.prefetch(draw(copy.deepcopy(rng)))
            started = time.perf_counter()
            batch_images(data, idx, cpu)
            waited += time.perf_counter() - started
            time.sleep(compute_ms / 1000)
        timings[kind] = waited / draws * 1000
    n, views, height, width = frames.shape[0], frames.shape[1], frames.shape[2], frames.shape[3]
    latent_row = 4 * views * 4 * (height // 4) * (width // 4)
    latent_rows = n if cache_mb is None else min(n, int(cache_mb * 2**20) // latent_row)
    return {"open_s": open_s, "windows_ms": timings["windows"], "frames_ms": timings["frames"],
            "held_mb": (frames.cached_bytes if streamed else frames.numel()) / 2**20,
            "latent_mb": latent_rows * latent_row / 2**20,
            "reads_per_batch": frames.reads / (2 * draws) if streamed else 0.0,
            "misses_per_batch": frames.misses / (2 * draws) if streamed else 0.0,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "dataset_mb": n * views * height * width * 3 / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=600)
    parser.add_argument("--frames", type=int, default=200, help="frames per episode")
    parser.add_argument("--resolution", type=int, default=128)
    parser.add_argument("--cache-mb", type=float, nargs="+", default=[256.0, 1024.0])
    parser.add_argument("--batch", type=int, default=32, help="dynamics windows per batch (a GPU's)")
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--draws", type=int, default=50)
    parser.add_argument("--compute-ms", type=float, default=120.0,
                        help="sleep between batches, standing in for the model's step")
    parser.add_argument("--store", type=Path, help="reuse (or write) the synthetic store here")
    parser.add_argument("--write", type=Path, help="append the table to this markdown file")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # internal: one mode, JSON out
    args = parser.parse_args()
    if args.measure is not None:
        mode = json.loads(args.measure)
        print(json.dumps(measure(mode["store"], mode["cache_mb"], mode["prefetch"], args.batch, args.window,
                                 args.draws, args.compute_ms)))
        return
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="bench_train_data_") as tmp:
        store = args.store or Path(tmp) / "paper.zarr"
        if not store.exists():
            started = time.perf_counter()
            make_store(store, args.episodes, args.resolution, length=args.frames, half=6)
            print(f"wrote {store} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        rows = []
        modes = [(None, False)] + [(c, p) for c in args.cache_mb for p in (False, True)]
        for cache_mb, prefetch in modes:
            mode = json.dumps({"store": str(store), "cache_mb": cache_mb, "prefetch": prefetch})
            out = subprocess.run([sys.executable, __file__, "--measure", mode, "--batch", str(args.batch),
                                  "--window", str(args.window), "--draws", str(args.draws),
                                  "--compute-ms", str(args.compute_ms)],
                                 check=True, capture_output=True, text=True, cwd=ROOT)
            rows.append((cache_mb, prefetch, json.loads(out.stdout.strip().splitlines()[-1])))
    size = rows[0][2]["dataset_mb"]
    lines = [f"`python benchmarks/bench_train_data.py --episodes {args.episodes} --frames {args.frames} "
             f"--resolution {args.resolution} --cache-mb {' '.join(f'{c:g}' for c in args.cache_mb)}` "
             f"({platform.machine()}, one torch thread; dataset {size:.0f} MiB of frames; dynamics batch "
             f"{args.batch} windows x {args.window} frames, autoencoder batch {2 * args.batch} frames; "
             f"{args.compute_ms:g} ms of stand-in compute between batches):", "",
             "| frames | open s | frames held MiB | latent cache MiB | peak RSS MiB | windows batch ms "
             "| frames batch ms | block reads per batch | blocks waited for per batch |",
             "|---|---|---|---|---|---|---|---|---|"]
    for cache_mb, prefetch, r in rows:
        name = ("loaded" if cache_mb is None else f"streamed, --cache-mb {cache_mb:g}"
                + (", prefetch" if prefetch else ", no prefetch"))
        lines.append(f"| {name} | {r['open_s']:.1f} | {r['held_mb']:.0f} | {r['latent_mb']:.0f} | "
                     f"{r['peak_rss_mb']:.0f} | {r['windows_ms']:.1f} | {r['frames_ms']:.1f} | "
                     f"{r['reads_per_batch']:.1f} | {r['misses_per_batch']:.1f} |")
    table = "\n".join(lines)
    print(table)
    if args.write:
        with open(args.write, "a") as handle:
            handle.write("\n" + table + "\n")


if __name__ == "__main__":
    main()
