"""Success rate of the pixel-based PushT demonstrator in gym-pusht itself.

Episodes start from gym-pusht's own seeded random initial states (env.reset(seed=s) for
s = --first .. --first + --episodes - 1) and run --horizon steps; the demonstrator sees only the
rendered frames and the agent position. Success: coverage > 0.95 at any step (gym-pusht's
threshold and termination rule). Results go to a JSON-lines file, one line per episode, so a long
run can be split into chunks (--first) that land in the same file; the summary covers the file.

    python experiments/demonstrator_success.py --episodes 50 --out runs/demonstrator.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np

from pipeline.evaluation.stats import bootstrap_mean_interval, wilson_interval
from pipeline.pusht.demonstrator import PushTDemonstrator
from pipeline.pusht.features import pusht_features
from pipeline.pusht.truth import roll_pusht, seeded_states
from schemas import EpisodeSpec

log = logging.getLogger("demonstrator_success")


def run_chunk(seeds: list[int], horizon: int, resolution: int) -> list[dict]:
    specs = [EpisodeSpec(job_id="demonstrator", index=i, episode_id=f"demonstrator-{s}", seed=s,
                         init_ref=f"gym-pusht:seed={s}", action_source="demonstrator",
                         horizon=horizon + 1) for i, s in enumerate(seeds)]
    policy = PushTDemonstrator(pusht_features(resolution))
    start = time.perf_counter()
    result = roll_pusht(policy, specs, seeded_states(seeds), horizon, resolution)
    seconds = (time.perf_counter() - start) / len(seeds)
    rows = []
    for i, seed in enumerate(seeds):
        hits = np.flatnonzero(result.coverage[i] > 0.95)
        rows.append({"seed": seed, "success": bool(result.success[i]), "best": float(result.best[i]),
                     "final": float(result.final[i]), "first_success": int(hits[0]) if hits.size else None,
                     "plans": policy.rows[i].plans, "seconds": seconds})
    return rows


def summarize(rows: list[dict]) -> str:
    n, k = len(rows), sum(r["success"] for r in rows)
    low, high = wilson_interval(k, n)
    final = [r["final"] for r in rows]
    f_low, f_high = bootstrap_mean_interval(final)
    steps = [r["first_success"] for r in rows if r["first_success"] is not None]
    lines = ["| episodes | success rate (95% Wilson) | mean final coverage (95% bootstrap) | "
             "mean best coverage | median steps to success | s/episode |",
             "|---:|---:|---:|---:|---:|---:|",
             f"| {n} | {k}/{n} = {k / n:.2f} [{low:.2f}, {high:.2f}] | {np.mean(final):.3f} "
             f"[{f_low:.3f}, {f_high:.3f}] | {np.mean([r['best'] for r in rows]):.3f} | "
             f"{np.median(steps) if steps else float('nan'):.0f} | "
             f"{np.mean([r['seconds'] for r in rows]):.1f} |"]
    failed = [f"seed {r['seed']}: best {r['best']:.3f}, final {r['final']:.3f}" for r in rows if not r["success"]]
    return "\n".join(lines + (["", "failures: " + "; ".join(failed)] if failed else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--first", type=int, default=0, help="first gym-pusht reset seed")
    parser.add_argument("--horizon", type=int, default=300, help="steps per episode (gym-pusht: 300)")
    parser.add_argument("--resolution", type=int, default=96)
    parser.add_argument("--chunk", type=int, default=10, help="episodes stepped together")
    parser.add_argument("--out", type=Path, required=True, help="JSON-lines file (appended to)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.first, args.first + args.episodes))
    for i in range(0, len(seeds), args.chunk):
        rows = run_chunk(seeds[i:i + args.chunk], args.horizon, args.resolution)
        with args.out.open("a") as f:  # one line per finished episode: a killed run keeps its chunks
            f.writelines(json.dumps(r) + "\n" for r in rows)
        log.info("seeds %d-%d: %d/%d succeeded", rows[0]["seed"], rows[-1]["seed"],
                 sum(r["success"] for r in rows), len(rows))
    rows = [json.loads(line) for line in args.out.read_text().splitlines() if line.strip()]
    print(summarize(rows))


if __name__ == "__main__":
    main()
