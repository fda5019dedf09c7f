"""`iws eval <evaluation>`: measure a world model against recorded data (USAGE below).

Each evaluation is one `_register_<name>` function below (parser + `func`) and a `run_<name>`
that checks the arguments, calls the library (sim_model.evaluate, sim_model.stability,
pipeline.evaluation) and writes what it returns. Task-specific choices (`--object-mask TASK`,
`--ground-truth TASK`, the default `--scorer`) come from pipeline.tasks.registry.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from pipeline.commands.paths import import_from_working_dir
from schemas.errors import SpecError, UserError

log = logging.getLogger("iws.eval")
USAGE = """Measure a world model against recorded data.

  iws eval fidelity  --model CKPT --data STORE [--horizons 1,10,50,200] --out DIR
  iws eval stability --model CKPT --init STORE[#EP:FRAME] --steps 6000 --out DIR
  iws eval policy    --model CKPT --policy (DIR | module:function) --init DATASET --episodes N
                     [--horizon T] [--batch-size B] [--out DIR] [--ground-truth TASK] [--seed S]
  iws eval ranking   --model CKPT --policy [FAMILY=](DIR | GLOB | module:function) ... --init DATASET
                     --ground-truth TASK [--episodes N] [--horizon T] [--score-every K] --out DIR

`iws eval EVALUATION --help` describes each."""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("eval", help="evaluate a world model (fidelity, stability, policy, ranking)",
                            description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter)
    evaluations = parser.add_subparsers(dest="evaluation", required=True)
    for register_evaluation in EVALUATIONS:
        register_evaluation(evaluations)


def _model_help() -> str:
    from pipeline.tasks.registry import TASKS

    names = ", ".join(repr(t.bundled_model) for t in TASKS.values() if t.bundled_model)
    return f"checkpoint directory or bundled name ({names})"


def _common(parser: argparse.ArgumentParser) -> None:
    from pipeline.tasks.registry import TASKS

    parser.add_argument("--model", required=True, help=_model_help())
    parser.add_argument("--out", required=True, help="directory for the report, plots and videos")
    parser.add_argument("--object-mask", choices=["none", *TASKS], default="none",
                        help="a task's object checks: object-mask IoU and the object's rigid-shape "
                        "score (and, for stability, its health probes), e.g. 'pusht': the T-mask "
                        "and agent visibility")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16"], default=None,
                        help="inference precision (default: the checkpoint's setting)")
    parser.add_argument("--seed", type=int, default=0, help="noise seed (row seed = seed + episode)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _register_fidelity(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "fidelity", help="PSNR/SSIM per horizon against recorded episodes, beside repeat-last-frame",
        description="Roll the model from frame --start of recorded episodes under their recorded "
        "actions (action t produces frame t+1) and compare with the recorded frames. Use episodes "
        "the model was not trained on. Writes metrics.json, fidelity.png and rollouts.gif to --out.")
    _common(parser)
    parser.add_argument("--data", required=True, help="Zarr episode store of held-out episodes")
    parser.add_argument("--horizons", default="1,10,50,200", help="comma-separated step counts")
    parser.add_argument("--episodes", type=int, help="evaluate the first N episodes (default all)")
    parser.add_argument("--start", type=int, default=0, help="frame each rollout starts from")
    parser.add_argument("--context-frames", type=int, default=1,
                        help="real frames (ending at --start) that seed the model's window")
    parser.add_argument("--batch-size", type=int, default=8, help="episodes rolled together")
    parser.add_argument("--videos", type=int, default=4, help="episodes in the side-by-side video")
    parser.add_argument("--video-format", choices=["gif", "mp4"], default="gif")
    parser.set_defaults(func=run_fidelity)


def _register_stability(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "stability", help="roll thousands of steps from one real frame and track frame health",
        description="Roll the model for --steps under a seeded smooth random walk through the "
        "action range, recording per step whether outputs stay finite, frame intensity and "
        "contrast, and with --object-mask TASK the task's probes (pusht: agent visibility and the "
        "T's rigid-shape score). "
        "Writes stability.json, stability.png and stability_frames.png to --out.")
    _common(parser)
    parser.add_argument("--init", required=True,
                        help="initial frame: STORE (episode 0, frame 0), STORE#EPISODE:FRAME, or an image")
    parser.add_argument("--steps", type=int, default=6000, help="rollout length (6000 = 10 min at 10 Hz)")
    parser.add_argument("--actions", choices=["random_walk"], default="random_walk",
                        help="action stream (a seeded smooth random walk within the action range)")
    parser.add_argument("--speed", type=float, default=0.05,
                        help="typical step of the walk as a fraction of the action range")
    parser.add_argument("--probe-every", type=int, default=1,
                        help="run the object probes every N steps (they cost ~20 ms a frame)")
    parser.set_defaults(func=run_stability)


def _register_policy(sub: argparse._SubParsersAction) -> None:
    from pipeline.tasks.registry import TASKS, default_task

    default = default_task()
    parser = sub.add_parser(
        "policy", help="score a policy closed loop inside the world model (and in a task's ground truth)",
        description="Roll --episodes episodes of --horizon steps from the init dataset's frames, the "
        "policy acting on every generated frame (batched across episodes), score each episode with "
        "--scorer and report mean score and success rate with 95% intervals (bootstrap, Wilson). "
        "--ground-truth TASK runs the same policy from the same initial states in the task's own "
        "environment (pusht: gym-pusht) and reports both, paired per episode. Writes metrics.json "
        "and rollouts.gif|mp4 to --out.")
    parser.add_argument("--model", required=True, help=_model_help())
    parser.add_argument("--policy", required=True, help="LeRobot pretrained-policy directory, or "
                        "'package.module:function' (or class) mapping (step, observation) -> (B, A), "
                        f"e.g. {default.demonstrator}")
    parser.add_argument("--init", required=True, help="Zarr episode store or LeRobot dataset; episode "
                        "i starts from frame --init-frame of its episode i (round-robin)")
    parser.add_argument("--init-frame", type=int, default=0, help="frame of each init episode (default 0)")
    parser.add_argument("--episodes", type=int, default=50, help="episodes to roll (default 50)")
    parser.add_argument("--horizon", type=int, default=300, help="policy steps per episode (default "
                        "300, gym-pusht's limit)")
    parser.add_argument("--batch-size", type=int, default=8, help="episodes rolled together")
    parser.add_argument("--out", default="runs/eval-policy", help="report directory")
    parser.add_argument("--ground-truth", choices=list(TASKS), help="also run the policy in the "
                        "task's environment (pusht: gym-pusht; --init must be a Zarr store with state "
                        "and block_pose, e.g. from `iws collect pusht`)")
    parser.add_argument("--scorer", default=default.scorer_name,
                        help="a task's scorer name (or the task's name), or 'package.module:function' "
                        f"(default {default.scorer_name})")
    parser.add_argument("--videos", type=int, default=4, help="episodes shown in the video (0: none)")
    parser.add_argument("--video-format", choices=["gif", "mp4"], default="gif")
    parser.add_argument("--seed", type=int, default=0, help="seed of the episodes' seeds")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16"], default=None,
                        help="inference precision (default: the checkpoint's setting)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_policy)


def _register_ranking(sub: argparse._SubParsersAction) -> None:
    from pipeline.tasks.registry import TASKS

    parser = sub.add_parser(
        "ranking", help="rank policies in the world model against the task's real environment",
        description="Evaluate every --policy from the same --episodes initial states in the world "
        "model and in the --ground-truth task's environment (as `iws eval policy --ground-truth` "
        "does, each policy through its own pre/post-processors), then report how well the model "
        "ranks them: Pearson r, Spearman rho, Kendall tau, MMRV, the line of in-model on real score "
        "and the checkpoint-selection regret, over all policies and per family, each with a 95% "
        "bootstrap interval over the starts. Writes ranking.json, ranking.md, ranking.png, scores.json "
        "(every start's scores) and policies/<name>.json to --out; per-policy scores are cached in --work, so a rerun (another "
        "checkpoint, more policies, a killed run) rolls only what is new.")
    parser.add_argument("--model", required=True, help=_model_help())
    parser.add_argument("--policy", action="append", required=True, metavar="[FAMILY=]REF",
                        help="a policy (repeat, at least 3 in all): a LeRobot checkpoint directory "
                        "(its family: the policy type in its config.json), a glob of them, e.g. "
                        "'runs/zoo/act/checkpoints/*/pretrained_model', or 'package.module:function' "
                        "(family 'scripted'); FAMILY= names the family")
    parser.add_argument("--init", required=True, help="Zarr episode store of held-out starts (for the "
                        "ground truth: with the task's state, e.g. from `iws collect pusht`)")
    parser.add_argument("--init-frame", type=int, default=0, help="frame of each init episode (default 0)")
    parser.add_argument("--ground-truth", required=True, choices=list(TASKS),
                        help="the task whose environment gives the real scores (pusht: gym-pusht)")
    parser.add_argument("--episodes", type=int, default=16, help="starts per policy (default 16)")
    parser.add_argument("--horizon", type=int, default=200, help="policy steps per episode (default 200)")
    parser.add_argument("--batch-size", type=int, default=16, help="episodes rolled together")
    parser.add_argument("--scorer", help="in-model scorer (default: the --ground-truth task's)")
    parser.add_argument("--also-score", action="append", default=[], metavar="SCORER",
                        help="another in-model scorer on the same rollouts, ranked beside the first "
                        "(repeatable), e.g. pipeline.pusht.scorer:pixel_coverage_score")
    parser.add_argument("--score-every", type=int, default=1, metavar="K",
                        help="score the model's episodes from every K-th frame and the last (a PushT "
                        "T fit costs ~30 ms a frame; default 1: every frame)")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    parser.add_argument("--out", required=True, help="report directory")
    parser.add_argument("--work", help="cache of per-policy scores (default OUT/cache)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the episodes' seeds and the bootstrap")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16"], default=None,
                        help="inference precision (default: the checkpoint's setting)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_ranking)


EVALUATIONS = [_register_fidelity, _register_stability, _register_policy, _register_ranking]


def _positive(value: int | None, flag: str) -> None:
    if value is not None and value < 1:
        raise UserError(f"{flag} must be at least 1, got {value}.")


def _load_model(args: argparse.Namespace) -> Any:
    import torch

    from sim_model.world_model import WorldModel

    _positive(args.threads, "--threads")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device {args.device}: no CUDA device is visible here; use --device cpu.")
    if args.threads:
        torch.set_num_threads(args.threads)
    return WorldModel.load(args.model, device=args.device, precision=args.precision)


def _analyzer(args: argparse.Namespace) -> Any:
    from pipeline.tasks.registry import get_task

    return None if args.object_mask == "none" else get_task(args.object_mask).object_analyzer()


def _progress(args: argparse.Namespace, desc: str, total: int | None = None) -> Any:
    """The commands' one kind of progress bar (tqdm, on stderr), gone when done; rich draws the
    report tables."""
    from tqdm import tqdm

    return tqdm(desc=desc, total=total, disable=args.no_progress, leave=False, file=sys.stderr,
                dynamic_ncols=True)


def _advance_to(bar: Any, done: int, total: int | None = None) -> None:
    if total is not None and bar.total != total:
        bar.total = total
    bar.update(done - bar.n)


def _console() -> Any:
    """A console that does not wrap the wide tables into 80 columns when piped to a file."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=200)


def _warn_if_training_data(model: Any, data: str) -> None:
    trained_on = model.config.provenance.data
    if trained_on and Path(trained_on).resolve() == Path(data).resolve():
        log.warning("the model was trained on %s (all but a random few of its episodes); "
                    "fidelity on training episodes overstates it - evaluate a store collected "
                    "separately, e.g. with another seed.", data)


def run_fidelity(args: argparse.Namespace) -> int:
    from pipeline.evaluation import report as out
    from sim_model.data.formats import dataset_kind
    from sim_model.data.store import EpisodeStore
    from sim_model.evaluate import evaluate_fidelity, parse_horizons

    horizons = parse_horizons(args.horizons)
    for flag in ("episodes", "batch_size", "context_frames"):
        _positive(getattr(args, flag), "--" + flag.replace("_", "-"))
    if args.start < 0:
        raise UserError(f"--start must be >= 0, got {args.start}.")
    if dataset_kind(args.data) != "zarr":
        raise UserError(f"--data {args.data} is not a Zarr episode store; convert it first with "
                        "`iws import`.")
    model = _load_model(args)
    store = EpisodeStore.open(args.data, "r")
    _warn_if_training_data(model, args.data)
    episodes = None
    if args.episodes is not None:
        if args.episodes > len(store):
            log.warning("--episodes %d but the store has %d; evaluating all", args.episodes, len(store))
        episodes = range(min(args.episodes, len(store)))
    with _progress(args, "fidelity") as bar:
        result = evaluate_fidelity(
            model, store, horizons=horizons, episodes=episodes, start=args.start,
            context_frames=args.context_frames, batch_size=args.batch_size, seed=args.seed,
            analyzer=_analyzer(args), video_episodes=args.videos,
            progress=lambda done, total: _advance_to(bar, done, total))
    outdir = Path(args.out)
    # The data path as the user gave it: reports get committed, and a resolved path would carry
    # this machine's directories into them.
    report = result.report.model_copy(update={"data": args.data})
    out.write_json(outdir / "metrics.json", report)
    out.plot_fidelity(report, outdir / "fidelity.png")
    if result.videos:
        video = outdir / f"rollouts.{args.video_format}"
        out.write_video(out.side_by_side(result.videos), video, fps=store.features.fps)
    _console().print(out.fidelity_table(report))
    extra = out.extra_table(report)
    if extra is not None:
        _console().print(extra)
    log.info("wrote %s (metrics.json, fidelity.png, rollouts.%s)", outdir, args.video_format)
    return 0


def run_stability(args: argparse.Namespace) -> int:
    from pipeline.evaluation import report as out
    from sim_model.stability import run_stability as roll
    from workers.actions.scripted import random_walk_actions
    from workers.init_frames import init_ref, load_one_init

    _positive(args.steps, "--steps")
    _positive(args.probe_every, "--probe-every")
    if not 0 < args.speed <= 0.5:
        raise UserError(f"--speed {args.speed}: give a fraction of the action range in (0, 0.5].")
    model = _load_model(args)
    ref = init_ref(args.init)
    try:
        frames, state = load_one_init(ref, model.features)
    except SpecError as error:
        raise UserError(f"--init {error}") from None
    actions = random_walk_actions(model.features, args.steps, args.speed, args.seed, state)
    with _progress(args, "stability", args.steps) as bar:
        result = roll(model, frames, actions, state=state, seed=args.seed, analyzer=_analyzer(args),
                      probe_every=args.probe_every, init_ref=ref,
                      progress=lambda done, total: _advance_to(bar, done))
    outdir = Path(args.out)
    out.write_json(outdir / "stability.json", result.report)
    out.plot_stability(result.report, outdir / "stability.png")
    out.write_filmstrip(result.snapshots, outdir / "stability_frames.png")
    _console().print(out.stability_table(result.report))
    log.info("wrote %s (stability.json, stability.png, stability_frames.png)", outdir)
    return 0


def run_policy(args: argparse.Namespace) -> int:
    from pipeline.evaluation import report as out
    from pipeline.evaluation.policy import episode_specs, evaluate_policy
    from pipeline.evaluation.policy_report import policy_table, rollout_grid
    from pipeline.tasks.registry import get_task, resolve_scorer
    from schemas.job import InitSpec, PolicySource
    from workers.actions.policy import make_policy_source
    from workers.init_frames import list_init_refs

    for flag in ("episodes", "horizon", "batch_size"):
        _positive(getattr(args, flag), "--" + flag.replace("_", "-"))
    if args.videos < 0 or args.init_frame < 0:
        raise UserError(f"--videos and --init-frame must be >= 0, got {args.videos} and {args.init_frame}.")
    import_from_working_dir()
    scorer = resolve_scorer(args.scorer, "--scorer")
    ground_truth = get_task(args.ground_truth, "--ground-truth") if args.ground_truth else None
    model = _load_model(args)
    refs = list_init_refs(InitSpec(dataset=args.init, frame=args.init_frame), model.features)
    specs = episode_specs(refs, args.episodes, args.horizon, args.seed)
    policy = make_policy_source(PolicySource(policy=args.policy), model.features, args.device)
    sides = 2 if args.ground_truth else 1
    with _progress(args, "rollouts", sides * args.episodes * args.horizon) as bar:
        result = evaluate_policy(
            model, policy, scorer, specs, args.horizon, args.batch_size, args.videos,
            ground_truth, args.seed,
            {"policy": args.policy, "model": str(args.model), "init": args.init, "scorer": args.scorer},
            progress=lambda side, steps: bar.update(steps))
    outdir = Path(args.out)
    if result.model_videos:
        name = f"rollouts.{args.video_format}"
        out.write_video(rollout_grid(result.model_videos, result.truth_videos), outdir / name,
                        fps=model.features.fps)
        result.report.videos.append(name)
    out.write_json(outdir / "metrics.json", result.report)
    _console().print(policy_table(result.report))
    log.info("wrote %s (metrics.json%s)", outdir, ", " + ", ".join(result.report.videos) if result.report.videos else "")
    return 0


def run_ranking(args: argparse.Namespace) -> int:
    from pipeline.evaluation import ranking
    from pipeline.evaluation import report as out
    from pipeline.evaluation.policy import episode_specs
    from pipeline.tasks.registry import get_task, resolve_scorer
    from schemas.job import InitSpec, PolicySource
    from workers.actions.policy import make_policy_source
    from workers.init_frames import list_init_refs

    for flag in ("episodes", "horizon", "batch_size", "score_every", "resamples"):
        _positive(getattr(args, flag), "--" + flag.replace("_", "-"))
    if args.init_frame < 0:
        raise UserError(f"--init-frame must be >= 0, got {args.init_frame}.")
    import_from_working_dir()
    entries = ranking.expand_policies(args.policy)
    task = get_task(args.ground_truth, "--ground-truth")
    scorer_name = args.scorer or task.scorer_name
    scorer = ranking.every_kth(resolve_scorer(scorer_name, "--scorer"), args.score_every)
    also = {name: ranking.every_kth(resolve_scorer(name, "--also-score"), args.score_every)
            for name in args.also_score}
    model = _load_model(args)
    refs = list_init_refs(InitSpec(dataset=args.init, frame=args.init_frame), model.features)
    outdir = Path(args.out)
    setup = ranking.RankingSetup(
        model=model, model_label=str(args.model), task=task, scorer=scorer,
        scorer_label=scorer_name + (f" (every {args.score_every} frames)" if args.score_every > 1 else ""),
        specs=episode_specs(refs, args.episodes, args.horizon, args.seed), horizon=args.horizon,
        batch_size=args.batch_size, seed=args.seed, init=args.init,
        work=Path(args.work) if args.work else outdir / "cache", also=also)

    def build(ref: str) -> Any:
        return make_policy_source(PolicySource(policy=ref), model.features, args.device)

    reports, also_scores = [], {name: [] for name in also}
    with _progress(args, "policies", len(entries)) as bar:
        for entry in entries:
            report, extra = ranking.evaluate_entry(entry, setup, build)
            for name, scores in extra.items():
                also_scores[name].append(scores)
            out.write_json(outdir / "policies" / f"{ranking.slug(entry.name)}.json", report)
            assert report.ground_truth is not None
            log.info("%s (%s): in model %.3f, %s %.3f", entry.name, entry.family,
                     report.world_model.mean_score, task.name, report.ground_truth.mean_score)
            reports.append(report)
            bar.update(1)
    result = ranking.rank(entries, reports, args.seed, args.resamples, also_scores)
    out.write_json(outdir / "ranking.json", result)
    ranking.write_scores(outdir / "scores.json", entries, reports, also_scores)
    text = ranking.markdown(result)
    (outdir / "ranking.md").write_text(
        f"# Policy ranking in {args.model} against {task.name}\n\n{text}\n\n"
        f"{args.episodes} starts from {args.init}, {args.horizon} steps, scorer {setup.scorer_label}, "
        f"seed {args.seed}; intervals: 95% bootstrap over starts ({args.resamples} resamples).\n")
    ranking.plot(result, outdir / "ranking.png")
    print(text)
    log.info("wrote %s (ranking.json, ranking.md, ranking.png, scores.json, policies/)", outdir)
    return 0
