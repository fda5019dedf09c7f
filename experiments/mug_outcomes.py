"""Mug grasping's own test (issue 30): does the world model hold the mug where the simulator
does, let it slip where the simulator does, and turn it as far when the handle is nudged? And do
its three cameras agree on where the mug is?

From each of `--starts` fresh tables (seed SEED, apart from training's 0, the held-out set's 1000
and the example's 10000) three streams are planned on the true state (pipeline.mug.primitives):
`grasp` (a firm closure, lift and carry: held), `weak` (a weak closure: the mug slips out as it
rises) and `nudge` (the closed fingers push the handle across: the mug turns), each padded with
holds to `--steps`; a nudge begins and ends with the gripper open over the mug's start, so that
the wrist camera looks down on the handle before and after the push. Each stream runs open loop in the simulator and in the model from the
same first frames (all three cameras).

Reported:
  grasps  - held or not at the end: the simulator's `held` against the `mug_held` scorer's
            verdict on the model's last front and side frames (and on the simulator's own, the
            scorer's share of any disagreement); agreement with a Wilson interval and the
            confusion table (does the model lean toward holding or dropping?);
  nudges  - the mug's turn: the simulator's true change of yaw against the handle's angle read
            from the wrist frames before and after the push (`handle_angle`), of the model and of the
            simulator; median error, Pearson r and how often the turn has the right sign;
  views   - cross-view consistency on every 10th frame of every stream: the distance between
            the front and side rays through the mug (mm), the mug seen in both views, and the
            wrist camera's mug where the fixed views put it (offset in pixels, over the frames
            where that place is in the wrist camera's view; the hand from the state the model
            predicts, the simulator's own for its frames); the model's frames beside the
            simulator's.

    python -m experiments.mug_outcomes --model mug --starts 30 --out experiments/results/mug_outcomes.md
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from pipeline.evaluation.stats import pearson, wilson_interval
from pipeline.mug.env import HELD_HEIGHT, MugSim, State, draw_start
from pipeline.mug.primitives import grasp, hold, line, nudge, weak
from pipeline.mug.scorer import frame_lift
from pipeline.mug.vision import centroid, locate, mug_mask
from sim_model.world_model import WorldModel

SEED = 40_000
KINDS = ("grasp", "weak", "nudge")
LOOK_HEIGHT = 0.2  # where a nudge's gripper ends, over the mug's start: the wrist camera sees the handle
PROBE_EVERY = 10


def handle_angle(wrist: np.ndarray) -> float | None:
    """The handle's direction in a wrist frame looking down on the mug (radians, world yaw:
    counter-clockwise from +x), or None without a mug or a handle in view. The handle is the part
    of the mug's mask well outside the disc the mask would fill as a circle."""
    rows, cols = np.nonzero(mug_mask(wrist))
    if len(rows) < 20:
        return None
    r0, c0 = rows.mean(), cols.mean()
    radius = np.sqrt(len(rows) / np.pi)
    far = np.hypot(rows - r0, cols - c0) > 1.2 * radius
    if far.sum() < 2:
        return None
    return float(np.arctan2(-(rows[far] - r0).mean(), (cols[far] - c0).mean()))


def turn(before: float | None, after: float | None) -> float:
    """The signed change of angle (radians, wrapped to (-pi, pi]); nan if either is missing."""
    if before is None or after is None:
        return float("nan")
    return float(np.angle(np.exp(1j * (after - before))))


def plan(kind: str, state: State, rng: np.random.Generator, steps: int) -> tuple[np.ndarray, int | None]:
    """The stream's targets (steps, 4), planned on the true state and padded with holds, and for
    a nudge the step after which the wrist camera looks down on the mug before it is pushed.
    A nudge looks from over the mug with the gripper open, before and after (closed fingers
    hide the handle)."""
    if kind != "nudge":
        path = (grasp if kind == "grasp" else weak)(state, rng)
        look = None
    else:
        over = np.r_[state.mug_pos[:2], LOOK_HEIGHT, 0.0]
        path = line(np.r_[state.hand, 0.0], over, 0.02) + hold(over, 2)
        look = len(path) - 1
        path += nudge(replace(state, hand=over[:3].copy()), rng)
        path += line(path[-1], over, 0.02) + hold(over, 2)
    path = path[:steps]
    path += hold(path[-1], steps - len(path))
    return np.array(path, np.float32), look


