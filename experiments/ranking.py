"""Do policy scores inside the world model rank policies as gym-pusht does?

Scores each policy of a graded family closed loop in the world model and, from the same initial
states, in gym-pusht (the `iws eval policy --ground-truth pusht` machinery), then reports Pearson
r, Spearman's rho and Kendall's tau between the two sides' mean scores and success rates, with a
scatter plot. The family: the demonstrator, noisier and slower versions of it, a policy that
stands still, a random one (experiments/policy_zoo.py), and BC checkpoints at several training
steps trained on real and on world-model demonstrations (experiments/usefulness.py writes them).
The paper's claim is a strong correlation; a good world model keeps the ranking.

World-model episodes are scored by the pixel scorer on every `--score-stride`-th frame (a T fit
costs ~30 ms); gym-pusht episodes by gym-pusht's own coverage on every frame. Each policy's
side of each policy is cached in --work, so a killed run resumes, and the gym-pusht side (which
does not depend on the model) is reused when another checkpoint is ranked.

    python -m experiments.ranking --model pusht --init data/pusht_heldout.zarr --episodes 16 \
        --bc "runs/usefulness/bc_*/step-*" --work runs/ranking --results experiments/results
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from experiments.bc_policy import BCPolicy
from experiments.policy_zoo import ZOO
from pipeline.evaluation.policy import episode_specs, evaluate_in_model, summarize
from pipeline.evaluation.policy_report import PolicyReport, SideScore
from pipeline.evaluation.stats import pearson
from pipeline.pusht.scorer import coverage_trace, episode_frames
from pipeline.pusht.truth import evaluate_in_pusht
from schemas import EpisodeSpec, FeatureSpec
from schemas.job import InitSpec, PolicySource
from sim_model.data.episode import Episode
from sim_model.world_model import WorldModel
from workers.actions.base import ActionSource
from workers.actions.policy import make_policy_source
from workers.init_frames import list_init_refs
from workers.scoring import Scorer, TaskScore

log = logging.getLogger("ranking")


def ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank."""
    order = np.argsort(values, kind="stable")
    out = np.empty(len(values))
    out[order] = np.arange(1, len(values) + 1)
    for v in np.unique(values):
        tied = values == v
        out[tied] = out[tied].mean()
    return out


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    return pearson(ranks(np.asarray(a, float)), ranks(np.asarray(b, float)))


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float | None:
    """Kendall's tau-b."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    i, j = np.triu_indices(len(a), k=1)
    sa, sb = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    denominator = np.sqrt(np.count_nonzero(sa) * np.count_nonzero(sb))
    return None if denominator == 0 else float((sa * sb).sum() / denominator)


def coarse_scorer(stride: int) -> Scorer:
    def score(episode: Episode) -> TaskScore:
        trace = coverage_trace(episode_frames(episode), stride=stride)
        return TaskScore(trace.best, trace.success)
    return score


def make_policy(ref: str, features: FeatureSpec, device: str) -> ActionSource:
    if Path(ref).is_dir():
        return BCPolicy(ref)
    return make_policy_source(PolicySource(policy=ref), features, device)


def short_name(ref: str) -> str:
    if Path(ref).is_dir():
        path = Path(ref)
        return f"{path.parent.name}/{path.name}"
    return ref.rsplit(":", 1)[-1]


def side_scores(path: Path, roll: Callable[[], list[SideScore]]) -> list[SideScore]:
    """Per-episode scores cached at `path` (computed by `roll` the first time)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        scores = roll()
        path.write_text(json.dumps([s.model_dump() for s in scores]))
    return [SideScore.model_validate(s) for s in json.loads(path.read_text())]


