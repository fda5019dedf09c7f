"""Score world-model training recipes ("arms") of an equal-budget ablation on held-out episodes.

Per arm (the first --arm is the control):
  fidelity   T-mask IoU and PSNR at horizons 1, 10, 50, 199, open loop from each episode's
             first frame under its recorded actions, beside "repeat frame 0";
  gain       paired bootstrap interval of (arm - control) T-IoU at 50 and 199: the same
             resampled episodes for both sides;
  long       rigid-shape score of the T over --long-seeds rollouts of --long-steps steps,
             probed every 20 steps, and the fraction of probes that show a T;
  pose       block-pose error (position, angle) of the T fitted on model frames at h = 10, 50;
  guard      "the T moves when pushed": on episodes whose recorded T moved by h
             (IoU(truth_0, truth_h) < 0.8), IoU(model_h, truth_0) vs IoU(model_h, truth_h);
             an arm whose T stays nearer frame 0 than frame h is flagged "frozen".
Verdict: keep an arm only if its T-IoU@50 gain interval lies entirely above 0, its mean
long-rollout shape score is not below the control's lower interval bound, and it is not frozen.
Every mean comes with an episode-bootstrap 95% interval (2000 resamples, seed 0).

    python -m experiments.ablation_score --arm control=runs/abl_control/model \
        --arm recency=runs/abl_recency/model --data data/pusht_ablation.zarr --episodes 24 \
        --long-steps 2000 --long-seeds 3 --threads 1 --out experiments/results/ablations
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict

from pipeline.evaluation.stats import bootstrap_mean_interval
from pipeline.pusht.tee_fit import CANVAS
from pipeline.pusht.vision import T_AREA, PushTAnalyzer, estimate_block_pose
from schemas import SpecError
from schemas.errors import UserError
from sim_model.data.store import EpisodeStore
from sim_model.evaluate import (
    EpisodeVideo,
    FidelityReport,
    evaluate_fidelity,
    mask_iou,
    parse_horizons,
)
from sim_model.stability import run_stability
from sim_model.storage.atomic import write_text
from sim_model.world_model import WorldModel
from workers.actions.scripted import random_walk_actions

log = logging.getLogger("ablation_score")

HORIZONS = (1, 10, 50, 199)
PAIRED_HORIZONS = (50, 199)
VERDICT_HORIZON = 50
POSE_HORIZONS = (10, 50)
MOVED_IOU = 0.8  # the recorded T "moved" by h when IoU(truth_0, truth_h) is below this
MIN_MOVED = 8  # the frozen-T guard needs this many episodes whose recorded T moved
PROBE_EVERY = 20
RESAMPLES = 2000
# A probe "shows the T" when it finds T-coloured pixels covering half to twice the T's area
# (a melted or smeared T spreads past that; a vanished one falls under it).
T_VISIBLE_AREAS = (0.5, 2.0)

# (arm name, checkpoint) -> the model that arm is scored with
Loader = Callable[[str, str], WorldModel]


class Interval(BaseModel):
    """A mean with its 95% bootstrap interval over n independent units (episodes or rollouts)."""

    model_config = ConfigDict(extra="forbid")

    mean: float
    low: float
    high: float
    n: int


def bootstrap_interval(values: Sequence[float] | np.ndarray, resamples: int = RESAMPLES,
                       seed: int = 0) -> Interval:
    """Percentile bootstrap of the mean: the units are resampled with replacement."""
    data = np.asarray(values, dtype=np.float64)
    if data.ndim != 1 or data.size == 0:
        raise ValueError(f"a bootstrap needs a non-empty 1-D series, got shape {data.shape}")
    low, high = bootstrap_mean_interval(data, seed=seed, resamples=resamples)
    return Interval(mean=float(data.mean()), low=low, high=high, n=int(data.size))


def paired_bootstrap_interval(arm: Sequence[float] | np.ndarray, control: Sequence[float] | np.ndarray,
                              resamples: int = RESAMPLES, seed: int = 0) -> Interval:
    """Interval of mean(arm - control) resampling the same episodes on both sides, which is the
    bootstrap of the per-episode differences."""
    a, c = np.asarray(arm, dtype=np.float64), np.asarray(control, dtype=np.float64)
    if a.shape != c.shape:
        raise ValueError(f"paired series differ in length: {a.shape} vs {c.shape}")
    return bootstrap_interval(a - c, resamples, seed)


def _maybe_interval(values: Sequence[float]) -> Interval | None:
    return bootstrap_interval(values) if len(values) else None


class HorizonScore(BaseModel):
    model_config = ConfigDict(extra="forbid")

    horizon: int
    episodes: list[int]
    t_iou: Interval
    t_iou_repeat: Interval
    psnr: Interval
    psnr_repeat: Interval
    t_iou_values: list[float]
    gain_vs_control: Interval | None = None


class PoseScore(BaseModel):
    """Block-pose error at one horizon: position in gym-pusht canvas units (512 x 512), angle in
    degrees. `estimator_*` is the same fit on the recorded frame (the estimator's own error);
    `repeat_*` the error of assuming the T never moved."""

    model_config = ConfigDict(extra="forbid")

    horizon: int
    episodes: int
    skipped: int
    position: Interval | None
    angle_deg: Interval | None
    estimator_position: Interval | None
    estimator_angle_deg: Interval | None
    repeat_position: Interval
    repeat_angle_deg: Interval


class GuardScore(BaseModel):
    model_config = ConfigDict(extra="forbid")

    horizon: int
    moved: int
    iou_model_first: float | None
    iou_model_truth: float | None


class LongScore(BaseModel):
    """Long rollouts; `shape` is bootstrapped over rollouts (the independent unit), each one the
    mean rigid-shape score of its probes."""

    model_config = ConfigDict(extra="forbid")

    steps: int
    episodes: list[int]
    actions: str
    shape: Interval
    t_visible: float
    probes: int
    all_finite: bool


class ArmScore(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    checkpoint: str
    checkpoint_hash: str
    horizons: list[HorizonScore]
    pose: list[PoseScore]
    guard: list[GuardScore]
    frozen: bool
    long: LongScore
    verdict: str = ""
    seconds: dict[str, float]


class AblationReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    data: str
    episodes: list[int]
    seed: int
    resamples: int = RESAMPLES
    arms: list[ArmScore]


def parse_arm(text: str) -> tuple[str, str]:
    """'name=checkpoint' -> (name, checkpoint); a bare checkpoint is named after itself."""
    name, sep, path = text.partition("=")
    if not sep:
        return Path(text).name or text, text
    if not name or not path:
        raise SpecError(f"--arm {text!r}: give NAME=CHECKPOINT, e.g. control=runs/abl_control/model.")
    return name, path


def loop_actions(actions: np.ndarray, steps: int) -> np.ndarray:
    """(steps, A): the recorded actions forward, then backward, and so on (no jump where the
    stream wraps around, which would fling the agent across the table)."""
    cycle = np.concatenate([actions, actions[::-1]]) if len(actions) > 1 else actions
    return np.resize(cycle, (steps, actions.shape[1])).astype(np.float32)


def _episode_arrays(store: EpisodeStore, episode: int, keys: list[str]) -> dict[str, np.ndarray]:
    """The whole episode's arrays for `keys`."""
    first, stop = store.episode_range(episode)
    return store.window(episode, 0, stop - first, keys)


def long_rollouts(model: WorldModel, store: EpisodeStore, episodes: list[int], steps: int,
                  seeds: int, action_kind: str, seed: int) -> LongScore:
    """`seeds` rollouts of `steps` steps from the first frames of episodes spread over the list."""
    chosen = [episodes[j * len(episodes) // seeds] for j in range(seeds)]
    cams = list(store.features.camera_names)
    use_state = model.features.state_dim > 0 and store.features.state_dim == model.features.state_dim
    analyzer, h, w = PushTAnalyzer(), store.features.cameras[0].height, store.features.cameras[0].width
    t_pixels = T_AREA * h * w / CANVAS**2
    shape, visible, finite = [], [], True
    for j, episode in enumerate(chosen):
        data = _episode_arrays(store, episode, cams + ["action"] + (["state"] if use_state else []))
        state = data["state"][0] if use_state else None
        actions = (loop_actions(data["action"], steps) if action_kind == "recorded" else
                   random_walk_actions(model.features, steps, 0.05, seed + j, state))
        result = run_stability(model, np.stack([data[c][0] for c in cams]), actions, state=state,
                               seed=seed + j, analyzer=analyzer, probe_every=PROBE_EVERY,
                               init_ref=f"{store.path}#{episode}:0")
        series = result.report.series
        probed = [t for t, v in enumerate(series["rigid_shape"]) if v is not None]
        shape.append(float(np.mean([series["rigid_shape"][t] for t in probed])))
        lo, hi = T_VISIBLE_AREAS
        visible += [lo <= float(series["block_pixels"][t] or 0.0) / t_pixels <= hi for t in probed]
        finite &= result.report.all_finite
    return LongScore(steps=steps, episodes=chosen, actions=action_kind,
                     shape=bootstrap_interval(shape), t_visible=float(np.mean(visible)),
                     probes=len(visible), all_finite=finite)


def horizon_scores(report: FidelityReport) -> list[HorizonScore]:
    out = []
    for m in report.horizons:
        assert m.object_iou is not None  # evaluate_fidelity was given an analyzer
        iou = m.object_iou["model"].values
        out.append(HorizonScore(
            horizon=m.horizon, episodes=m.episodes, t_iou=bootstrap_interval(iou),
            t_iou_repeat=bootstrap_interval(m.object_iou["baseline"].values),
            psnr=bootstrap_interval(m.psnr["model"].values),
            psnr_repeat=bootstrap_interval(m.psnr["baseline"].values), t_iou_values=iou))
    return out


def add_gains(arm: list[HorizonScore], control: list[HorizonScore]) -> None:
    """Set gain_vs_control at PAIRED_HORIZONS, pairing episodes by store index."""
    base = {c.horizon: dict(zip(c.episodes, c.t_iou_values, strict=True)) for c in control}
    for score in arm:
        if score.horizon in PAIRED_HORIZONS and score.horizon in base:
            ctrl = [base[score.horizon][e] for e in score.episodes]
            score.gain_vs_control = paired_bootstrap_interval(score.t_iou_values, ctrl)


def angle_difference(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """|a - b| wrapped into [0, pi] (recorded angles are in [0, 2 pi), fitted ones in (-pi, pi])."""
    return np.abs((np.asarray(a) - np.asarray(b) + np.pi) % (2 * np.pi) - np.pi)


def _pose_errors(estimates: list[np.ndarray | None], truth: list[np.ndarray]) -> tuple[list[float], list[float]]:
    pairs = [(e, t) for e, t in zip(estimates, truth, strict=True) if e is not None]
    return ([float(np.hypot(*(e[:2] - t[:2]))) for e, t in pairs],
            [float(np.degrees(angle_difference(e[2], t[2]))) for e, t in pairs])


def pose_scores(videos: list[EpisodeVideo], store: EpisodeStore, horizons: Sequence[int]) -> list[PoseScore]:
    """Recorded block_pose and estimate_block_pose share gym-pusht's convention (canvas units,
    body origin at the crossbar's outer edge), so positions compare directly; only the angles'
    wrapping differs, which angle_difference absorbs."""
    poses = {v.episode: _episode_arrays(store, v.episode, ["block_pose"])["block_pose"].astype(np.float64)
             for v in videos}
    out = []
    for h in horizons:
        rows = [v for v in videos if len(v.model) > h]
        if not rows:
            continue
        truth = [poses[v.episode][h] for v in rows]
        model = [estimate_block_pose(v.model[h, 0]) for v in rows]
        position, angle = _pose_errors(model, truth)
        est_position, est_angle = _pose_errors([estimate_block_pose(v.truth[h, 0]) for v in rows], truth)
        rep_position, rep_angle = _pose_errors([poses[v.episode][0] for v in rows], truth)
        out.append(PoseScore(
            horizon=h, episodes=len(rows), skipped=len(rows) - len(position),
            position=_maybe_interval(position), angle_deg=_maybe_interval(angle),
            estimator_position=_maybe_interval(est_position),
            estimator_angle_deg=_maybe_interval(est_angle),
            repeat_position=bootstrap_interval(rep_position),
            repeat_angle_deg=bootstrap_interval(rep_angle)))
    return out


def guard_scores(videos: list[EpisodeVideo], horizons: Sequence[int]) -> list[GuardScore]:
    analyzer = PushTAnalyzer()
    first = {v.episode: analyzer.object_mask(v.truth[0, 0]) for v in videos}
    out = []
    for h in horizons:
        to_first, to_truth = [], []
        for v in (v for v in videos if len(v.model) > h):
            truth_h = analyzer.object_mask(v.truth[h, 0])
            if mask_iou(first[v.episode], truth_h) >= MOVED_IOU:
                continue
            model_h = analyzer.object_mask(v.model[h, 0])
            to_first.append(mask_iou(model_h, first[v.episode]))
            to_truth.append(mask_iou(model_h, truth_h))
        out.append(GuardScore(horizon=h, moved=len(to_first),
                              iou_model_first=float(np.mean(to_first)) if to_first else None,
                              iou_model_truth=float(np.mean(to_truth)) if to_truth else None))
    return out


def is_frozen(guard: list[GuardScore]) -> bool:
    """The model's T stays nearer frame 0 than the truth at h, at a horizon where enough
    recorded T's moved for the comparison to mean something (MIN_MOVED)."""
    return any(g.iou_model_first is not None and g.iou_model_truth is not None and g.moved >= MIN_MOVED
               and g.iou_model_first > g.iou_model_truth for g in guard)


def score_arm(name: str, checkpoint: str, store: EpisodeStore, episodes: list[int],
              args: argparse.Namespace, load: Loader) -> ArmScore:
    """Every measure but the paired gain and the verdict, which need the control."""
    model = load(name, checkpoint)
    clock = time.perf_counter()
    # Every episode's whole rollout comes back as a "video": the pose and guard checks need
    # model frames at their horizons (24 x 200 frames at 96 x 96 x 2 sides: ~270 MB).
    result = evaluate_fidelity(model, store, horizons=args.horizons, episodes=episodes,
                               batch_size=args.batch_size, seed=args.seed, analyzer=PushTAnalyzer(),
                               video_episodes=len(episodes))
    seconds = {"fidelity": time.perf_counter() - clock}
    clock = time.perf_counter()
    kept = [m.horizon for m in result.report.horizons]
    pose = pose_scores(result.videos, store, [h for h in POSE_HORIZONS if h in kept])
    guard = guard_scores(result.videos, [h for h in kept if h >= 10])
    seconds["analysis"] = time.perf_counter() - clock
    clock = time.perf_counter()
    long = long_rollouts(model, store, episodes, args.long_steps, args.long_seeds,
                         args.long_actions, args.seed)
    seconds["long"] = time.perf_counter() - clock
    log.info("%s: fidelity %.0f s, analysis %.0f s, long rollouts %.0f s", name, *seconds.values())
    return ArmScore(name=name, checkpoint=checkpoint, checkpoint_hash=model.checkpoint_hash,
                    horizons=horizon_scores(result.report), pose=pose, guard=guard,
                    frozen=is_frozen(guard), long=long, seconds=seconds)


def verdict(arm: ArmScore, control: ArmScore) -> str:
    if arm is control:
        return "control (frozen T!)" if arm.frozen else "control"
    reasons = []
    gain = next((h.gain_vs_control for h in arm.horizons if h.horizon == VERDICT_HORIZON), None)
    if gain is None:
        reasons.append(f"no T-IoU@{VERDICT_HORIZON}")
    elif gain.low <= 0:
        reasons.append(f"T-IoU@{VERDICT_HORIZON} gain interval reaches {gain.low:+.3f}")
    if arm.long.shape.mean < control.long.shape.low:
        reasons.append(f"long shape {arm.long.shape.mean:.3f} < control's {control.long.shape.low:.3f}")
    if arm.frozen:
        reasons.append("frozen T")
    return "keep" if not reasons else "drop: " + "; ".join(reasons)


def _ci(x: Interval | None, digits: int = 3, sign: str = "") -> str:
    if x is None:
        return "-"
    return f"{x.mean:{sign}.{digits}f} [{x.low:{sign}.{digits}f}, {x.high:{sign}.{digits}f}]"


def _at(arm: ArmScore, h: int) -> HorizonScore | None:
    return next((s for s in arm.horizons if s.horizon == h), None)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def verdict_table(report: AblationReport) -> str:
    rows = []
    for arm in report.arms:
        cells = [arm.name]
        for h in PAIRED_HORIZONS:
            score = _at(arm, h)
            cells += [_ci(score.t_iou) if score else "-",
                      _ci(score.gain_vs_control, sign="+") if score else "-"]
        cells += [_ci(arm.long.shape), f"{arm.long.t_visible:.2f}", "yes" if arm.frozen else "no",
                  arm.verdict]
        rows.append(cells)
    header = ["arm"] + [x for h in PAIRED_HORIZONS for x in (f"T-IoU@{h}", f"Δ vs control @{h}")]
    return _table(header + ["long shape", "T visible", "frozen", "verdict"], rows)


def detail_tables(report: AblationReport) -> str:
    fidelity, pose, guard = [], [], []
    for arm in report.arms:
        for s in arm.horizons:
            fidelity.append([arm.name, str(s.horizon), str(s.t_iou.n), _ci(s.t_iou), _ci(s.t_iou_repeat),
                             _ci(s.psnr, 1), _ci(s.psnr_repeat, 1)])
        for p in arm.pose:
            pose.append([arm.name, str(p.horizon), f"{p.skipped}/{p.episodes}", _ci(p.position, 1),
                         _ci(p.angle_deg, 1), _ci(p.estimator_position, 1),
                         _ci(p.estimator_angle_deg, 1), _ci(p.repeat_position, 1),
                         _ci(p.repeat_angle_deg, 1)])
        for g in arm.guard:
            guard.append([arm.name, str(g.horizon), str(g.moved),
                          "-" if g.iou_model_first is None else f"{g.iou_model_first:.3f}",
                          "-" if g.iou_model_truth is None else f"{g.iou_model_truth:.3f}"])
    return "\n\n".join([
        "### Fidelity (open loop from frame 0; repeat = frame 0 repeated)",
        _table(["arm", "h", "n", "T-IoU", "T-IoU repeat", "PSNR dB", "PSNR repeat"], fidelity),
        "### Block pose error (position in 512-canvas px, angle in degrees; skipped: no T found)",
        _table(["arm", "h", "skipped", "position", "angle", "position (fit on truth)",
                "angle (fit on truth)", "position repeat", "angle repeat"], pose),
        f"### T moves when pushed (episodes whose recorded T moved: IoU(truth_0, truth_h) < {MOVED_IOU})",
        _table(["arm", "h", "moved", "IoU(model_h, truth_0)", "IoU(model_h, truth_h)"], guard)])


def markdown(report: AblationReport) -> str:
    long = report.arms[0].long
    head = (f"# Ablation scores\n\ndata {report.data}, {len(report.episodes)} held-out episodes, "
            f"control **{report.arms[0].name}**; mean [95% episode-bootstrap interval, "
            f"{report.resamples} resamples]; Δ: paired (arm - control) on the same episodes; long "
            f"shape: {len(long.episodes)} rollout(s) x {long.steps} steps ({long.actions} actions), "
            f"probed every {PROBE_EVERY}, interval over rollouts.\n\n")
    return head + verdict_table(report) + "\n\n" + detail_tables(report) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arm", action="append", required=True, metavar="NAME=CHECKPOINT",
                        help="an arm's checkpoint directory or bundled name; the first is the control")
    parser.add_argument("--data", required=True, help="Zarr episode store of held-out episodes with block_pose")
    parser.add_argument("--episodes", type=int, default=24, help="score the first N episodes")
    parser.add_argument("--horizons", default=",".join(map(str, HORIZONS)), help="comma-separated steps")
    parser.add_argument("--long-steps", type=int, default=2000)
    parser.add_argument("--long-seeds", type=int, default=3, help="long rollouts (episodes/seeds)")
    parser.add_argument("--long-actions", choices=["recorded", "random_walk"], default="recorded",
                        help="recorded: the episode's actions looped forward and back; random_walk: "
                        "`iws eval stability`'s stream")
    parser.add_argument("--batch-size", type=int, default=8, help="episodes rolled together")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--control", help="name of the control arm (default: the first --arm)")
    parser.add_argument("--reuse", metavar="JSON", action="append", default=[],
                        help="an earlier OUT.json on the same data and episodes (repeatable): its arms "
                        "of the same name and checkpoint hash are not scored again")
    parser.add_argument("--out", required=True, help="writes OUT.md and OUT.json")
    args = parser.parse_args(argv)
    args.horizons = parse_horizons(args.horizons)
    for flag in ("episodes", "long_steps", "long_seeds", "batch_size"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        args = parse_args(argv)
        if args.threads:
            torch.set_num_threads(args.threads)
        report = score_ablation(args)
    except (SpecError, UserError) as error:
        log.error("%s", error)
        return 2
    write_report(report, args.out)
    return 0


def write_report(report: AblationReport, out: str) -> None:
    """OUT.md and OUT.json; the table is also printed."""
    text = markdown(report)
    write_text(f"{out}.md", text)
    write_text(f"{out}.json", report.model_dump_json(indent=2))
    print(text)


def score_ablation(args: argparse.Namespace, load: Loader | None = None) -> AblationReport:
    """`load` builds each arm's model (default: its checkpoint as saved); an arm reused from
    --reuse must have the same name and the same weights."""
    load = load or (lambda name, path: WorldModel.load(path, device=args.device))
    arms = [parse_arm(a) for a in args.arm]
    if len({n for n, _ in arms}) != len(arms):
        raise SpecError(f"--arm names must be unique, got {[n for n, _ in arms]}.")
    store = EpisodeStore.open(args.data, "r")
    if "block_pose" not in store.keys:
        raise SpecError(f"{args.data} has no block_pose; score on a store from `iws collect pusht`.")
    if args.episodes > len(store):
        log.warning("--episodes %d but the store has %d; scoring all", args.episodes, len(store))
    episodes = list(range(min(args.episodes, len(store))))
    earlier = {name: arm for path in args.reuse
               for name, arm in reusable_arms(path, args.data, episodes, args.seed).items()}
    scores = [reuse_or_score(earlier.get(name), name, path, store, episodes, args, load)
              for name, path in arms]
    names = [a.name for a in scores]
    control_name = args.control or names[0]
    if control_name not in names:
        raise SpecError(f"--control {control_name} is not one of the arms {names}.")
    scores.sort(key=lambda a: a.name != control_name)  # the control first, the rest in order
    for arm in scores:
        for h in arm.horizons:
            h.gain_vs_control = None
    for arm in scores[1:]:
        add_gains(arm.horizons, scores[0].horizons)
    for arm in scores:
        arm.verdict = verdict(arm, scores[0])
    return AblationReport(data=args.data, episodes=episodes, seed=args.seed, arms=scores)


def reusable_arms(path: str, data: str, episodes: list[int], seed: int) -> dict[str, ArmScore]:
    """Arms of an earlier report scored on the same data, episodes and seed, by name."""
    try:
        report = AblationReport.model_validate_json(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise SpecError(f"--reuse {path} cannot be read as an ablation report ({error}).") from None
    if (report.data, report.episodes, report.seed) != (data, episodes, seed):
        raise SpecError(f"--reuse {path} was scored on {report.data}, episodes {report.episodes[:3]}..., "
                        f"seed {report.seed}; score on the same data, --episodes and --seed.")
    return {arm.name: arm for arm in report.arms}


def reuse_or_score(earlier: ArmScore | None, name: str, path: str, store: EpisodeStore,
                   episodes: list[int], args: argparse.Namespace, load: Loader) -> ArmScore:
    if earlier is not None and earlier.checkpoint_hash == WorldModel.load(path).checkpoint_hash:
        log.info("%s: reusing its earlier scores (same checkpoint %s)", name, earlier.checkpoint_hash)
        earlier.frozen = is_frozen(earlier.guard)
        return earlier
    return score_arm(name, path, store, episodes, args, load)


if __name__ == "__main__":
    raise SystemExit(main())
