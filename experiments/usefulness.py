"""Are world-model demonstrations as useful as real ones? (the paper's 0%-real-data claim)

1. real: the pixel-based demonstrator (pipeline/pusht/demonstrator.py, the stand-in for the
   paper's teleoperator) runs in gym-pusht from its seeded initial states; successful episodes
   (gym-pusht coverage > 0.95), cut at their first success, are kept until there are N.
2. synthetic: the same demonstrator runs inside the world model from the same initial frames
   (the first frames of the real demos; a start is reused with a new seed when more attempts are
   needed); episodes the pixel scorer calls a success, cut the same way, are kept until there
   are N (or the attempts run out).
   As a control, the first N attempts also go, kept or not, to an unfiltered store; with
   --plausibility-min, the first N attempts that pass the per-episode plausibility check (the
   T rigid and in view at every probe, `filter.plausibility` of generation jobs) go to a third,
   success or not: the check's worth at equal counts.
3. Each set is exported as a user would train on it (`iws export lerobot`, the camera under
   `observation.image` as in docs/lerobot.md), and the same small image-based BC policy
   (experiments/bc_policy.py) is trained on each export, read with lerobot's `LeRobotDataset`,
   with the same steps and seed.
4. Both policies run in gym-pusht from the same >= 50 held-out initial states (seeds disjoint
   from the demos'); the table reports mean best coverage, mean final coverage and success rate
   with 95% intervals, and the synthetic/real ratios (the paper's claim: near 1).

Every stage writes its result into --work and is skipped when rerun, so a killed run resumes.

    python -m experiments.usefulness --model pusht --demos 40 --eval-episodes 50 \
        --work runs/usefulness --results experiments/results
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np

from experiments.bc_policy import BCPolicy, train
from pipeline.evaluation.policy import roll_world_model
from pipeline.evaluation.stats import bootstrap_mean_interval, wilson_interval
from pipeline.pusht.demonstrator import PushTDemonstrator
from pipeline.pusht.env import wrapped_pose
from pipeline.pusht.features import pusht_features
from pipeline.pusht.scorer import coverage_trace, plausibility
from pipeline.pusht.truth import roll_pusht, seeded_states
from schemas import EpisodeMeta, EpisodeSpec
from sim_model.data.episode import Episode
from sim_model.data.formats.lerobot_writer import export_lerobot
from sim_model.data.store import EpisodeStore
from sim_model.world_model import WorldModel

log = logging.getLogger("usefulness")

TASK = "Push the T-shaped block onto the T-shaped target."
DEMO_SEED0 = 0  # gym-pusht reset seeds of demo attempts: DEMO_SEED0, DEMO_SEED0 + 1, ...
EVAL_SEED0 = 100_000  # gym-pusht reset seeds of the evaluation episodes, disjoint from the demos'
CHUNK = 10  # episodes stepped together


def specs_for(name: str, seeds: list[int], refs: list[str], horizon: int) -> list[EpisodeSpec]:
    return [EpisodeSpec(job_id=name, index=i, episode_id=f"{name}-{i:06d}", seed=s, init_ref=r,
                        action_source="demonstrator", horizon=horizon + 1)
            for i, (s, r) in enumerate(zip(seeds, refs, strict=True))]


def collect_real(path: Path, n: int, attempts: int, horizon: int) -> EpisodeStore:
    """Demonstrator episodes in gym-pusht, kept when they succeed, cut at the first success."""
    store = (EpisodeStore.open(path, "a") if path.exists()
             else EpisodeStore.create(path, pusht_features(96)))
    tried = {int(store.meta(i).seed or 0) for i in range(len(store))}
    done_file = path.parent / "real_attempts.json"
    tried |= set(json.loads(done_file.read_text())) if done_file.exists() else set()
    seed = DEMO_SEED0
    while len(store) < n and seed < DEMO_SEED0 + attempts:
        seeds = [s for s in range(seed, min(seed + CHUNK, DEMO_SEED0 + attempts)) if s not in tried]
        seed += CHUNK
        if not seeds:
            continue
        specs = specs_for("real", seeds, [f"gym-pusht:seed={s}" for s in seeds], horizon)
        result = roll_pusht(PushTDemonstrator(pusht_features(96)), specs, seeded_states(seeds), horizon,
                            96, keep_frames=range(len(seeds)))
        for row, s in enumerate(seeds):
            hits = np.flatnonzero(result.coverage[row] > 0.95)
            if hits.size and len(store) < n:
                end = int(hits[0]) + 1
                meta = EpisodeMeta(episode_id=f"real-seed{s}", length=end, task=TASK,
                                   source="policy:demonstrator", seed=s, fps=10.0,
                                   info={"env": "gym-pusht"})
                store.append(Episode(frames={"top": result.frames[row][:end]},
                                     action=result.actions[row, :end], meta=meta,
                                     state=result.agent[row, :end],
                                     extras={"block_pose": np.stack([wrapped_pose(p) for p in
                                                                     result.block_pose[row, :end]]),
                                             "coverage": result.coverage[row, :end].astype(np.float32),
                                             "success": result.coverage[row, :end] > 0.95}))
        tried |= set(seeds)
        done_file.write_text(json.dumps(sorted(tried)))
        log.info("real: %d kept after %d attempts", len(store), len(tried))
    return store


def collect_synthetic(path: Path, unfiltered_path: Path, model: WorldModel, real: EpisodeStore, n: int,
                      attempts: int, horizon: int, plausible_path: Path | None = None,
                      plausibility_min: float = 0.75) -> tuple[EpisodeStore, EpisodeStore, int]:
    """Demonstrator episodes inside the world model from the real demos' first frames, kept when
    the pixel scorer says success, cut at the first success. The first n attempts also go, kept
    or not (cut at a success, else whole), to the unfiltered store: the control that shows what
    the filter does. With `plausible_path`, the first n attempts whose plausibility (PushT's
    per-episode check, the one `filter.plausibility` applies in generation jobs) reaches
    `plausibility_min` go to that store, success or not: the same count as the control, so the
    two differ only in the check. Every attempt's plausibility is in its info. Returns the
    success-filtered and unfiltered stores and the attempts used."""
    features = model.features.model_copy(update={"extras": ()})

    def open_store(where: Path) -> EpisodeStore:
        return EpisodeStore.open(where, "a") if where.exists() else EpisodeStore.create(where, features)

    store, unfiltered = open_store(path), open_store(unfiltered_path)
    plausible = None if plausible_path is None else open_store(plausible_path)
    state_file = path.parent / "synthetic_attempts.json"
    used = json.loads(state_file.read_text())["attempts"] if state_file.exists() else 0
    starts = [f"{real.path}#{i}:0" for i in range(len(real))]
    while ((len(store) < n or len(unfiltered) < n or (plausible is not None and len(plausible) < n))
           and used < attempts):
        index = list(range(used, min(used + CHUNK, attempts)))
        specs = specs_for("synthetic", [10_000 + i for i in index],
                          [starts[i % len(starts)] for i in index], horizon)
        started = time.perf_counter()
        rollout = roll_world_model(model, PushTDemonstrator(model.features), specs)
        for row, (attempt, spec) in enumerate(zip(index, specs, strict=True)):
            first = coverage_trace(rollout.frames[row, :, 0], stride=2).first_success
            end = horizon + 1 if first is None else first + 1
            meta = EpisodeMeta(episode_id=f"synthetic-{attempt:04d}", length=end, task=TASK,
                               source="policy:demonstrator", seed=spec.seed,
                               model_hash=model.checkpoint_hash, fps=10.0,
                               info={"init": spec.init_ref, "success": first is not None})
            state = None if rollout.state is None else rollout.state[row, :end]
            episode = Episode(frames={"top": rollout.frames[row, :end, 0]},
                              action=rollout.actions[row, :end], meta=meta, state=state)
            checks = plausibility(episode)
            episode.meta = meta.model_copy(update={"info": {**meta.info, **checks}})
            if first is not None and len(store) < n:
                store.append(episode)
            if len(unfiltered) < n:
                unfiltered.append(episode)
            if plausible is not None and checks["plausibility"] >= plausibility_min and len(plausible) < n:
                plausible.append(episode)
        used = index[-1] + 1
        state_file.write_text(json.dumps({"attempts": used}))
        log.info("synthetic: %d kept after %d attempts (%.0f s for %d)", len(store), used,
                 time.perf_counter() - started, len(specs))
    return store, unfiltered, used


def evaluate(policy_dir: Path, episodes: int, horizon: int) -> dict:
    """The BC policy in gym-pusht from seeds EVAL_SEED0 ...: per-episode best and final coverage."""
    seeds = list(range(EVAL_SEED0, EVAL_SEED0 + episodes))
    best, final = [], []
    for start in range(0, episodes, 25):
        chunk = seeds[start:start + 25]
        specs = specs_for("eval", chunk, [f"gym-pusht:seed={s}" for s in chunk], horizon)
        result = roll_pusht(BCPolicy(policy_dir), specs, seeded_states(chunk), horizon, 96)
        best += result.best.tolist()
        final += result.final.tolist()
    return {"policy": str(policy_dir), "seeds": seeds, "best": best, "final": final}


def summary(rows: dict) -> dict:
    best, final = np.array(rows["best"]), np.array(rows["final"])
    k = int((best > 0.95).sum())
    return {"episodes": len(best), "mean_best": float(best.mean()),
            "mean_best_ci": bootstrap_mean_interval(best), "mean_final": float(final.mean()),
            "mean_final_ci": bootstrap_mean_interval(final), "success": k / len(best),
            "success_ci": wilson_interval(k, len(best))}


ROWS = {"real": ("gym-pusht (real)", "real_demos"),
        "synthetic": ("world model, kept on scored success (synthetic)", "synthetic_demos"),
        "unfiltered": ("world model, every attempt (control, no filter)", "unfiltered_demos"),
        "plausible": ("world model, attempts that pass the plausibility check (no success filter)",
                      "plausible_demos")}


def write_results(results: Path, meta: dict, scores: dict[str, dict]) -> str:
    real = scores["real"]

    def ratio(s: dict, key: str) -> str:
        return "n/a" if real[key] == 0 else f"{s[key] / real[key]:.2f}"

    def row(name: str, s: dict, demos: int) -> str:
        return (f"| {name} | {demos} | {s['mean_best']:.3f} [{s['mean_best_ci'][0]:.3f}, "
                f"{s['mean_best_ci'][1]:.3f}] | {s['mean_final']:.3f} [{s['mean_final_ci'][0]:.3f}, "
                f"{s['mean_final_ci'][1]:.3f}] | {s['success']:.2f} [{s['success_ci'][0]:.2f}, "
                f"{s['success_ci'][1]:.2f}] | {ratio(s, 'mean_best')} | {ratio(s, 'success')} |")

    lines = ["| training data | demos | mean best coverage (95% CI) | mean final coverage (95% CI) | "
             "success rate (95% Wilson) | coverage ratio to real | success ratio to real |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for key, (label, count) in ROWS.items():
        if count not in meta:
            continue  # a side this run did not collect (plausible: without --plausibility-min)
        if key in scores:
            lines.append(row(label, scores[key], meta[count]))
        else:
            lines.append(f"| {label} | {meta[count]} | no policy: no demonstration passed the filter in "
                         f"{meta['synthetic_attempts']} attempts | | | 0 | 0 |")
    table = "\n".join(lines)
    results.mkdir(parents=True, exist_ok=True)
    (results / "usefulness.json").write_text(json.dumps({**meta, **scores}, indent=2))
    (results / "usefulness.md").write_text(
        "# Usefulness: BC on real vs world-model demonstrations (`experiments/usefulness.py`)\n\n"
        f"{table}\n\nSetup: {json.dumps(meta)}\n")
    _plot(results / "usefulness.png", scores)
    return table


def _plot(path: Path, scores: dict[str, dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.4))
    keys = [("mean_best", "mean best coverage"), ("mean_final", "mean final coverage"),
            ("success", "success rate")]
    x = np.arange(len(keys))
    width = 0.8 / len(scores)
    for i, (name, s) in enumerate(scores.items()):
        values = [s[k] for k, _ in keys]
        low = [s[k] - s[f"{k}_ci"][0] for k, _ in keys]
        high = [s[f"{k}_ci"][1] - s[k] for k, _ in keys]
        ax.bar(x + (i - (len(scores) - 1) / 2) * width, values, width, yerr=[low, high], capsize=3,
               label=f"trained on {name}")
    ax.set_xticks(x, [label for _, label in keys])
    ax.set_ylim(0, 1)
    ax.set_title("BC policy in gym-pusht: real vs world-model demonstrations")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="pusht", help="world-model checkpoint (default: bundled)")
    parser.add_argument("--demos", type=int, default=40, help="N demonstrations per side")
    parser.add_argument("--real-attempts", type=int, default=80)
    parser.add_argument("--synthetic-attempts", type=int, default=120)
    parser.add_argument("--horizon", type=int, default=300, help="steps per demo attempt")
    parser.add_argument("--policy-steps", type=int, default=3000)
    parser.add_argument("--save-at", default="500,1500", help="extra BC checkpoints (for ranking)")
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--work", type=Path, default=Path("runs/usefulness"))
    parser.add_argument("--results", type=Path, default=Path("experiments/results"))
    parser.add_argument("--plausibility-min", type=float, metavar="MIN",
                        help="also train on the first N attempts whose PushT plausibility check "
                        "reaches MIN (e.g. 0.75, the README job's flag), success or not, against the "
                        "unfiltered first N")
    parser.add_argument("--stop-after", choices=["real", "synthetic", "train"], default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    import torch

    torch.set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    real = collect_real(args.work / "real.zarr", args.demos, args.real_attempts, args.horizon)
    policies = {}
    steps = sorted({int(s) for s in args.save_at.split(",") if s} | {args.policy_steps})
    policies["real"] = _trained(real, args.work / "bc_real", args.policy_steps, steps)
    if args.stop_after == "real":
        return
    model = WorldModel.load(args.model)
    plausible_path = None if args.plausibility_min is None else args.work / "synthetic_plausible.zarr"
    synthetic, unfiltered, used = collect_synthetic(
        args.work / "synthetic.zarr", args.work / "synthetic_unfiltered.zarr", model, real, args.demos,
        args.synthetic_attempts, args.horizon, plausible_path,
        0.0 if args.plausibility_min is None else args.plausibility_min)
    plausible = None if plausible_path is None else EpisodeStore.open(plausible_path)
    if args.stop_after == "synthetic":
        return
    if len(synthetic) == 0:
        log.warning("no synthetic demonstration succeeded in %d attempts: the filtered side has no "
                    "data to train on", used)
    else:
        policies["synthetic"] = _trained(synthetic, args.work / "bc_synthetic", args.policy_steps,
                                         steps)
    policies["unfiltered"] = _trained(unfiltered, args.work / "bc_synthetic_unfiltered",
                                      args.policy_steps, steps)
    if plausible is not None and len(plausible):
        policies["plausible"] = _trained(plausible, args.work / "bc_synthetic_plausible",
                                         args.policy_steps, steps)
    if args.stop_after == "train":
        return
    scores = {}
    for name, directory in policies.items():
        cached = args.work / f"eval_{name}.json"
        if not cached.exists():
            cached.write_text(json.dumps(evaluate(directory, args.eval_episodes, 300)))
        scores[name] = summary(json.loads(cached.read_text()))
    meta = {"model": args.model, "model_hash": model.checkpoint_hash, "real_demos": len(real),
            "real_attempts": len(json.loads((args.work / "real_attempts.json").read_text())),
            "synthetic_demos": len(synthetic), "synthetic_attempts": used,
            "unfiltered_demos": len(unfiltered), "real_frames": real.n_frames,
            "synthetic_frames": synthetic.n_frames, "unfiltered_frames": unfiltered.n_frames,
            **({} if plausible is None else {"plausible_demos": len(plausible),
                                             "plausibility_min": args.plausibility_min,
                                             "plausible_frames": plausible.n_frames}),
            "policy_steps": args.policy_steps, "eval_episodes": args.eval_episodes,
            "eval_seeds": f"{EVAL_SEED0}..{EVAL_SEED0 + args.eval_episodes - 1}", "eval_horizon": 300}
    print(write_results(args.results, meta, scores))


def exported(store: EpisodeStore, dest: Path) -> Path:
    """The LeRobot copy of `store` a user would train on, camera under gym-pusht's
    `observation.image`; made again when the store has grown since (a resumed collection)."""
    if dest.exists():
        from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

        if LeRobotDatasetMetadata(f"iws/{dest.name}", root=dest).total_episodes == len(store):
            return dest
    camera = store.features.camera_names[0]
    return Path(export_lerobot(store, dest, repo_id=f"iws/{dest.name}", overwrite=True,
                               camera_keys={camera: "observation.image"}))


def _trained(store: EpisodeStore, out: Path, steps: int, save_at: list[int]) -> Path:
    """The BC policy trained for `steps` on the LeRobot export of `store` (OUT_lerobot beside it)."""
    final = out / f"step-{steps}"
    if not (final / "policy.json").exists():
        data = exported(store, Path(store.path).with_name(f"{Path(store.path).stem}_lerobot"))
        train(str(data), out, steps, save_at)
    return final


if __name__ == "__main__":
    main()
