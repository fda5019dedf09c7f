"""What a generation job costs after its last rollout, as the dataset grows (issue 19).

Writes N committed episodes into a job output the way the replicas do (`workers.writer.write_episode`:
a per-episode store and its commit marker; with --lerobot also each group's LeRobot part,
`workers.parts.write_part`, which the replicas encode in parallel), then times what the driver
does with them alone, in one process: `consolidate` (every episode read back and appended to
OUT/dataset.zarr), and for the LeRobot dataset both ways in the same run: the old one-writer
export of dataset.zarr on the driver (`lerobot_writer.export_lerobot`, the baseline) and the
assembly of the replicas' parts from their metadata (`consolidate.assemble_lerobot`). Frames: a
32x32 disc moving over a floor with a little noise, so the codecs have work of a realistic kind.

Reported per N: seconds and milliseconds per episode of each step (a path that scales has a flat
per-episode cost, and its total does not sit on one process), files and bytes written, and the
driver's peak RSS. The per-episode stores stay beside dataset.zarr: the double storage the issue
names is counted in the bytes.

    .venv/bin/python benchmarks/bench_output.py --episodes 100 400 [--steps 20 --lerobot --group 8]

`--job` runs whole generation jobs instead (`run_job` on a local Ray, a random `tiny` model at
32x32, scripted actions) with 1 and 2 replicas (`--replicas`), twice each: with
`formats: [zarr, lerobot]` (replicas write the LeRobot parts, the driver assembles them) and,
as the baseline, `formats: [zarr]` followed by the old one-writer export of dataset.zarr. It
reports the time from the last committed episode to a finished dataset (the driver's share).

    .venv/bin/python benchmarks/bench_output.py --job --episodes 2000 --replicas 1 2
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


def measure(n: int, steps: int, size: int, lerobot: bool, group: int, root: Path) -> dict:
    from pipeline.generate.consolidate import assemble_lerobot, consolidate
    from schemas import EpisodeSpec, JobSpec
    from sim_model.data.formats.lerobot_writer import export_lerobot
    from workers import parts
    from workers.writer import write_episode

    out = root / f"job{n}"
    spec = features(size)
    job = JobSpec.model_validate({
        "name": "bench", "model": "unused", "episodes": n, "horizon": steps, "task": "move the disc",
        "init": {"images": ["unused.png"]}, "action_sources": {"walk": {"kind": "scripted"}},
        "output": {"path": str(out), "formats": ["zarr", "lerobot"]}})
    groups = [[EpisodeSpec(job_id="bench", index=i, episode_id=f"bench-{i:06d}", seed=i, init_ref="x",
                           action_source="walk", horizon=steps) for i in range(a, min(a + group, n))]
              for a in range(0, n, group)]
    write_s = part_s = 0.0
    records = {}
    for specs in groups:
        started = time.perf_counter()
        episodes = [episode(e.index, steps, size, "bench") for e in specs]
        rows = [write_episode(str(out), ep, e.index, spec) for ep, e in zip(episodes, specs, strict=True)]
        write_s += time.perf_counter() - started
        records.update({r.episode_id: r for r in rows})
        if lerobot:
            started = time.perf_counter()
            parts.write_part(str(out), job, specs[0].index, episodes, rows, spec)
            part_s += time.perf_counter() - started
    ordered = [records[e.episode_id] for g in groups for e in g]
    started = time.perf_counter()
    dataset, _ = consolidate(str(out), ordered, spec)
    consolidate_s = time.perf_counter() - started
    export_s = assemble_s = float("nan")
    if lerobot:
        started = time.perf_counter()
        export_lerobot(dataset, root / f"export{n}", repo_id="iws/bench", task="move the disc")
        export_s = time.perf_counter() - started
        started = time.perf_counter()
        assemble_lerobot(job, groups, records)
        assemble_s = time.perf_counter() - started
        _check_opens(out / "lerobot", n, n * steps)
        shutil.rmtree(root / f"export{n}")
    files, size_bytes = tree_size(out)
    return {"episodes": n, "frames": n * steps, "write_s": write_s, "part_s": part_s,
            "consolidate_s": consolidate_s, "export_s": export_s, "assemble_s": assemble_s,
            "files": files, "mb": size_bytes / 1e6,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _check_opens(root: Path, episodes: int, frames: int) -> None:
    """The assembled dataset is one LeRobotDataset with every episode and frame."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from sim_model.data.formats.lerobot_reader import video_backend

    ds = LeRobotDataset("iws/bench", root=root, video_backend=video_backend())
    assert ds.num_episodes == episodes and ds.num_frames == frames, (ds.num_episodes, ds.num_frames)
    last = ds[frames - 1]
    assert int(last["episode_index"]) == episodes - 1 and int(last["index"]) == frames - 1


