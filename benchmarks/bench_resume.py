"""What a resume costs before it rolls anything, at N committed episodes (issue 34): the objects
a zarr-only job leaves and the time to find what is committed and check it.

Builds a finished zarr-only output of N episodes (20 steps at 32x32, groups of 8; the frames of
benchmarks/bench_output.py) the way the replicas write it, then times what a driver does first
on a resume of it, under the output's lease:

    group commits (this iws)      list + read the part records, check every recorded file's size
                                  (`read_parts`, `verify.inspect`, `verify.mark`)
    per-episode markers (before)  the same for the parts, then list + read one commit marker per
                                  episode and list the episode stores (`committed_records`,
                                  `drop_commits_without_data`)

The script runs on either protocol: run it on this checkout and on one from before group commits
(commit 4ba9c56, e.g. `git worktree add /tmp/before 4ba9c56`) to compare, local and with --s3 on
a local SeaweedFS (objects counted by listing the bucket).

    .venv/bin/python benchmarks/bench_resume.py --episodes 2000 [--s3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("SVT_LOG", "1")


def build(out: str, n: int, group: int) -> tuple[object, str]:
    from bench_output import episode, features

    from schemas import JobSpec
    from sim_model import storage
    from workers import parts, writer

    spec = features(32)
    job = JobSpec.model_validate({
        "name": "bench", "model": "unused", "episodes": n, "horizon": 20, "task": "move the disc",
        "init": {"images": ["unused.png"]}, "action_sources": {"walk": {"kind": "scripted"}},
        "output": {"path": out}})
    grouped = hasattr(writer, "episode_record")
    for start in range(0, n, group):
        episodes = [episode(i, 20, 32, "bench") for i in range(start, min(start + group, n))]
        if grouped:
            shard = storage.join(out, "dataset", "shards", f"{start:08d}.zarr")
            rows = [writer.episode_record(e, start + i, shard) for i, e in enumerate(episodes)]
        else:
            rows = [writer.write_episode(out, e, start + i, spec) for i, e in enumerate(episodes)]
        parts.write_part(out, job, start, episodes, rows, spec)
        if not grouped:
            parts.release_stores(out, job, rows)
    return job, "group commits" if grouped else "per-episode markers"


def resume(out: str, n: int) -> float:
    """Seconds to find the committed episodes and check them, as a resume's driver does."""
    from pipeline.generate import verify
    from workers import lease, parts, writer

    started = time.perf_counter()
    with lease.hold(out, job="bench") as held:
        found = parts.read_parts(out)
        trusted = verify.mark(out, found, verify.inspect(out, found), held)
        if hasattr(writer, "episode_record"):
            done = parts.committed(trusted)
        else:
            done = writer.drop_commits_without_data(out, writer.committed_records(out), held,
                                                    held=parts.held_by_parts(trusted))
    elapsed = time.perf_counter() - started
    assert len(done) == n, (len(done), n)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, nargs="+", default=[2000])
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="resumes timed per output (the median is shown)")
    parser.add_argument("--s3", action="store_true", help="the output on a local SeaweedFS (needs `weed`)")
    args = parser.parse_args()
    import contextlib
    import logging

    from bench_output import census

    logging.basicConfig(level=logging.WARNING)
    root = Path(tempfile.mkdtemp(prefix="bench_resume_"))
    with contextlib.ExitStack() as stack:
        base = str(root / "out")
        if args.s3:
            from tests.fixtures.s3 import running_server

            server = stack.enter_context(running_server(root / "weed"))
            os.environ.update(server.env())
            base = f"s3://{server.create_bucket('bench')}/out"
        rows = []
        for n in args.episodes:
            out = f"{base}/job{n}"
            started = time.perf_counter()
            _, protocol = build(out, n, args.group)
            build_s = time.perf_counter() - started
            objects, size = census(out)
            times = [resume(out, n) for _ in range(args.repeat)]
            rows.append((protocol, n, objects, size, build_s, statistics.median(times)))
    shutil.rmtree(root, ignore_errors=True)
    where = "SeaweedFS (s3://)" if args.s3 else "local disk"
    print(f"# resume of a finished zarr-only output: 20 steps at 32x32, groups of {args.group}, {where}, "
          f"median of {args.repeat}, load average {os.getloadavg()[0]:.1f} at the end\n")
    print("| protocol | episodes | objects | objects/episode | MB | write s | resume: find + check commits s | ms/episode |")
    print("|---|---|---|---|---|---|---|---|")
    for protocol, n, objects, size, build_s, resume_s in rows:
        print(f"| {protocol} | {n} | {objects} | {objects / n:.2f} | {size / 1e6:.1f} | {build_s:.0f} | "
              f"{resume_s:.2f} | {1000 * resume_s / n:.2f} |")


if __name__ == "__main__":
    main()