def streams(starts: int, steps: int, names: tuple[str, ...]) -> list[dict]:
    """Per start and kind: the first frames (V, H, W, 3), state, actions, the simulator's outcome
    and its frames at every step (T, V, H, W, 3)."""
    rows = []
    with MugSim() as sim:
        for i in range(starts):
            for k, kind in enumerate(KINDS):
                start = draw_start(np.random.default_rng(np.random.SeedSequence([SEED, i])))
                state = sim.reset_to(start)
                first = sim.render()
                actions, look = plan(kind, state, np.random.default_rng(np.random.SeedSequence([SEED, i, k])), steps)
                frames, hands = [], []
                for target in actions:
                    end = sim.step(target)
                    seen = sim.render()
                    frames.append(np.stack([seen[name] for name in names]))
                    hands.append(end.hand)
                rows.append({"start": i, "kind": kind, "first": np.stack([first[n] for n in names]),
                             "state0": np.r_[state.hand, state.width].astype(np.float32),
                             "actions": actions, "look": look, "held": sim.held(), "yaw0": start.mug_yaw,
                             "yaw": end.mug_yaw, "sim_frames": np.stack(frames),
                             "hands": np.array(hands)})
    return rows


def view_checks(frames: np.ndarray, names: tuple[str, ...], hands: np.ndarray) -> dict[str, list]:
    """Cross-view readings of every PROBE_EVERY-th frame (T, V, H, W, 3) with the gripper at
    `hands` (T, 3): the front-side ray gap (mm; nan when a view misses the mug) and, where the
    fixed views' triangulated centre projects into the wrist frame, how far the wrist camera's
    mug lies from there (pixels; nan when the wrist camera does not show it)."""
    front, side, wrist = (names.index(n) for n in ("front", "side", "wrist"))
    gaps, offsets = [], []
    for t in range(PROBE_EVERY - 1, len(frames), PROBE_EVERY):
        found = locate(frames[t, front], frames[t, side])
        gaps.append(float("nan") if found is None else 1000 * found[1])
        expected = None if found is None else project_wrist(found[0], hands[t], frames.shape[2])
        if expected is None:
            continue
        seen = centroid(frames[t, wrist])
        offsets.append(float("nan") if seen is None else float(np.hypot(seen[0] - expected[0], seen[1] - expected[1])))
    return {"gaps": gaps, "offsets": offsets}


@lru_cache(maxsize=1)
def wrist_camera() -> tuple[np.ndarray, np.ndarray, float]:
    """The wrist camera's offset from the hand (3,), its rotation (3, 3: columns right, up,
    backward; the hand only slides, so it never turns) and its vertical field of view (degrees)."""
    with MugSim(resolution=16) as sim:
        hand = sim.reset(0).hand
        index = sim.model.camera("wrist").id
        return (sim.data.cam_xpos[index] - hand, sim.data.cam_xmat[index].reshape(3, 3).copy(),
                float(sim.model.cam_fovy[index]))


def project_wrist(point: np.ndarray, hand: np.ndarray, size: int, margin: int = 5) -> tuple[float, float] | None:
    """Where a world point appears in the wrist frame (row, col) with the hand at `hand`; None
    when it falls outside the frame (less `margin` pixels) or behind the camera."""
    offset, rotation, fovy = wrist_camera()
    local = rotation.T @ (point - (hand + offset))
    if local[2] >= 0:
        return None
    focal = (size / 2) / np.tan(np.radians(fovy) / 2)
    col = size / 2 - 0.5 + focal * local[0] / -local[2]
    row = size / 2 - 0.5 - focal * local[1] / -local[2]
    if not (margin <= row < size - margin and margin <= col < size - margin):
        return None
    return float(row), float(col)


