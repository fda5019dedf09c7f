"""How well the pixel-only mug scorer (`mug_held`: the mug's centre triangulated from the front
and side views) agrees with the simulator's own reading of the same states, and how well the two
fixed views agree on where the mug is (cross-view consistency).

Ground-truth frames from two sources, each with the simulator's state beside it:
  play   - every 5th frame of scripted mug play (pipeline.mug.collect, seed 7000, apart from tests);
  ends   - the last frame of every episode of that play: what an episode is scored on.
Per source and overall: Pearson r of the pixel lift against the true lift, how often the pixel
verdict (lifted above HELD_HEIGHT) agrees with the simulator's `held`, the confusion counts, the
median error of the triangulated centre (x, y, z, mm) and the median distance between the two
views' rays there (mm).

    python -m experiments.mug_scorer_agreement --episodes 30 --out runs/mug_scorer_agreement.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from pipeline.evaluation.stats import pearson
from pipeline.mug.collect import CollectConfig, open_sim, play
from pipeline.mug.env import HELD_HEIGHT
from pipeline.mug.scorer import STANDING
from pipeline.mug.vision import locate

SEED = 7000


def _row(readings: list, truth: list[np.ndarray], held: list[bool]) -> dict:
    seen = [r is not None for r in readings]
    centre = np.array([r[0] if r is not None else np.full(3, np.nan) for r in readings])
    gap = np.array([r[1] if r is not None else np.nan for r in readings])
    true_centre = np.array(truth) + np.array([0.0, 0.0, STANDING])
    lifted = centre[:, 2] - STANDING > HELD_HEIGHT
    real = np.array(held)
    ok = np.array(seen)
    return {"n": len(readings), "unseen": int((~ok).sum()),
            "pearson_lift": pearson(centre[ok, 2], true_centre[ok, 2]),
            "agreement": float((lifted == real).mean()),
            "held_both": int((lifted & real).sum()), "missed": int((~lifted & real).sum()),
            "false": int((lifted & ~real).sum()), "held_share": float(real.mean()),
            "error_mm": [float(v) for v in 1000 * np.nanmedian(np.abs(centre - true_centre), axis=0)],
            "view_gap_mm": float(1000 * np.nanmedian(gap))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("runs/mug_scorer_agreement.json"))
    args = parser.parse_args()
    started = time.time()
    config = CollectConfig(episodes=args.episodes, steps=args.steps, seed=SEED)
    sources: dict[str, tuple[list, list, list]] = {"play": ([], [], []), "ends": ([], [], [])}
    sim = open_sim(config)
    try:
        for index in range(args.episodes):
            episode = play(sim, config, index)
            steps = {"play": range(0, episode.meta.length, 5), "ends": [episode.meta.length - 1]}
            for name, picked in steps.items():
                for k in picked:
                    sources[name][0].append(locate(episode.frames["front"][k], episode.frames["side"][k]))
                    sources[name][1].append(episode.extras["mug_pose"][k][:3].astype(np.float64))
                    sources[name][2].append(bool(episode.extras["held"][k]))
    finally:
        sim.close()
    rows = {name: _row(*lists) for name, lists in sources.items()}
    rows["all"] = _row(*(sources["play"][i] + sources["ends"][i] for i in range(3)))
    print("| source | n | not in view | Pearson r (lift) | verdict agreement | held (both) | missed | false "
          "| held share | centre error x, y, z mm | views' rays apart mm |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for name, r in rows.items():
        error = ", ".join(f"{v:.1f}" for v in r["error_mm"])
        print(f"| {name} | {r['n']} | {r['unseen']} | {r['pearson_lift']:.3f} | {r['agreement']:.3f} | "
              f"{r['held_both']} | {r['missed']} | {r['false']} | {r['held_share']:.2f} | {error} | "
              f"{r['view_gap_mm']:.1f} |")
    print(f"\n{time.time() - started:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