def policy_report(ref: str, model: WorldModel, specs: list[EpisodeSpec], args: argparse.Namespace) -> PolicyReport:
    """Both sides for one policy. The gym-pusht side does not depend on the world model, so it is
    cached apart from the world-model side (keyed by the checkpoint's hash) and reused across models."""
    name = short_name(ref).replace("/", "_")
    setup = f"{Path(args.init).name}-n{args.episodes}-h{args.horizon}-s{args.seed}"
    started = time.perf_counter()

    def in_model() -> list[SideScore]:
        policy = make_policy(ref, model.features, args.device)
        return evaluate_in_model(model, policy, coarse_scorer(args.score_stride), specs, args.batch_size,
                                 0)[0]

    def in_pusht() -> list[SideScore]:
        policy = make_policy(ref, model.features, args.device)
        return evaluate_in_pusht(policy, specs, model.features, args.horizon, args.batch_size, 0)[0]

    model_scores = side_scores(args.work / setup / model.checkpoint_hash[:16] / f"{name}.json", in_model)
    truth_scores = side_scores(args.work / setup / "gym-pusht" / f"{name}.json", in_pusht)
    report = summarize(specs, model_scores, truth_scores, args.seed,
                       {"policy": ref, "model": args.model, "init": args.init,
                        "scorer": f"pusht_coverage (stride {args.score_stride})",
                        "checkpoint_hash": model.checkpoint_hash, "horizon": args.horizon,
                        "ground_truth_env": "pusht"})
    assert report.ground_truth is not None
    log.info("%s: world model %.3f, gym-pusht %.3f (%.0f s)", ref, report.world_model.mean_score,
             report.ground_truth.mean_score, time.perf_counter() - started)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="pusht")
    parser.add_argument("--init", required=True, help="Zarr store with state and block_pose (held out)")
    parser.add_argument("--policies", default=",".join(f"experiments.policy_zoo:{p}" for p in ZOO))
    parser.add_argument("--bc", default="", help="glob of BC checkpoint directories to add")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--horizon", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--score-stride", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--work", type=Path, default=Path("runs/ranking"), help="per-policy reports")
    parser.add_argument("--results", type=Path, default=None, help="write ranking.{md,json,png} here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    import torch

    torch.set_num_threads(args.threads)
    model = WorldModel.load(args.model, device=args.device)
    specs = episode_specs(list_init_refs(InitSpec(dataset=args.init), model.features), args.episodes,
                          args.horizon, args.seed)
    refs = [r for r in args.policies.split(",") if r]
    refs += sorted(glob.glob(args.bc)) if args.bc else []
    reports = {ref: policy_report(ref, model, specs, args) for ref in refs}
    names = list(reports)
    table = {side: {k: np.array([getattr(getattr(reports[n], side), k) for n in names])
                    for k in ("mean_score", "success_rate")} for side in ("world_model", "ground_truth")}
    summary = {k: {"pearson": pearson(table["world_model"][k], table["ground_truth"][k]),
                   "spearman": spearman(table["world_model"][k], table["ground_truth"][k]),
                   "kendall_tau": kendall_tau(table["world_model"][k], table["ground_truth"][k])}
               for k in ("mean_score", "success_rate")}
    lines = ["| policy | world model mean score | gym-pusht mean score | world model success | gym-pusht success |",
             "|---|---:|---:|---:|---:|"]
    for i, name in enumerate(names):
        lines.append(f"| {short_name(name)} | {table['world_model']['mean_score'][i]:.3f} | "
                     f"{table['ground_truth']['mean_score'][i]:.3f} | "
                     f"{table['world_model']['success_rate'][i]:.2f} | {table['ground_truth']['success_rate'][i]:.2f} |")
    lines += ["", "| metric | Pearson r | Spearman rho | Kendall tau |", "|---|---:|---:|---:|"]

    def fmt(x: float | None) -> str:
        return "n/a (constant)" if x is None else f"{x:.2f}"

    for k, v in summary.items():
        lines.append(f"| {k} | {fmt(v['pearson'])} | {fmt(v['spearman'])} | {fmt(v['kendall_tau'])} |")
    text = "\n".join(lines)
    print(text)
    if args.results is not None:
        setup = {"model": args.model, "checkpoint_hash": model.checkpoint_hash, "init": Path(args.init).name,
                 "episodes": args.episodes, "horizon": args.horizon, "seed": args.seed,
                 "score_stride": args.score_stride}
        args.results.mkdir(parents=True, exist_ok=True)
        (args.results / "ranking.md").write_text(
            "# Ranking: policy scores in the world model vs gym-pusht (`experiments/ranking.py`)\n\n"
            f"{text}\n\nSetup: {json.dumps(setup)}\n")
        (args.results / "ranking.json").write_text(json.dumps(
            {"setup": setup, "summary": summary,
             "policies": {short_name(n): {side: {k: float(table[side][k][i]) for k in table[side]}
                                          for side in table} for i, n in enumerate(names)}}, indent=2))
        scatter(args.results / "ranking.png", [short_name(n) for n in names], table, summary)


def scatter(path: Path, names: list[str], table: dict, summary: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 5))
    x, y = table["ground_truth"]["mean_score"], table["world_model"]["mean_score"]
    ax.scatter(x, y)
    for name, xi, yi in zip(names, x, y, strict=True):
        ax.annotate(name, (xi, yi), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("gym-pusht mean best coverage")
    ax.set_ylabel("world-model mean best coverage (pixel scorer)")
    s = summary["mean_score"]
    ax.set_title(f"Pearson r = {s['pearson'] if s['pearson'] is None else round(s['pearson'], 2)}, "
                 f"Spearman rho = {s['spearman'] if s['spearman'] is None else round(s['spearman'], 2)}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
