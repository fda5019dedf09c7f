"""Throughput of a whole generation job vs the bare in-process world model, same work.

    python benchmarks/bench_generate.py                      # tiny preset, 96x96, quick
    python benchmarks/bench_generate.py --preset small --episodes 32 --horizon 51 \
        --write benchmarks/results/generate.md

For each (replicas, batch size) the job runs through `run_job` on a local Ray (started once,
outside the timing; with --embedded each job starts its own, as `iws generate` does, and the
driver rolls groups while it starts): scripted actions, images from examples/pusht_init, episodes written and
committed, dataset.zarr consolidated. "frames" are model steps: episodes x (horizon - 1).
The raw reference rolls the same batches with `WorldModel.rollout` in this process with one
torch thread, as each replica has (Ray sets OMP_NUM_THREADS=1 for num_cpus=0.5); it is measured
right before each job, since a shared machine's load drifts.
pipeline efficiency = job frames/s / (replicas x raw frames/s at that batch size); "steady"
counts from the first group's commit to the last (replica start-up excluded).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def make_model(preset: str, resolution: int, directory: Path) -> Path:
    from pipeline.pusht.features import pusht_features
    from sim_model.world_model import WorldModel

    path = directory / f"{preset}-{resolution}"
    WorldModel.random(pusht_features(resolution), preset=preset, seed=0).save(path)
    return path


def init_images(resolution: int, directory: Path) -> list[str]:
    if resolution == 96:
        return sorted(str(p) for p in (ROOT / "examples" / "pusht_init").glob("*.png"))
    from PIL import Image

    rng = np.random.default_rng(0)
    paths = []
    for i in range(4):
        paths.append(str(directory / f"init{i}.png"))
        Image.fromarray(rng.integers(0, 255, (resolution, resolution, 3), dtype=np.uint8)).save(paths[-1])
    return paths


def raw_fps(model: Path, images: list[str], episodes: int, horizon: int, batch: int, threads: int) -> float:
    """Frames/s of WorldModel.rollout on the same batches, in this process."""
    import torch

    from sim_model.world_model import WorldModel
    from workers.init_frames import load_init

    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        wm = WorldModel.load(model)
        rng = np.random.default_rng(0)
        frames, _ = load_init([images[i % len(images)] for i in range(batch)], wm.features)
        wm.rollout(frames, rng.uniform(0, 512, (batch, 2, 2)).astype(np.float32))  # warm-up
        start, made = time.perf_counter(), 0
        for first in range(0, episodes, batch):
            b = min(batch, episodes - first)
            actions = rng.uniform(0, 512, (b, horizon - 1, 2)).astype(np.float32)
            wm.rollout(frames[:b], actions, seeds=list(range(first, first + b)))
            made += b * (horizon - 1)
        return made / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(saved)


def job_run(model: Path, images: list[str], out: Path, episodes: int, horizon: int, batch: int,
            replicas: int) -> dict[str, float]:
    from pipeline.generate import Progress, run_job
    from schemas import JobSpec

    spec = JobSpec.model_validate({
        "name": f"bench-r{replicas}-b{batch}", "model": str(model), "init": {"images": images},
        "action_sources": {"play": {"kind": "scripted", "motion": "mix"}},
        "episodes": episodes, "horizon": horizon, "batch_size": batch, "replicas": replicas,
        "resources": {"num_cpus": 0.5}, "output": {"path": str(out)}, "device": "cpu"})
    commits: list[float] = []

    def seen(progress: Progress) -> None:
        commits.extend([time.perf_counter()] * (progress.done - len(commits)))

    start = time.perf_counter()
    run_job(spec, overwrite=True, on_progress=seen)
    total = time.perf_counter() - start
    frames = episodes * (horizon - 1)
    # Steady state: after every replica has committed its first group, to the last commit
    # (replica start-up and the first rollout excluded).
    skip = min(replicas * batch, episodes - 1)
    steady = (episodes - skip) * (horizon - 1) / max(commits[-1] - commits[skip - 1], 1e-9)
    return {"job_s": total, "job_fps": frames / total, "first_commit_s": commits[0] - start,
            "steady_fps": steady}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--model", default=None,
                        help="a trained checkpoint (a name such as pusht, or a directory) instead of a "
                        "randomly initialised --preset; 96x96 PushT init frames")
    parser.add_argument("--resolution", type=int, default=96)
    parser.add_argument("--episodes", type=int, default=48, help="at least a few groups per replica")
    parser.add_argument("--horizon", type=int, default=21)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--embedded", action="store_true",
                        help="each job starts (and stops) its own local Ray inside the timing")
    parser.add_argument("--write", type=Path, default=None, help="write the table to this markdown file")
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.model:
            from sim_model.checkpoint import resolve

            model, images = resolve(args.model), init_images(96, work)
        else:
            model, images = make_model(args.preset, args.resolution, work), init_images(args.resolution, work)
        if not args.embedded:
            ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, logging_level="WARNING")
        rows, raw = [], {}
        for replicas in args.replicas:
            for batch in args.batch:
                # Raw reference measured right before its job: the machine's load drifts.
                raw[batch] = raw_fps(model, images, args.episodes, args.horizon, batch, 1)
                r = job_run(model, images, work / "out", args.episodes, args.horizon, batch, replicas)
                ideal = replicas * raw[batch]
                rows.append(f"| {replicas} | {batch} | {r['job_s']:.1f} | {r['first_commit_s']:.1f} | "
                            f"{r['job_fps']:.1f} | {r['steady_fps']:.1f} | {raw[batch]:.1f} | "
                            f"{r['job_fps'] / ideal:.2f} | {r['steady_fps'] / ideal:.2f} |")
                print(rows[-1], flush=True)
        if not args.embedded:
            ray.shutdown()
    ray_note = "each job starts its own Ray (timed)" if args.embedded else "Ray started once, outside the timings"
    what = f"model {args.model}" if args.model else f"{args.preset} preset, {args.resolution}x{args.resolution}"
    header = (f"{what}, {args.episodes} episodes x "
              f"{args.horizon} steps ({args.episodes * (args.horizon - 1)} model frames) per job; "
              f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), load average "
              f"{os.getloadavg()[0]:.1f} at the end; {ray_note}.\n\n"
              "| replicas | batch | job s | first commit s | job frames/s | steady frames/s "
              "| raw frames/s (1 thread) | efficiency (job) | efficiency (steady) |\n"
              "|---|---|---|---|---|---|---|---|---|")
    table = header + "\n" + "\n".join(rows)
    print(table)
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        with args.write.open("a") as handle:
            handle.write(f"\n### {time.strftime('%Y-%m-%d %H:%M')}\n\n{table}\n")


if __name__ == "__main__":
    main()
