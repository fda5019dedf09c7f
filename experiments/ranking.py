"""Do policy scores inside the world model rank policies as gym-pusht does?

Scores each policy of a graded family (experiments/policy_zoo.py: the demonstrator, noisier and
slower versions of it, a policy that stands still) closed loop in the world model and, from the
same initial states, in gym-pusht (`iws eval policy --ground-truth pusht` machinery), then
reports Spearman's rho and Kendall's tau between the two sides' mean scores and success rates.
The paper's claim is a strong correlation; a good world model should keep the ranking.

    python -m experiments.ranking --model CKPT --init held_out.zarr --episodes 20 \
        --out runs/ranking.json

Full size (6 policies x 20 episodes x 300 steps, both sides) takes hours on 2 CPU cores; use a
GPU for the model, or fewer episodes / a shorter horizon for a first look.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np

from experiments.policy_zoo import ZOO
from pipeline.evaluation.policy import episode_specs, evaluate_policy
from schemas.job import InitSpec, PolicySource
from sim_model.world_model import WorldModel
from workers.actions.policy import make_policy_source
from workers.init_frames import list_init_refs
from workers.scoring import resolve_scorer

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
    ra, rb = ranks(np.asarray(a, float)), ranks(np.asarray(b, float))
    if np.ptp(ra) == 0 or np.ptp(rb) == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float | None:
    """Kendall's tau-b."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    i, j = np.triu_indices(len(a), k=1)
    sa, sb = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    denominator = np.sqrt(np.count_nonzero(sa) * np.count_nonzero(sb))
    return None if denominator == 0 else float((sa * sb).sum() / denominator)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--init", required=True, help="Zarr store with state and block_pose (held out)")
    parser.add_argument("--policies", default=",".join(f"experiments.policy_zoo:{p}" for p in ZOO))
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--horizon", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, required=True, help="JSON with every policy's report")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    model = WorldModel.load(args.model, device=args.device)
    specs = episode_specs(list_init_refs(InitSpec(dataset=args.init), model.features), args.episodes,
                          args.horizon, args.seed)
    scorer = resolve_scorer("pusht_coverage")
    reports = {}
    for ref in args.policies.split(","):
        policy = make_policy_source(PolicySource(policy=ref), model.features, args.device)
        result = evaluate_policy(model, policy, scorer, specs, args.horizon, args.batch_size, 0, "pusht",
                                 args.seed, {"policy": ref, "model": args.model, "init": args.init,
                                             "scorer": "pusht_coverage"})
        reports[ref] = result.report
        log.info("%s: world model %.3f, gym-pusht %.3f", ref, result.report.world_model.mean_score,
                 result.report.ground_truth.mean_score)
    names = list(reports)
    table = {side: {k: np.array([getattr(getattr(reports[n], side), k) for n in names])
                    for k in ("mean_score", "success_rate")} for side in ("world_model", "ground_truth")}
    summary = {k: {"spearman": spearman(table["world_model"][k], table["ground_truth"][k]),
                   "kendall_tau": kendall_tau(table["world_model"][k], table["ground_truth"][k])}
               for k in ("mean_score", "success_rate")}
    print("| policy | world model mean score | gym-pusht mean score | world model success | gym-pusht success |")
    print("|---|---:|---:|---:|---:|")
    for i, name in enumerate(names):
        print(f"| {name.rsplit(':', 1)[-1]} | {table['world_model']['mean_score'][i]:.3f} | "
              f"{table['ground_truth']['mean_score'][i]:.3f} | {table['world_model']['success_rate'][i]:.2f} | "
              f"{table['ground_truth']['success_rate'][i]:.2f} |")
    print(f"\nrank agreement: {json.dumps(summary)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "reports": {n: r.model_dump() for n, r in reports.items()}},
                                   indent=2))


if __name__ == "__main__":
    main()
