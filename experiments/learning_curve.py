"""The bundled PushT model's learning curve: T-IoU@50 and long-rollout shape score against the
training CPU-hours of each scored checkpoint, one line per recipe and held-out set (the
scripted-play ablation set; the contact-heavy set whose generator no training used, dashed).

Points come from ablation reports (experiments/ablation_score.py) and live in a small committed
JSON, so the curve grows across sessions while the checkpoints themselves stay out of git:

    python -m experiments.learning_curve add --report experiments/results/ablations.json \
        --arm recipeA_lowlr --recipe "A, lr 1.5e-4" --checkpoint runs/abl_recipeA_lowlr/model
    python -m experiments.learning_curve plot

Hours are the sum of every training stage's wall time in the checkpoint's provenance, less the
minutes it trained on a GPU (`--gpu-minutes`, from the burst's log): the x axis stays CPU-hours,
and a point that had GPU time is labelled with it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from sim_model import checkpoint as ckpt
from sim_model.storage.atomic import write_text

CURVE = Path("docs/models/pusht/learning_curve.json")


class CurvePoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    recipe: str
    arm: str
    checkpoint_hash: str
    hours: float
    t_iou_50: float
    t_iou_50_low: float
    t_iou_50_high: float
    long_shape: float
    report: str
    gpu_minutes: float = 0.0
    # which held-out set scored it: "ablation" (scripted play, seed 2000) or "contact" (the aimed
    # strikes and levers no training used, data/pusht_contact_heldout.zarr)
    heldout: str = "ablation"


def heldout_of(report: dict) -> str:
    return "contact" if "contact" in str(report.get("data", "")) else "ablation"


def training_hours(checkpoint: str) -> float:
    stages = ckpt.read_config(ckpt.resolve(checkpoint)).provenance.stages
    return sum(s.wall_time_s for s in stages) / 3600


def point(report_path: str, arm_name: str, recipe: str, checkpoint: str, gpu_minutes: float = 0.0) -> CurvePoint:
    report = json.loads(Path(report_path).read_text())
    arm = next((a for a in report["arms"] if a["name"] == arm_name), None)
    if arm is None:
        raise SystemExit(f"{report_path} has no arm '{arm_name}' ({[a['name'] for a in report['arms']]})")
    at50 = next(h for h in arm["horizons"] if h["horizon"] == 50)["t_iou"]
    return CurvePoint(recipe=recipe, arm=arm_name, checkpoint_hash=arm["checkpoint_hash"],
                      hours=training_hours(checkpoint) - gpu_minutes / 60, t_iou_50=at50["mean"], t_iou_50_low=at50["low"],
                      t_iou_50_high=at50["high"], long_shape=arm["long"]["shape"]["mean"], report=report_path,
                      gpu_minutes=gpu_minutes, heldout=heldout_of(report))


def load(path: Path) -> list[CurvePoint]:
    return [CurvePoint(**p) for p in json.loads(path.read_text())] if path.is_file() else []


def plot(points: list[CurvePoint], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4.2))
    lines = dict.fromkeys((p.recipe, p.heldout) for p in points)
    # One colour per recipe, so its contact-heavy line (dashed) sits in the colour of its solid one.
    palette = plt.get_cmap("tab20")
    # (recipes scored on both sets first: they take the strong shades)
    recipes = sorted(dict.fromkeys(recipe for recipe, _ in lines),
                     key=lambda r: (r, "contact") not in lines)
    colour = {r: palette((2 * i) % 20 + (2 * i) // 20 % 2) for i, r in enumerate(recipes)}
    for recipe, heldout in lines:
        mine = sorted((p for p in points if (p.recipe, p.heldout) == (recipe, heldout)),
                      key=lambda p: p.hours)
        hours = [p.hours for p in mine]
        # The contact-heavy held-out set: dashed, open markers, beside the same recipe's line.
        style = {"marker": "o"} if heldout == "ablation" else {"marker": "s", "ls": "--", "mfc": "none"}
        style["color"] = colour[recipe]
        label = recipe if heldout == "ablation" else f"{recipe} (contact-heavy set)"
        left.errorbar(hours, [p.t_iou_50 for p in mine], label=label, capsize=3, **style,
                      yerr=[[p.t_iou_50 - p.t_iou_50_low for p in mine],
                            [p.t_iou_50_high - p.t_iou_50 for p in mine]])
        right.plot(hours, [p.long_shape for p in mine], label=label, **style)
        for p in mine:
            if p.gpu_minutes:
                for axis, y in ((left, p.t_iou_50), (right, p.long_shape)):
                    axis.annotate(f"+{p.gpu_minutes:.0f} GPU-min", (p.hours, y), fontsize=6,
                                  textcoords="offset points", xytext=(4, -8))
    left.axhline(0.6, color="grey", ls="--", lw=0.8)
    right.axhline(0.8, color="grey", ls="--", lw=0.8)
    left.set(xlabel="training CPU-hours", ylabel="T-IoU @ 50 (95% CI)", title="open loop, held out")
    right.set(xlabel="training CPU-hours", ylabel="rigid-shape score", title="2,000-step rollouts")
    handles, labels = left.get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=7, frameon=False)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add", help="add (or replace) one scored checkpoint's point on a line")
    add.add_argument("--report", required=True)
    add.add_argument("--arm", required=True)
    add.add_argument("--recipe", required=True, help="the line this point belongs to")
    add.add_argument("--checkpoint", required=True, help="the arm's checkpoint (for its training hours)")
    add.add_argument("--gpu-minutes", type=float, default=0.0,
                     help="minutes of its training that ran on a GPU (kept off the CPU-hours axis)")
    sub.add_parser("plot", help="draw the curve beside its JSON")
    parser.add_argument("--curve", type=Path, default=CURVE)
    args = parser.parse_args(argv)
    points = load(args.curve)
    if args.command == "add":
        new = point(args.report, args.arm, args.recipe, args.checkpoint, args.gpu_minutes)
        same = (new.checkpoint_hash, new.recipe, new.heldout)
        points = [p for p in points if (p.checkpoint_hash, p.recipe, p.heldout) != same] + [new]
        write_text(args.curve, json.dumps([p.model_dump() for p in points], indent=1))
    plot(points, args.curve.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
