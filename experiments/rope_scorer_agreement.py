"""How well the pixel-only rope scorer (`rope_inserted`, top view) agrees with the simulator's own
reading of the same states (pipeline.rope.scorer.truth_score: the rope's points against the clip).

Ground-truth frames from two sources, each with the simulator's score beside it:
  play   - every 10th frame of `iws collect rope` scripted play (seed 7000, apart from tests);
  ends   - the last frame of every episode of that play: what an episode is scored on.
Per source and overall: Pearson r of the graded scores, how often the verdicts (through the clip
or not) agree, the confusion counts, and how many misses have the effector over the clip.

    python -m experiments.rope_scorer_agreement --episodes 60 --out runs/rope_scorer_agreement.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from pipeline.evaluation.stats import pearson
from pipeline.rope.collect import CollectConfig, play
from pipeline.rope.env import EFFECTOR_RADIUS, GAP, POST_RADIUS, State
from pipeline.rope.scorer import truth_score
from pipeline.rope.vision import frame_score

SEED = 7000
OVER_CLIP = EFFECTOR_RADIUS + GAP / 2 + POST_RADIUS  # the effector can hide the gap within this


def _row(frames: list[np.ndarray], states: list[State]) -> dict:
    pixels = np.array([frame_score(f) for f in frames])
    truth = np.array([truth_score(s) for s in states])
    over = np.array([np.linalg.norm(s.effector - s.clip) < OVER_CLIP for s in states])
    seen, real = pixels >= 1.0, truth >= 1.0
    return {"n": len(pixels), "pearson": pearson(pixels, truth), "agreement": float((seen == real).mean()),
            "through_both": int((seen & real).sum()), "missed": int((~seen & real).sum()),
            "missed_effector_over_clip": int((~seen & real & over).sum()),
            "false": int((seen & ~real).sum()), "true_share": float(real.mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--out", type=Path, default=Path("runs/rope_scorer_agreement.json"))
    args = parser.parse_args()
    started = time.time()
    config = CollectConfig(episodes=args.episodes, steps=200, seed=SEED)
    sources: dict[str, tuple[list, list]] = {"play": ([], []), "ends": ([], [])}
    for index in range(args.episodes):
        episode = play(None, config, index)
        for k in range(0, episode.meta.length, 10):
            clip = episode.extras["clip"][k]
            sources["play"][0].append(episode.frames["top"][k])
            sources["play"][1].append(State(effector=episode.state[k], rope=episode.extras["rope"][k],
                                            clip=clip[:2], clip_angle=float(clip[2])))
        clip = episode.extras["clip"][-1]
        sources["ends"][0].append(episode.frames["top"][-1])
        sources["ends"][1].append(State(effector=episode.state[-1], rope=episode.extras["rope"][-1],
                                        clip=clip[:2], clip_angle=float(clip[2])))
    rows = {name: _row(*lists) for name, lists in sources.items()}
    rows["all"] = _row(sources["play"][0] + sources["ends"][0], sources["play"][1] + sources["ends"][1])
    print("| source | n | Pearson r | verdict agreement | through (both) | missed (effector over the clip) "
          "| false | true share |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['n']} | {r['pearson']:.3f} | {r['agreement']:.3f} | {r['through_both']} | "
              f"{r['missed']} ({r['missed_effector_over_clip']}) | {r['false']} | {r['true_share']:.2f} |")
    print(f"\n{time.time() - started:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
