"""What a generation job costs after its last rollout, as the dataset grows (issue 19).

Writes N committed episodes into a job output the way the replicas do: per group its part of
the datasets and its commit (`workers.parts.write_part`: the Zarr shard, with --lerobot the
LeRobot part too, then the part record; the replicas do this in parallel). Then it times, in one process,
what the driver does: `check_parts` + `assemble_zarr` (the Parquet index over the shards) and,
with --lerobot, `assemble_lerobot` (metadata only). The baseline runs in the same run on the same
data: the old one-process path, every episode read back and appended to one store (what
`consolidate` did; today `iws export zarr-dp` / `import_dataset` from the shards, on request) and,
with --lerobot, the old one-writer LeRobot export of that store. Frames: a 32x32 disc moving over
a floor with a little noise, so the codecs have work of a realistic kind.

Reported per N: seconds and milliseconds per episode of each step (a path that scales has a flat
per-episode cost on the driver), the files (objects) and bytes the job leaves, objects per
episode, the time a resume takes to find what is committed (listing and reading the part
records, checking every recorded file's size: `read_parts` + `verify.inspect`), and the
driver's peak RSS. With --s3 the output goes to a local SeaweedFS (`weed`, as the tests use) and
the objects are counted by listing the bucket.

    .venv/bin/python benchmarks/bench_output.py --episodes 100 500 2000 [--steps 20 --lerobot --group 8 --s3]

`--verify` adds a table of what checking costs (issue 34), on the same output: the check every
resume makes (files and sizes against the part records), `iws verify`'s read-back of every shard,
and reading every episode / `iws export zarr-dp` without and with the reader's checksum check.

`--job` runs whole generation jobs instead (`run_job` on a local Ray, a random `tiny` model at
32x32, scripted actions) with 1 and 2 replicas (`--replicas`), `formats: [zarr, lerobot]`, and
the baseline in the same run: the old one-process path after the job (one store from the shards,
then the one-writer LeRobot export). It reports the time from the last committed episode to
finished datasets (the driver's share).

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


def census(uri: str) -> tuple[int, int]:
    """(files or objects, bytes) under a local directory or an s3:// prefix."""
    from sim_model import storage

    if storage.on_s3(uri):
        from sim_model.storage import s3

        bucket, prefix = s3.split(uri)
        pages = s3.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix.rstrip("/") + "/")
        sizes = [o["Size"] for page in pages for o in page.get("Contents", [])]
        return len(sizes), sum(sizes)
    files = [p for p in Path(uri).rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def verify_costs(out: str, dataset: str, root: Path, n: int) -> dict:
    """What checking costs (issue 34), same data, baseline first: the resume's check (files and
    sizes), `iws verify`'s read-back, and reading / exporting the dataset without and with the
    checksum check of each episode."""
    from pipeline.generate import verify
    from sim_model.data.formats import open_dataset
    from sim_model.data.formats.zarr_dp_writer import export_zarr_dp
    from workers import parts

    costs = {}
    started = time.perf_counter()
    found = parts.read_parts(out)
    assert verify.inspect(out, found) == []
    costs["quick_s"] = time.perf_counter() - started
    started = time.perf_counter()
    assert verify.inspect(out, found, deep=True) + verify.check_index(out, found) == []
    costs["deep_s"] = time.perf_counter() - started
    for checked in (False, True):
        started = time.perf_counter()
        for _ in open_dataset(dataset, verify=checked):
            pass
        costs[f"read_{checked}_s"] = time.perf_counter() - started
        started = time.perf_counter()
        export_zarr_dp(open_dataset(dataset, verify=checked), root / f"dp{n}")
        costs[f"export_{checked}_s"] = time.perf_counter() - started
        shutil.rmtree(root / f"dp{n}")
    return costs


def measure(n: int, steps: int, size: int, lerobot: bool, group: int, root: Path, base: str,
            check: bool = False) -> dict:
    from pipeline.generate import verify
    from pipeline.generate.consolidate import assemble_lerobot, assemble_zarr, check_parts
    from schemas import EpisodeSpec, JobSpec
    from sim_model import storage
    from sim_model.data.formats import import_dataset, open_dataset
    from sim_model.data.formats.lerobot_writer import export_lerobot
    from workers import parts
    from workers.writer import episode_record

    out = storage.join(base, f"job{n}")
    spec = features(size)
    job = JobSpec.model_validate({
        "name": "bench", "model": "unused", "episodes": n, "horizon": steps, "task": "move the disc",
        "init": {"images": ["unused.png"]}, "action_sources": {"walk": {"kind": "scripted"}},
        "output": {"path": out, "formats": ["zarr", "lerobot"] if lerobot else ["zarr"]}})
    groups = [[EpisodeSpec(job_id="bench", index=i, episode_id=f"bench-{i:06d}", seed=i, init_ref="x",
                           action_source="walk", horizon=steps) for i in range(a, min(a + group, n))]
              for a in range(0, n, group)]
    write_s = part_s = 0.0
    records = {}
    for specs in groups:
        started = time.perf_counter()
        episodes = [episode(e.index, steps, size, "bench") for e in specs]
        shard = storage.join(out, "dataset", "shards", f"{specs[0].index:08d}.zarr")
        rows = [episode_record(ep, e.index, shard) for ep, e in zip(episodes, specs, strict=True)]
        write_s += time.perf_counter() - started
        records.update({r.episode_id: r for r in rows})
        started = time.perf_counter()
        parts.write_part(out, job, specs[0].index, episodes, rows, spec)
        part_s += time.perf_counter() - started
    started = time.perf_counter()
    found = parts.read_parts(out)
    check_parts(job, groups, records, found)
    dataset = assemble_zarr(job, groups, records, spec)
    index_s = time.perf_counter() - started
    lerobot_s = float("nan")
    if lerobot:
        started = time.perf_counter()
        assemble_lerobot(job, groups, records, found=found)
        lerobot_s = time.perf_counter() - started
    files, size_bytes = census(out)
    started = time.perf_counter()  # what a resume does first: find the commits, check their files
    resumed = parts.read_parts(out)
    assert len(parts.committed(resumed)) == n and verify.inspect(out, resumed) == []
    resume_s = time.perf_counter() - started
    costs = verify_costs(out, dataset, root, n) if check else {}
    sharded = open_dataset(dataset)
    assert len(sharded) == n and sharded.n_frames == n * steps, (len(sharded), sharded.n_frames)
    # The baseline, same run, same data: one process reads every episode into one store...
    started = time.perf_counter()
    one = import_dataset(sharded, root / f"one{n}.zarr")
    one_s = time.perf_counter() - started
    export_s = float("nan")
    if lerobot:  # ... and the one-writer LeRobot export of that store
        started = time.perf_counter()
        export_lerobot(one, root / f"export{n}", repo_id="iws/bench", task="move the disc")
        export_s = time.perf_counter() - started
        local = storage.fetch(storage.join(out, "lerobot")) if storage.on_s3(out) else Path(out) / "lerobot"
        _check_opens(local, n, n * steps)
        shutil.rmtree(root / f"export{n}")
    shutil.rmtree(root / f"one{n}.zarr")
    storage.remove_tree(out)
    return {"episodes": n, "frames": n * steps, "write_s": write_s, "part_s": part_s,
            "index_s": index_s, "lerobot_s": lerobot_s, "one_s": one_s, "export_s": export_s,
            "files": files, "mb": size_bytes / 1e6, "resume_s": resume_s,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **costs}


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
    """One generation job; seconds from its last committed episode to finished datasets (with
    `lerobot` False: formats [zarr] and the old one-process path afterwards, the baseline)."""
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
    if lerobot:
        _check_opens(out / "lerobot", n, n * steps)
        after_s = finished - last[0]
    else:  # the old path after the job: one store on one process, then the one-writer export
        from sim_model.data.formats import import_dataset

        one = import_dataset(out / "dataset", root / "one.zarr")
        export_lerobot(one, root / "export", repo_id="iws/bench", task="push")
        after_s = time.perf_counter() - last[0]
        _check_opens(root / "export", n, n * steps)
        shutil.rmtree(root / "one.zarr")
        shutil.rmtree(root / "export")
    files, size_bytes = census(str(out))
    shutil.rmtree(out, ignore_errors=True)
    return {"episodes": n, "replicas": replicas,
            "path": "parts + assembly" if lerobot else "old: one store + export on the driver",
            "job_s": time.perf_counter() - started if not lerobot else finished - started,
            "after_s": after_s, "files": files, "mb": size_bytes / 1e6}


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
    print("| episodes | replicas | path | job s | after the last episode s | ms/episode after | files | MB |")
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
    parser.add_argument("--group", type=int, default=8, help="episodes per group (= per part)")
    parser.add_argument("--job", action="store_true", help="whole generation jobs on a local Ray")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--verify", action="store_true",
                        help="also time the checks of issue 34 (resume, `iws verify`, reads and export with checksums)")
    parser.add_argument("--s3", action="store_true", help="write the output to a local SeaweedFS (needs `weed`)")
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
    base = str(root / "out")
    server = None
    if args.s3:
        import contextlib
        import sys

        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's tests/ package
        sys.modules.pop("tests", None)  # not a site-packages module of that name
        from tests.fixtures.s3 import running_server

        stack = contextlib.ExitStack()
        server = stack.enter_context(running_server(root / "weed"))
        os.environ.update(server.env())
        base = f"s3://{server.create_bucket('bench')}/out"
    try:
        rows = [measure(n, args.steps, args.size, args.lerobot, args.group, root, base, args.verify)
                for n in args.episodes]
    finally:
        if server is not None:
            stack.close()
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()
    where = "SeaweedFS (s3://)" if args.s3 else "local disk"
    print(f"# output path after the last rollout: {args.steps} frames/episode at {args.size}x{args.size}, "
          f"groups of {args.group}, output on {where}, one process, load average {load[0]:.1f} at the end\n")
    print("| episodes | frames | replicas' episode writes s | replicas' parts s | new: index s | index ms/ep "
          "| new: LeRobot assembly s | LeRobot ms/ep | old: one store s | one store ms/ep | old: LeRobot export s "
          "| export ms/ep | files | files/ep | MB | resume: find commits s | driver peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        per = 1000 / r["episodes"]
        print(f"| {r['episodes']} | {r['frames']} | {r['write_s']:.1f} | {r['part_s']:.1f} | "
              f"{r['index_s']:.2f} | {r['index_s'] * per:.2f} | {r['lerobot_s']:.2f} | {r['lerobot_s'] * per:.2f} | "
              f"{r['one_s']:.1f} | {r['one_s'] * per:.1f} | {r['export_s']:.1f} | {r['export_s'] * per:.1f} | "
              f"{r['files']} | {r['files'] / r['episodes']:.2f} | {r['mb']:.1f} | {r['resume_s']:.2f} | {r['rss_mb']:.0f} |")

    if args.verify:
        print("\n| episodes | resume check (files, sizes) s | ms/ep | `iws verify` (read back) s | ms/ep "
              "| read all s | read all, verify=True s | × | export zarr-dp s | export, verify=True s | × |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            per = 1000 / r["episodes"]
            print(f"| {r['episodes']} | {r['quick_s']:.2f} | {r['quick_s'] * per:.2f} | {r['deep_s']:.1f} | "
                  f"{r['deep_s'] * per:.1f} | {r['read_False_s']:.1f} | {r['read_True_s']:.1f} | "
                  f"{r['read_True_s'] / r['read_False_s']:.2f} | {r['export_False_s']:.1f} | "
                  f"{r['export_True_s']:.1f} | {r['export_True_s'] / r['export_False_s']:.2f} |")


if __name__ == "__main__":
    main()
