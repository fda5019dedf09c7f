"""How well the pixel-only PushT coverage scorer agrees with gym-pusht's own coverage.

Ground-truth frames from three sources, each with gym-pusht's coverage beside it:
  random   - gym-pusht's seeded random initial states (mostly no overlap with the goal);
  near     - states reset to the goal pose plus Gaussian offsets (sigma 3, 10, 30 units and
             0.03, 0.1, 0.3 rad), the agent next to the T (often touching, partly hiding it)
             or anywhere clear of it;
  pushing  - every 5th frame of demonstrator episodes (the agent in contact, coverage 0 -> ~1).
Reports per source and overall: Pearson r, mean and max absolute error, and how often the
success verdicts (coverage > 0.95) agree.

    python experiments/scorer_agreement.py --resolution 96 --out runs/scorer_agreement.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from pipeline.evaluation.stats import pearson
from pipeline.pusht.demonstrator import PushTDemonstrator
from pipeline.pusht.env import AGENT_RADIUS, PushTSim, distance_to_block
from pipeline.pusht.features import pusht_features
from pipeline.pusht.scorer import GOAL_POSE, SUCCESS_THRESHOLD, frame_coverage
from pipeline.pusht.truth import roll_pusht, seeded_states
from schemas import EpisodeSpec


def random_states(sim: PushTSim, n: int) -> list[tuple[np.ndarray, float]]:
    return [(o.frame, o.coverage) for o in (sim.reset(10_000 + s) for s in range(n))]


def _agent_near(rng: np.random.Generator, pose: np.ndarray) -> np.ndarray:
    """A point where the agent disc touches or nearly touches the T, else anywhere clear of it."""
    touching = rng.uniform() < 0.6
    for _ in range(500):
        point = rng.uniform(30.0, 482.0, 2)
        gap = distance_to_block(point, pose) - AGENT_RADIUS
        if (0.0 <= gap < 4.0) if touching else gap >= 0.0:
            return point
    return np.array([40.0, 470.0])


def near_goal_states(sim: PushTSim, n: int, seed: int) -> list[tuple[np.ndarray, float]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        sigma_xy, sigma_angle = [(3.0, 0.03), (10.0, 0.1), (30.0, 0.3)][i % 3]
        pose = GOAL_POSE + np.array([*rng.normal(0, sigma_xy, 2), rng.normal(0, sigma_angle)])
        obs = sim.reset_to(_agent_near(rng, pose), pose)
        out.append((obs.frame, obs.coverage))
    return out


def pushing_frames(resolution: int, episodes: int, every: int = 5) -> list[tuple[np.ndarray, float]]:
    seeds = list(range(20_000, 20_000 + episodes))
    specs = [EpisodeSpec(job_id="scorer", index=i, episode_id=f"s-{s}", seed=s, init_ref="gym",
                         action_source="demo", horizon=301) for i, s in enumerate(seeds)]
    result = roll_pusht(PushTDemonstrator(pusht_features(resolution)), specs, seeded_states(seeds),
                        300, resolution, keep_frames=range(episodes))
    return [(result.frames[r][t], float(result.coverage[r, t]))
            for r in range(episodes) for t in range(0, 301, every)]


def agreement(pairs: list[tuple[float, float]]) -> dict[str, float | int | None]:
    truth, scored = np.array(pairs).T
    error = np.abs(scored - truth)
    return {"n": len(pairs), "pearson_r": pearson(scored, truth), "mae": float(error.mean()),
            "max_abs_error": float(error.max()),
            "success_agreement": float(np.mean((scored > SUCCESS_THRESHOLD) == (truth > SUCCESS_THRESHOLD))),
            "true_successes": int((truth > SUCCESS_THRESHOLD).sum()),
            "scored_successes": int((scored > SUCCESS_THRESHOLD).sum())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resolution", type=int, default=96)
    parser.add_argument("--random", type=int, default=100, help="random initial states")
    parser.add_argument("--near", type=int, default=300, help="states near the goal")
    parser.add_argument("--episodes", type=int, default=5, help="demonstrator episodes (61 frames each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the numbers as JSON here too")
    args = parser.parse_args()
    sim = PushTSim(args.resolution)
    sources = {"random": random_states(sim, args.random),
               "near": near_goal_states(sim, args.near, args.seed),
               "pushing": pushing_frames(args.resolution, args.episodes)}
    start, pairs = time.perf_counter(), {}
    for name, frames in sources.items():
        pairs[name] = [(truth, frame_coverage(frame)) for frame, truth in frames]
    per_frame_ms = 1000 * (time.perf_counter() - start) / sum(map(len, pairs.values()))
    results = {name: agreement(p) for name, p in pairs.items()}
    results["all"] = agreement([x for p in pairs.values() for x in p])
    print("| source | n | Pearson r | MAE | max abs error | success agreement | true / scored successes |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['n']} | {r['pearson_r']:.4f} | {r['mae']:.4f} | {r['max_abs_error']:.3f} | "
              f"{r['success_agreement']:.3f} | {r['true_successes']} / {r['scored_successes']} |")
    print(f"\nresolution {args.resolution}: {per_frame_ms:.1f} ms per scored frame")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"resolution": args.resolution, "ms_per_frame": per_frame_ms,
                                        "results": results}, indent=2))


if __name__ == "__main__":
    main()