def _lifted(frames: np.ndarray, names: tuple[str, ...]) -> bool:
    lift = frame_lift(frames[names.index("front")], frames[names.index("side")])
    return lift is not None and lift > HELD_HEIGHT


def report(model_path: str, starts: int, steps: int, batch: int) -> tuple[str, dict]:
    model = WorldModel.load(model_path, device="cpu")
    names = model.features.camera_names
    rows = streams(starts, steps, names)
    wrist = names.index("wrist")
    for first in range(0, len(rows), batch):
        chunk = rows[first:first + batch]
        model.reset(np.stack([r["first"] for r in chunk]), state=np.stack([r["state0"] for r in chunk]))
        results = [model.step(np.stack([r["actions"][t] for r in chunk])) for t in range(steps)]
        predicted = np.stack([result.frames for result in results], axis=1)  # (B, T, V, H, W, 3)
        hands = np.stack([result.state for result in results], axis=1)[..., :3]  # the state head's reading
        for r, frames, model_hands in zip(chunk, predicted, hands, strict=True):
            r["model_held"] = _lifted(frames[-1], names)
            r["pixels_held"] = _lifted(r["sim_frames"][-1], names)
            if r["look"] is not None:
                r["model_turn"] = turn(handle_angle(frames[r["look"], wrist]), handle_angle(frames[-1, wrist]))
                r["pixels_turn"] = turn(handle_angle(r["sim_frames"][r["look"], wrist]),
                                        handle_angle(r["sim_frames"][-1, wrist]))
            r["true_turn"] = turn(r["yaw0"], r["yaw"])
            r["model_views"] = view_checks(frames, names, model_hands)
            r["sim_views"] = view_checks(r["sim_frames"], names, r["hands"])
            del r["sim_frames"]
    return render(model_path, starts, steps, rows)


def _turns(rows: list[dict], key: str) -> dict:
    true = np.degrees([r["true_turn"] for r in rows])
    seen = np.degrees([r[key] for r in rows])
    ok = ~np.isnan(seen)
    error = np.abs(np.angle(np.exp(1j * np.radians(seen[ok] - true[ok]))))
    moved = ok & (np.abs(true) > 10)
    return {"read": int(ok.sum()), "median_error_deg": float(np.degrees(np.median(error))) if ok.any() else None,
            "pearson": pearson(true[ok], seen[ok]) if ok.sum() > 2 else None,
            "turned": int(moved.sum()),
            "right_sign": int((np.sign(seen[moved]) == np.sign(true[moved])).sum())}


def _views(rows: list[dict], key: str) -> dict:
    gaps = np.array([g for r in rows for g in r[key]["gaps"]])
    offsets = np.array([o for r in rows for o in r[key]["offsets"]])
    return {"probes": len(gaps), "both_views": float(np.mean(~np.isnan(gaps))),
            "gap_median_mm": float(np.nanmedian(gaps)) if (~np.isnan(gaps)).any() else None,
            "gap_p90_mm": float(np.nanpercentile(gaps, 90)) if (~np.isnan(gaps)).any() else None,
            "wrist_probes": len(offsets), "wrist_seen": float(np.mean(~np.isnan(offsets))) if len(offsets) else None,
            "wrist_offset_median_px": float(np.nanmedian(offsets)) if (~np.isnan(offsets)).any() else None}


