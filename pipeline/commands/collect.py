"""`iws collect pusht`: record ground-truth scripted play from gym-pusht into an episode store."""

from __future__ import annotations

import argparse
import os
import sys

from pipeline.commands.paths import add_output, output


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("collect", help="record ground-truth play data from a simulator",
                            description="Record scripted play in a simulator as an episode store "
                            "(Zarr, Diffusion Policy layout) to train a world model on.")
    envs = parser.add_subparsers(dest="env", required=True, metavar="ENV")
    pusht = envs.add_parser(
        "pusht", help="gym-pusht with scripted play primitives",
        description="Scripted play in gym-pusht. Primitives: push (approach a point of the T, "
        "push it 100-160 of 512 canvas units), rotate (turn it 25-35 degrees by pushing an arm), contact (small "
        "random touches), roam (motion that avoids the block), chain (a random sequence of those "
        "within one episode). Each episode plays one primitive drawn from --mix, repeated to fill "
        "--steps, and is kept only when it did what it means. Deterministic for a seed, whatever "
        "--workers.")
    pusht.add_argument("--episodes", type=int, required=True, help="number of episodes")
    pusht.add_argument("--steps", type=int, default=200, help="steps per episode (default 200)")
    add_output(pusht, "path of the Zarr episode store to write")
    pusht.add_argument("--seed", type=int, default=0, help="collection seed (default 0)")
    pusht.add_argument("--resolution", type=int, default=96,
                       help="square frame size in pixels (default 96, gym-pusht's own)")
    pusht.add_argument("--workers", type=int, default=None,
                       help="worker processes, one env each (default: the CPU cores this process may use)")
    pusht.add_argument("--mix", default=None,
                       help="primitive weights, e.g. push=0.4,rotate=0.2,contact=0.1,roam=0.1,"
                       "chain=0.2 (default: push=0.35,rotate=0.25,contact=0.1,roam=0.1,chain=0.2)")
    pusht.add_argument("--overwrite", action="store_true", help="replace an existing store")
    pusht.add_argument("--resume", action="store_true",
                       help="finish a store an interrupted run with the same arguments left")
    pusht.add_argument("--no-progress", action="store_true", help="no progress bar")
    pusht.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from pipeline.cli import UserError
    from pipeline.pusht.collect import DEFAULT_MIX, CollectConfig, collect, open_output, parse_mix

    mix = parse_mix(args.mix) if args.mix is not None else dict(DEFAULT_MIX)
    config = CollectConfig(episodes=args.episodes, steps=args.steps, seed=args.seed,
                           resolution=args.resolution, mix=mix)
    workers = args.workers if args.workers is not None else len(os.sched_getaffinity(0))
    if workers < 1:
        raise UserError(f"--workers must be at least 1, got {workers}.")
    out = output(args)
    store = open_output(config, out, overwrite=args.overwrite, resume=args.resume)
    bar = tqdm(total=config.episodes, initial=len(store), unit="ep", desc="pusht",
               disable=args.no_progress, file=sys.stderr, dynamic_ncols=True)
    try:
        stats = collect(config, store, workers=workers, on_episode=lambda _: bar.update(1))
    except KeyboardInterrupt:
        bar.close()
        print(f"{len(store)} of {config.episodes} episodes are in {out}; run the same "
              "command with --resume to finish.", file=sys.stderr)
        raise
    finally:
        bar.close()
    print(f"{out}: {stats.episodes} episodes x {config.steps} steps at "
          f"{config.resolution}x{config.resolution} added, {len(store)} in the store "
          f"(mix {config.mix_text()})")
    if stats.episodes:
        print(stats.table())
    return 0