def run_job_once(n: int, steps: int, replicas: int, lerobot: bool, group: int, model: Path,
                 init: Path, root: Path) -> dict:
    """One generation job; seconds from its last committed episode to the finished datasets."""
    from pipeline.generate import run_job
    from schemas import JobSpec
    from sim_model.data.formats.lerobot_writer import export_lerobot

    out = root / f"job{n}-{replicas}-{'parts' if lerobot else 'old'}"
    spec = JobSpec.model_validate({
        "name": "bench", "model": str(model), "episodes": n, "horizon": steps, "batch_size": group,
        "replicas": replicas, "resources": {"num_cpus": 1}, "task": "push",
        "init": {"images": [str(init)]}, "action_sources": {"walk": {"kind": "scripted"}},
        "output": {"path": str(out), "formats": ["zarr", "lerobot"] if lerobot else ["zarr"]}})
    last = [0.0]

    def note(progress) -> None:  # -> None
        if progress.done == progress.total and not last[0]:
            last[0] = time.perf_counter()

    started = time.perf_counter()
    run_job(spec, on_progress=note)
    finished = time.perf_counter()
    export_s = 0.0
    if not lerobot:
        export_lerobot(out / "dataset.zarr", out / "lerobot", repo_id="iws/bench", task="push")
        export_s = time.perf_counter() - finished
    _check_opens(out / "lerobot", n, n * steps)
    files, size_bytes = tree_size(out)
    shutil.rmtree(out, ignore_errors=True)
    return {"episodes": n, "replicas": replicas, "path": "parts + assembly" if lerobot else "old: export on driver",
            "job_s": finished - started, "after_s": finished - last[0] + export_s,
            "files": files, "mb": size_bytes / 1e6}


def jobs(args: argparse.Namespace, root: Path) -> None:
    import ray
    from PIL import Image

    from pipeline.pusht.features import pusht_features
    from sim_model.world_model import WorldModel

    model = root / "tiny-32"
    WorldModel.random(pusht_features(32), preset="tiny", seed=0).save(model)
    init = root / "init.png"
    Image.fromarray(np.full((32, 32, 3), 236, np.uint8)).save(init)
    ray.init(address="local", include_dashboard=False, logging_level="WARNING",
             num_cpus=max(args.replicas))
    rows = [run_job_once(n, args.steps, r, lerobot, args.group, model, init, root)
            for n in args.episodes for r in args.replicas for lerobot in (True, False)]
    ray.shutdown()
    load = os.getloadavg()
    print(f"# generation jobs: tiny model at 32x32, {args.steps} frames/episode, groups of {args.group}, "
          f"load average {load[0]:.1f} at the end\n")
    print("| episodes | replicas | LeRobot path | job s | after the last episode s | ms/episode after | files | MB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['episodes']} | {r['replicas']} | {r['path']} | {r['job_s']:.1f} | {r['after_s']:.1f} | "
              f"{1000 * r['after_s'] / r['episodes']:.1f} | {r['files']} | {r['mb']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, nargs="+", default=[100, 400])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--lerobot", action="store_true",
                        help="also the LeRobot v3.0 dataset: old driver export vs assembled parts")
    parser.add_argument("--group", type=int, default=8, help="episodes per group (= per LeRobot part)")
    parser.add_argument("--job", action="store_true", help="whole generation jobs on a local Ray")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING)
    root = Path(tempfile.mkdtemp(prefix="bench_output_"))
    if args.job:
        try:
            jobs(args, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    try:
        rows = [measure(n, args.steps, args.size, args.lerobot, args.group, root) for n in args.episodes]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()
    print(f"# output path after the last rollout: {args.steps} frames/episode at {args.size}x{args.size}, "
          f"groups of {args.group}, one process, load average {load[0]:.1f} at the end\n")
    print("| episodes | frames | replicas' episode writes s | replicas' LeRobot parts s | consolidate s "
          "| consolidate ms/ep | old: driver export s | export ms/ep | new: assembly s | assembly ms/ep "
          "| files | MB | driver peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        per = 1000 / r["episodes"]
        print(f"| {r['episodes']} | {r['frames']} | {r['write_s']:.1f} | {r['part_s']:.1f} | "
              f"{r['consolidate_s']:.1f} | {r['consolidate_s'] * per:.1f} | {r['export_s']:.1f} | "
              f"{r['export_s'] * per:.1f} | {r['assemble_s']:.2f} | {r['assemble_s'] * per:.2f} | "
              f"{r['files']} | {r['mb']:.1f} | {r['rss_mb']:.0f} |")


if __name__ == "__main__":
    main()
