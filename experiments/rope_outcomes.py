"""Rope routing's own test (issue 30): does the world model end an action stream with the rope
where the simulator does, through the clip or swung past it?

Paired action streams: from each of `--starts` fresh tables (seed SEED, apart from training's 0
and the held-out set's 1000) two streams are planned on the true state, one `route` (pull the rope
through the gap) and one `swing` (pull it past beside a post), each padded with holds to
`--steps`. Each stream runs open loop in the simulator and in the model from the same first
frame; the simulator's outcome is `inserted` at the end, the model's is the pixel scorer's verdict
on its last frame (pipeline.rope.vision). Reported: agreement with a Wilson interval, the
confusion table (does the model lean toward either outcome?), and the same verdicts on the
simulator's own last frames (the scorer's share of the disagreement).

    python -m experiments.rope_outcomes --model sim_model/bundled/rope --starts 25 --out experiments/results/rope_outcomes.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from pipeline.evaluation.stats import wilson_interval
from pipeline.rope.env import RopeSim, draw_start
from pipeline.rope.primitives import route, swing
from pipeline.rope.render import render_top
from pipeline.rope.vision import gap_reading
from sim_model.world_model import WorldModel

SEED = 30_000


def streams(starts: int, steps: int) -> list[dict]:
    """Per start and kind: the start, the actions (steps, 2), the simulator's outcome and frames."""
    out = []
    for i in range(starts):
        for kind, plan in (("route", route), ("swing", swing)):
            rng = np.random.default_rng(np.random.SeedSequence([SEED, i]))
            start = draw_start(rng)
            sim = RopeSim()
            state = sim.reset_to(start)
            first = render_top(state, 96)
            actions = plan(state, np.random.default_rng(np.random.SeedSequence([SEED, i, 1])))[:steps]
            actions += [actions[-1]] * (steps - len(actions))
            for target in actions:
                state = sim.step(target)
            out.append({"start": i, "kind": kind, "first": first, "state0": start.effector,
                        "actions": np.array(actions, np.float32), "inserted": state.inserted,
                        "last": render_top(state, 96)})
    return out


def report(model_path: str, starts: int, steps: int, batch: int) -> tuple[str, dict]:
    model = WorldModel.load(model_path, device="cpu")
    rows = streams(starts, steps)
    for first in range(0, len(rows), batch):
        chunk = rows[first:first + batch]
        model.reset(np.stack([r["first"] for r in chunk]),
                    state=np.stack([r["state0"] for r in chunk]).astype(np.float32))
        for t in range(steps):
            result = model.step(np.stack([r["actions"][t] for r in chunk]))
        for r, frame in zip(chunk, result.frames, strict=True):
            r["model_through"] = gap_reading(frame[0] if frame.ndim == 4 else frame)[0]
            r["sim_pixels_through"] = gap_reading(r["last"])[0]
    sim = np.array([r["inserted"] for r in rows])
    seen = np.array([r["model_through"] for r in rows])
    pixels = np.array([r["sim_pixels_through"] for r in rows])
    agree = int((sim == seen).sum())
    low, high = wilson_interval(agree, len(rows))
    table = {"n": len(rows), "agreement": agree / len(rows), "agreement_ci95": [low, high],
             "sim_in_model_in": int((sim & seen).sum()), "sim_in_model_out": int((sim & ~seen).sum()),
             "sim_out_model_in": int((~sim & seen).sum()), "sim_out_model_out": int((~sim & ~seen).sum()),
             "scorer_on_sim_frames_agreement": float((pixels == sim).mean()),
             "by_kind": {kind: {"n": int(sum(r["kind"] == kind for r in rows)),
                                "sim_inserted": int(sum(r["inserted"] for r in rows if r["kind"] == kind)),
                                "model_through": int(sum(r["model_through"] for r in rows if r["kind"] == kind))}
                         for kind in ("route", "swing")}}
    text = "\n".join([
        f"Model `{model_path}`, {len(rows)} paired streams ({starts} starts x route/swing), {steps} steps open loop.",
        "",
        f"Agreement on the outcome: **{table['agreement']:.2f}** [{low:.2f}, {high:.2f}] (Wilson 95 %); "
        f"the pixel scorer on the simulator's own last frames agrees with its state {table['scorer_on_sim_frames_agreement']:.2f}.",
        "",
        "| simulator \\ model | through the clip | not through |",
        "|---|---:|---:|",
        f"| inserted | {table['sim_in_model_in']} | {table['sim_in_model_out']} |",
        f"| swung past | {table['sim_out_model_in']} | {table['sim_out_model_out']} |",
        "",
        "| stream | n | simulator inserted | model through |",
        "|---|---:|---:|---:|",
        *[f"| {k} | {v['n']} | {v['sim_inserted']} | {v['model_through']} |" for k, v in table["by_kind"].items()],
    ])
    return text, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="rope")
    parser.add_argument("--starts", type=int, default=25)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text, table = report(args.model, args.starts, args.steps, args.batch)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("# Rope routing: the model's outcome against the simulator's\n\n"
                            f"`python -m experiments.rope_outcomes --model {args.model} --starts {args.starts} "
                            f"--steps {args.steps}`\n\n{text}\n")
        args.out.with_suffix(".json").write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
