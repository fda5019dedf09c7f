"""Paired comparison of two fidelity reports (`iws eval fidelity`) made on the same episodes:
per horizon, each metric's mean for both and the mean of (A - B) with an episode-bootstrap 95%
interval (2000 resamples, seed 0), so a candidate checkpoint is judged against the bundled one
on exactly the episodes both were scored on.

    python -m experiments.compare_reports runs/report_v13/fidelity/metrics.json \
        docs/models/pusht/fidelity/metrics.json --names v13 v1.2
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pipeline.evaluation.stats import bootstrap_mean_interval

METRICS = ("object_iou", "shape_score", "psnr")


def compare(a: dict, b: dict, names: tuple[str, str]) -> str:
    if a["episodes"] != b["episodes"] or a["data"] != b["data"]:
        raise SystemExit(f"the reports were made on different episodes ({a['data']} vs {b['data']})")
    rows = [f"| h | metric | {names[0]} | {names[1]} | {names[0]} - {names[1]} [95% CI] |", "|---|---|---|---|---|"]
    for ha, hb in zip(a["horizons"], b["horizons"], strict=True):
        for metric in METRICS:
            if metric not in ha or metric not in hb:
                continue
            va, vb = np.array(ha[metric]["model"]["values"]), np.array(hb[metric]["model"]["values"])
            low, high = bootstrap_mean_interval(va - vb, seed=0, resamples=2000)
            rows.append(f"| {ha['horizon']} | {metric} | {va.mean():.3f} | {vb.mean():.3f} | "
                        f"{(va - vb).mean():+.3f} [{low:+.3f}, {high:+.3f}] |")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="metrics.json of the candidate")
    parser.add_argument("b", type=Path, help="metrics.json of the reference")
    parser.add_argument("--names", nargs=2, default=("A", "B"))
    args = parser.parse_args(argv)
    print(compare(json.loads(args.a.read_text()), json.loads(args.b.read_text()), tuple(args.names)))


if __name__ == "__main__":
    main()
