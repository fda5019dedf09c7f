"""How well the pixel-only sweep scorer (in-goal pixel fraction, top view) agrees with the
simulator's own in-goal fraction (disc centres), and how the side view's reading compares.

Ground-truth frames from three sources, each with the simulator's fraction beside it:
  play          - every 10th frame of `iws collect sweep` scripted play (seeds apart from tests);
  scattered     - piles redrawn with a random share of the discs anywhere in the goal and the
                  rest anywhere outside it, pushers anywhere (they hide discs beneath them);
  demonstrator  - every 10th frame of demonstrator episodes in the arena.
Per source and overall: Pearson r, mean and max absolute error, and how often the success
verdicts (fraction >= 0.9) agree; and Pearson r of the side view's pixel reading.

    python experiments/sweep_scorer_agreement.py --out runs/sweep_scorer_agreement.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from pipeline.evaluation.stats import pearson
from pipeline.sweep.collect import CollectConfig, play
from pipeline.sweep.demonstrator import SweepDemonstrator
from pipeline.sweep.env import (
    ACTION_HIGH,
    ACTION_LOW,
    GOAL,
    PARTICLE_RADIUS,
    SUCCESS_FRACTION,
    SweepSim,
    draw_pile,
    in_goal,
)
from pipeline.sweep.features import sweep_features
from pipeline.sweep.render import render
from pipeline.sweep.vision import in_goal_pixel_fraction
from schemas import EpisodeSpec
from workers.actions.base import Observation

Sample = tuple[np.ndarray, np.ndarray, float]  # top frame, side frame, true fraction


def play_frames(episodes: int, every: int = 10) -> list[Sample]:
    config = CollectConfig(episodes=episodes, steps=200, seed=7000)
    out = []
    for index in range(episodes):
        episode = play(config, index)
        for t in range(0, len(episode), every):
            out.append((episode.frames["top"][t], episode.frames["side"][t],
                        float(episode.extras["in_goal"][t])))
    return out


def scattered_frames(n: int, seed: int) -> list[Sample]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        _, particles = draw_pile(rng)
        share = rng.uniform()
        margin = PARTICLE_RADIUS + 1
        for k in range(len(particles)):
            while True:  # rejection: inside or outside the goal as drawn
                point = rng.uniform(5 + margin, 506 - margin, 2)
                if in_goal(point) == (k < share * len(particles)):
                    break
            particles[k] = point
        pushers = rng.uniform(ACTION_LOW, ACTION_HIGH, (2, 2))
        views = render(pushers, particles, 96)
        out.append((views["top"], views["side"], float(in_goal(particles).mean())))
    return out


def demonstrator_frames(episodes: int, every: int = 10) -> list[Sample]:
    sim = SweepSim()
    policy = SweepDemonstrator(sweep_features())
    out = []
    for i in range(episodes):
        state = sim.reset(8000 + i)
        spec = EpisodeSpec(job_id="scorer", index=i, episode_id=f"scorer-{i}", seed=8000 + i,
                           init_ref="arena", action_source="demonstrator", horizon=201)
        for t in range(201):
            views = render(state.pushers, state.particles, 96)
            observation = Observation(np.stack([views["top"], views["side"]])[None],
                                      state.pushers.reshape(1, 4).astype(np.float32))
            if t == 0:
                policy.reset([spec], observation)
            if t % every == 0:
                out.append((views["top"], views["side"], state.in_goal))
            state = sim.step(policy.actions(t, observation)[0])
    return out


def agreement(samples: list[Sample]) -> dict[str, float | int | None]:
    true = np.array([s[2] for s in samples])
    top = np.array([in_goal_pixel_fraction(s[0], "top")[0] for s in samples])
    side = np.array([in_goal_pixel_fraction(s[1], "side")[0] for s in samples])
    error = np.abs(top - true)
    return {"n": len(samples), "pearson_r": pearson(top, true), "mae": float(error.mean()),
            "max_abs_error": float(error.max()),
            "success_agreement": float(np.mean((top >= SUCCESS_FRACTION) == (true >= SUCCESS_FRACTION))),
            "true_successes": int((true >= SUCCESS_FRACTION).sum()),
            "scored_successes": int((top >= SUCCESS_FRACTION).sum()),
            "true_mean": float(true.mean()), "side_pearson_r": pearson(side, true)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--play", type=int, default=20, help="scripted play episodes (20 frames each)")
    parser.add_argument("--scattered", type=int, default=200)
    parser.add_argument("--demonstrator", type=int, default=8, help="episodes (20 frames each)")
    parser.add_argument("--out", type=Path, default=None, help="JSON of the table")
    args = parser.parse_args()
    began = time.perf_counter()
    sources = {"play": play_frames(args.play), "scattered": scattered_frames(args.scattered, 9000),
               "demonstrator": demonstrator_frames(args.demonstrator)}
    sources["all"] = [s for samples in sources.values() for s in samples]
    table = {name: agreement(samples) for name, samples in sources.items()}
    print("| source | n | Pearson r | MAE | max abs error | success agreement | true / scored "
          "successes | mean true fraction | side view r |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, row in table.items():
        print(f"| {name} | {row['n']} | {row['pearson_r']:.4f} | {row['mae']:.4f} | "
              f"{row['max_abs_error']:.3f} | {row['success_agreement']:.3f} | "
              f"{row['true_successes']} / {row['scored_successes']} | {row['true_mean']:.3f} | "
              f"{row['side_pearson_r']:.3f} |")
    print(f"goal {GOAL.tolist()}; {time.perf_counter() - began:.0f} s")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(table, indent=2))


if __name__ == "__main__":
    main()
