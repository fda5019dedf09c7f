"""`iws generate job.yaml`: roll the world model on Ray replicas and write demonstration datasets."""

from __future__ import annotations

import argparse
import os
import sys


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("generate", help="generate episodes with the world model (Ray)",
                            description="Run a generation job. Rerunning the same job resumes it: "
                            "committed episodes are kept and only the rest are made.")
    parser.add_argument("job", help="job spec YAML (see `iws schema job`)")
    parser.add_argument("--address", default=None,
                        help="Ray cluster to join (default: RAY_ADDRESS, else an embedded local Ray)")
    parser.add_argument("--output", default=None, help="override output.path of the spec")
    parser.add_argument("--model", default=None, help="override the spec's model (checkpoint dir or name)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a spec field, e.g. --set episodes=100 --set resources.num_gpus=0.5")
    parser.add_argument("--overwrite", action="store_true",
                        help="delete what an earlier run wrote to the output first")
    parser.add_argument("--check", action="store_true",
                        help="validate the spec (model, init frames, sources, output) and exit")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from pipeline.generate import Progress, load_job, run_job
    from pipeline.generate.preflight import preflight

    if os.getcwd() not in sys.path:  # policies/scorers named 'module:fn' may live in the working dir
        sys.path.insert(0, os.getcwd())
    spec = load_job(args.job, output=args.output, model=args.model, overrides=args.overrides)
    if args.check:
        plan = preflight(spec)
        print(f"{args.job}: OK - {len(plan.episodes)} episodes x {spec.horizon} steps with model "
              f"{plan.model_hash}, output {spec.output.path}")
        return 0
    bar: tqdm | None = None

    def show(progress: Progress) -> None:
        nonlocal bar
        if bar is None:  # opened when the driver starts, so the rate and ETA count from there
            bar = tqdm(total=progress.total, initial=progress.done, unit="ep", desc=spec.name,
                       disable=args.no_progress, file=sys.stderr, dynamic_ncols=True,
                       smoothing=0)  # groups commit in bursts: average rate, not the last burst
        bar.update(progress.done - bar.n)
        bar.set_postfix(frames_per_s=f"{progress.frames_per_s:.1f}", refresh=True)

    try:
        manifest = run_job(spec, address=args.address, overwrite=args.overwrite, on_progress=show)
    finally:
        if bar is not None:
            bar.close()
    print(f"{spec.name}: {len(manifest.episodes)} episodes, {manifest.frames} frames -> "
          + ", ".join(f"{fmt}: {uri}" for fmt, uri in manifest.datasets.items()))
    return 0
