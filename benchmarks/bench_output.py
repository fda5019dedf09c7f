"""What a generation job costs after its last rollout, as the dataset grows (issue 19, today's path).

Writes N committed episodes into a job output the way the replicas do (`workers.writer.write_episode`:
a per-episode store and its commit marker), then times what the driver does with them alone, in
one process: `consolidate` (every episode read back and appended to OUT/dataset.zarr) and the
LeRobot v3.0 export of that store. Frames: a 32x32 disc moving over a floor with a little noise,
so the codecs have work of a realistic kind; the frame content does not change which step grows.

Reported per N: seconds and milliseconds per episode of each step (a path that scales has a flat
per-episode cost, and its total does not sit on one process), files and bytes written, and the
driver's peak RSS. The per-episode stores stay beside dataset.zarr: the double storage the issue
names is counted in the bytes.

    .venv/bin/python benchmarks/bench_output.py --episodes 100 400 [--steps 20 --lerobot]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("SVT_LOG", "1")


def features(size: int):  # -> FeatureSpec
    from schemas import CameraSpec, FeatureSpec

    return FeatureSpec(cameras=(CameraSpec(name="top", height=size, width=size),), action_dim=2,
                       state_dim=2, action_low=(0.0, 0.0), action_high=(1.0, 1.0), fps=10.0)


def episode(index: int, steps: int, size: int, job: str):  # -> Episode
    from schemas import EpisodeMeta
    from sim_model.data.episode import Episode

    rng = np.random.default_rng(index)
    path = np.clip(0.5 + np.cumsum(rng.normal(0, 0.03, (steps, 2)), axis=0), 0.1, 0.9)
    yy, xx = np.mgrid[0:size, 0:size] / size
    frames = np.full((steps, size, size, 3), 236, np.uint8)
    for t, (x, y) in enumerate(path):
        disc = (xx - x) ** 2 + (yy - y) ** 2 < 0.01
        frames[t][disc] = (60, 100, 220)
    frames = np.clip(frames.astype(np.int16) + rng.integers(-2, 3, frames.shape), 0, 255).astype(np.uint8)
    meta = EpisodeMeta(episode_id=f"{job}-{index:06d}", length=steps, task="move the disc",
                       source="scripted:bench", seed=index, fps=10.0)
    return Episode(frames={"top": frames}, action=path.astype(np.float32), meta=meta,
                   state=path.astype(np.float32))


def tree_size(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def measure(n: int, steps: int, size: int, lerobot: bool, root: Path) -> dict:
    from pipeline.generate.consolidate import consolidate
    from sim_model.data.formats.lerobot_writer import export_lerobot
    from workers.writer import write_episode

    out = root / f"job{n}"
    spec = features(size)
    started = time.perf_counter()
    records = [write_episode(str(out), episode(i, steps, size, "bench"), i, spec) for i in range(n)]
    write_s = time.perf_counter() - started
    started = time.perf_counter()
    dataset, _ = consolidate(str(out), records, spec)
    consolidate_s = time.perf_counter() - started
    export_s = float("nan")
    if lerobot:
        started = time.perf_counter()
        export_lerobot(dataset, out / "lerobot", repo_id="iws/bench", task="move the disc")
        export_s = time.perf_counter() - started
    files, size_bytes = tree_size(out)
    return {"episodes": n, "frames": n * steps, "write_s": write_s, "consolidate_s": consolidate_s,
            "export_s": export_s, "files": files, "mb": size_bytes / 1e6,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, nargs="+", default=[100, 400])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--lerobot", action="store_true", help="also time the LeRobot v3.0 export")
    args = parser.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING)
    root = Path(tempfile.mkdtemp(prefix="bench_output_"))
    try:
        rows = [measure(n, args.steps, args.size, args.lerobot, root) for n in args.episodes]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()
    print(f"# output path after the last rollout: {args.steps} frames/episode at {args.size}x{args.size}, "
          f"one process, load average {load[0]:.1f} at the end\n")
    print("| episodes | frames | replicas' writes s | consolidate s | consolidate ms/episode | "
          "LeRobot export s | export ms/episode | files | MB | driver peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        per = 1000 / r["episodes"]
        print(f"| {r['episodes']} | {r['frames']} | {r['write_s']:.1f} | {r['consolidate_s']:.1f} | "
              f"{r['consolidate_s'] * per:.1f} | {r['export_s']:.1f} | {r['export_s'] * per:.1f} | "
              f"{r['files']} | {r['mb']:.1f} | {r['rss_mb']:.0f} |")


if __name__ == "__main__":
    main()
