"""`iws generate job.yaml`: roll the world model on Ray replicas and write demonstration datasets."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from schemas import JobSpec, RunManifest

log = logging.getLogger("iws.generate")
PROGRESS_LOG_S = 5.0


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("generate", help="generate episodes with the world model (Ray)",
                            description="Run a generation job. Rerunning the same job resumes it: "
                            "committed episodes are kept and only the rest are made. One run at a "
                            "time owns an output: a run holds a lease on it (OUT/lease.json, "
                            "renewed every 30 s, valid 2 minutes past the last renewal), and a "
                            "second run on the same output is refused, naming the owner and when "
                            "its lease expires. A run that died is taken over once its lease "
                            "expires, at once if it ran on this machine, or now with --take-over.")
    parser.add_argument("job", help="job spec YAML (see `iws schema job`)")
    parser.add_argument("--address", default=None,
                        help="Ray cluster to join (default: RAY_ADDRESS, else an embedded local Ray)")
    parser.add_argument("--output", default=None, help="override output.path of the spec")
    parser.add_argument("--model", default=None, help="override the spec's model (checkpoint dir or name)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a spec field, e.g. --set episodes=100 --set resources.num_gpus=0.5")
    parser.add_argument("--overwrite", action="store_true",
                        help="delete what an earlier run wrote to the output first")
    parser.add_argument("--take-over", action="store_true",
                        help="take the output over from the run holding its lease even though the "
                        "lease has not expired (when you know that run is dead, e.g. its machine is "
                        "gone); a run that is in fact alive stops at its next renewal")
    parser.add_argument("--check", action="store_true",
                        help="validate the spec (model, init frames, sources, output) and exit")
    parser.add_argument("--verify", action="store_true",
                        help="before resuming, read every dataset part back against the committed "
                        "checksums (as `iws verify`) and make again what fails; every resume checks "
                        "the parts' files and sizes in any case")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from pipeline.commands.paths import import_from_working_dir
    from pipeline.commands.progress import quiet_logging
    from pipeline.generate import Progress, load_job, run_job
    from pipeline.generate.preflight import preflight

    import_from_working_dir()
    spec = load_job(args.job, output=args.output, model=args.model, overrides=args.overrides)
    if args.check:
        plan = preflight(spec)
        print(f"{args.job}: OK - {len(plan.episodes)} episodes x {spec.horizon} steps with model "
              f"{plan.model_hash}, output {spec.output.path}")
        return 0
    bar: tqdm | None = None
    logged = 0.0

    def show(progress: Progress) -> None:
        nonlocal bar, logged
        if args.no_progress and (time.monotonic() - logged > PROGRESS_LOG_S or progress.done == progress.total):
            # No bar (a log file, `iws submit`): a progress line now and then instead.
            logged = time.monotonic()
            eta = "" if progress.eta_s is None else f", ETA {progress.eta_s:.0f}s"
            log.info("progress: %d/%d episodes, %.1f frames/s%s", progress.done, progress.total,
                     progress.frames_per_s, eta)
        if bar is None:  # opened when the driver starts, so the rate and ETA count from there
            bar = tqdm(total=progress.total, initial=progress.done, unit="ep", desc=spec.name,
                       disable=args.no_progress, file=sys.stderr, dynamic_ncols=True,
                       smoothing=0)  # groups commit in bursts: average rate, not the last burst
        bar.update(progress.done - bar.n)
        bar.set_postfix(frames_per_s=f"{progress.frames_per_s:.1f}", refresh=True)

    # `ray job stop` / `iws submit --stop` send SIGTERM: end like Ctrl-C, so the driver records
    # what is committed before it exits (before Ray connects: our handler; after: Ray's).
    main_thread = threading.current_thread() is threading.main_thread()  # signals need it
    previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None
    # With a bar, library INFO lines stay off the terminal (-v shows them); without, they are
    # the output (a log file, `iws submit`).
    quiet = contextlib.nullcontext() if args.no_progress else quiet_logging(getattr(args, "verbose", False))
    try:
        with quiet:
            manifest = run_job(spec, address=args.address, overwrite=args.overwrite,
                               take_over=args.take_over, on_progress=show, verify_data=args.verify)
    except SystemExit as error:
        if error.code == signal.SIGTERM:  # once connected, Ray's driver handles SIGTERM this way
            raise KeyboardInterrupt from None
        raise
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
        if bar is not None:
            bar.close()
    print(f"{spec.name}: {manifest.episodes_committed} episodes, {manifest.frames} frames -> "
          + ", ".join(f"{fmt}: {uri}" for fmt, uri in manifest.datasets.items()))
    _print_where_to_look(spec, manifest)
    return 0


def _print_where_to_look(spec: JobSpec, manifest: RunManifest) -> None:
    from pipeline.generate.outputs import PREVIEW_FILE, SUMMARY_FILE
    from pipeline.generate.summary import viz_command
    from sim_model import storage

    out = spec.output.path
    print(f"  preview: {storage.join(out, PREVIEW_FILE)}")
    print(f"  summary: {storage.join(out, SUMMARY_FILE)}")
    if "lerobot" in manifest.datasets:
        print(f"  view the LeRobot copy: {viz_command(spec.name, manifest.datasets['lerobot'])}")
    else:
        print("  LeRobot copy (for lerobot-dataset-viz, lerobot-train): add lerobot to output.formats")