def render(model_path: str, starts: int, steps: int, rows: list[dict]) -> tuple[str, dict]:
    grasps = [r for r in rows if r["kind"] != "nudge"]
    sim = np.array([r["held"] for r in grasps])
    seen = np.array([r["model_held"] for r in grasps])
    pixels = np.array([r["pixels_held"] for r in grasps])
    agree = int((sim == seen).sum())
    low, high = wilson_interval(agree, len(grasps))
    nudges = [r for r in rows if r["kind"] == "nudge"]
    table = {"grasps": len(grasps), "agreement": agree / len(grasps), "agreement_ci95": [low, high],
             "held_held": int((sim & seen).sum()), "held_dropped": int((sim & ~seen).sum()),
             "slipped_held": int((~sim & seen).sum()), "slipped_dropped": int((~sim & ~seen).sum()),
             "scorer_on_sim_frames_agreement": float((pixels == sim).mean()),
             "by_kind": {kind: {"n": sum(r["kind"] == kind for r in grasps),
                                "sim_held": sum(r["held"] for r in grasps if r["kind"] == kind),
                                "model_held": sum(r["model_held"] for r in grasps if r["kind"] == kind)}
                         for kind in ("grasp", "weak")},
             "nudges": len(nudges), "turn_model": _turns(nudges, "model_turn"),
             "turn_sim_pixels": _turns(nudges, "pixels_turn"),
             "true_turn_median_abs_deg": float(np.degrees(np.median(np.abs([r["true_turn"] for r in nudges])))),
             "views_model": _views(rows, "model_views"), "views_sim": _views(rows, "sim_views")}

    def fmt(value, spec=".1f"):
        return "—" if value is None else format(value, spec)

    tm, ts, vm, vs = table["turn_model"], table["turn_sim_pixels"], table["views_model"], table["views_sim"]
    text = "\n".join([
        f"Model `{model_path}`, {starts} starts x grasp/weak/nudge = {len(rows)} streams, {steps} steps open loop.",
        "",
        f"**Held or slipped** ({len(grasps)} grasps): agreement **{table['agreement']:.2f}** [{low:.2f}, {high:.2f}] "
        f"(Wilson 95 %); the scorer on the simulator's own last frames agrees with its state "
        f"{table['scorer_on_sim_frames_agreement']:.2f}.",
        "",
        "| simulator \\ model | held | not held |",
        "|---|---:|---:|",
        f"| held | {table['held_held']} | {table['held_dropped']} |",
        f"| slipped / not held | {table['slipped_held']} | {table['slipped_dropped']} |",
        "",
        "| stream | n | simulator held | model held |",
        "|---|---:|---:|---:|",
        *[f"| {k} | {v['n']} | {v['sim_held']} | {v['model_held']} |" for k, v in table["by_kind"].items()],
        "",
        f"**The turn when nudged** ({len(nudges)} nudges; the simulator's median |turn| "
        f"{table['true_turn_median_abs_deg']:.0f}°), read from the handle in the wrist frames before and after the push:",
        "",
        "| frames | turn read | median error (°) | Pearson r | right sign (of turns > 10°) |",
        "|---|---:|---:|---:|---:|",
        f"| model | {tm['read']} | {fmt(tm['median_error_deg'])} | {fmt(tm['pearson'], '.2f')} | {tm['right_sign']} / {tm['turned']} |",
        f"| simulator | {ts['read']} | {fmt(ts['median_error_deg'])} | {fmt(ts['pearson'], '.2f')} | {ts['right_sign']} / {ts['turned']} |",
        "",
        f"**Cross-view consistency** (every {PROBE_EVERY}th frame of every stream):",
        "",
        "| frames | probes | mug in both fixed views | front-side ray gap, median (mm) | p90 (mm) | wrist probes | wrist sees it | wrist offset, median (px) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *[f"| {who} | {v['probes']} | {v['both_views']:.2f} | {fmt(v['gap_median_mm'])} | {fmt(v['gap_p90_mm'])} | "
          f"{v['wrist_probes']} | {fmt(v['wrist_seen'], '.2f')} | {fmt(v['wrist_offset_median_px'])} |"
          for who, v in (("model", vm), ("simulator", vs))],
    ])
    return text, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mug")
    parser.add_argument("--starts", type=int, default=30)
    parser.add_argument("--steps", type=int, default=90)
    parser.add_argument("--batch", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text, table = report(args.model, args.starts, args.steps, args.batch)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("# Mug grasping: the model's outcome against the simulator's\n\n"
                            f"`python -m experiments.mug_outcomes --model {args.model} --starts {args.starts} "
                            f"--steps {args.steps}`\n\n{text}\n")
        args.out.with_suffix(".json").write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
