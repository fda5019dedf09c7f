"""Which in-model scorer to rank PushT policies with, chosen on some policy families and judged on
the others (issue 31's calibration).

`iws eval ranking --also-score ...` scores the same in-model rollouts with several scorers and
writes every start's scores to OUT/scores.json. This script splits the zoo by family into a
tuning half and a held-out half, ranks the policies of each half by each scorer against the real
scores (the measures and paired bootstrap of `pipeline.evaluation.ranking.agreement`), picks the
scorer with the highest Spearman rho on the tuning half and reports it on the held-out half,
whose policies took no part in the choice. It also lists the per-policy gap (real minus
in-model mean score) under each scorer: where a scorer fails on the model's artefacts (a bent
T, a T that dissolves), the gap grows with the policy's real score.

    python -m experiments.ranking_calibration experiments/results/ranking_run/scores.json \\
        --tune scripted,act --held-out diffusion,vqbet --out experiments/results/ranking_calibration.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from pipeline.evaluation.ranking import MEASURES, RankAgreement, agreement


def split_agreement(rows: list[dict], families: set[str], scorer: str, seed: int,
                    resamples: int) -> RankAgreement:
    """Agreement of `scorer`'s in-model scores with the real ones over the policies of `families`."""
    chosen = [r for r in rows if r["family"] in families]
    if len(chosen) < 2:
        raise ValueError(f"fewer than 2 policies in families {sorted(families)}; "
                         f"the file has {sorted({r['family'] for r in rows})}")
    model = np.array([r["model"][scorer] for r in chosen], dtype=float)
    real = np.array([r["real"] for r in chosen], dtype=float)
    return agreement(model, real, seed, resamples)


def _fmt(a: RankAgreement, measure: str) -> str:
    e = getattr(a, measure)
    if e.value is None:
        return "n/a"
    if e.low is None:
        return f"{e.value:.2f}"
    return f"{e.value:.2f} [{e.low:.2f}, {e.high:.2f}]"


def report(scores: dict, tune: set[str], held_out: set[str], seed: int, resamples: int) -> tuple[str, dict]:
    rows = scores["policies"]
    scorers = list(rows[0]["model"])
    results = {s: {"tune": split_agreement(rows, tune, s, seed, resamples),
                   "held_out": split_agreement(rows, held_out, s, seed, resamples)} for s in scorers}
    chosen = max(scorers, key=lambda s: results[s]["tune"].spearman.value or -2.0)
    head = "| scorer | half | n | " + " | ".join(MEASURES) + " |"
    lines = [f"Tuning families: {', '.join(sorted(tune))}; held-out families: {', '.join(sorted(held_out))}.",
             "", head, "|---|---|---:|" + "---:|" * len(MEASURES)]
    for s in scorers:
        for half in ("tune", "held_out"):
            a = results[s][half]
            lines.append(f"| `{s}` | {half.replace('_', '-')} | {a.policies} | "
                         + " | ".join(_fmt(a, m) for m in MEASURES) + " |")
    lines += ["", f"Chosen on the tuning families (highest Spearman rho): `{chosen}`; on the held-out "
              f"families it reaches Spearman {_fmt(results[chosen]['held_out'], 'spearman')}, MMRV "
              f"{_fmt(results[chosen]['held_out'], 'mmrv')}, regret {_fmt(results[chosen]['held_out'], 'regret')}.",
              "", "Per-policy gap, real minus in-model mean score:", "",
              "| policy | family | real | " + " | ".join(f"gap `{s}`" for s in scorers) + " |",
              "|---|---|---:|" + "---:|" * len(scorers)]
    for r in sorted(rows, key=lambda r: -float(np.mean(r["real"]))):
        real = float(np.mean(r["real"]))
        lines.append(f"| {r['name']} | {r['family']} | {real:.3f} | "
                     + " | ".join(f"{real - float(np.mean(r['model'][s])):+.3f}" for s in scorers) + " |")
    out = {"tune": sorted(tune), "held_out": sorted(held_out), "chosen": chosen,
           "scorers": {s: {h: a.model_dump() for h, a in v.items()} for s, v in results.items()}}
    return "\n".join(lines), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scores", type=Path, help="scores.json of `iws eval ranking`")
    parser.add_argument("--tune", required=True, help="comma-separated families the scorer is chosen on")
    parser.add_argument("--held-out", required=True, help="comma-separated families it is judged on")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--out", type=Path, help="markdown file (a .json beside it); default: print")
    args = parser.parse_args()
    tune, held_out = set(args.tune.split(",")), set(args.held_out.split(","))
    if tune & held_out:
        parser.error(f"--tune and --held-out share {sorted(tune & held_out)}")
    try:
        text, data = report(json.loads(args.scores.read_text()), tune, held_out, args.seed, args.resamples)
    except (OSError, ValueError, KeyError) as exc:
        parser.error(f"{args.scores}: {exc}")
    if args.out is None:
        print(text)
        return
    args.out.write_text(f"# Scorer calibration (`experiments/ranking_calibration.py`)\n\n{text}\n")
    args.out.with_suffix(".json").write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
