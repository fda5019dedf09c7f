"""`iws collect TASK`: record ground-truth play from a task's simulator into an episode store.

The tasks, and each one's own flags, come from the registry (pipeline.tasks.registry); this
command adds the flags every task shares and draws the progress bar.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pipeline.commands.paths import add_output, output


def register(sub: argparse._SubParsersAction) -> None:
    from pipeline.tasks.registry import TASKS

    parser = sub.add_parser("collect", help="record ground-truth play data from a simulator",
                            description="Record scripted play in a simulator as an episode store "
                            "(Zarr, Diffusion Policy layout) to train a world model on.")
    tasks = parser.add_subparsers(dest="task", required=True, metavar="TASK")
    for task in TASKS.values():
        task_parser = tasks.add_parser(task.name, help=task.summary)
        task_parser.add_argument("--episodes", type=int, required=True, help="number of episodes")
        task_parser.add_argument("--steps", type=int, default=200,
                                 help="steps per episode (default 200)")
        add_output(task_parser, "path of the Zarr episode store to write")
        task_parser.add_argument("--seed", type=int, default=0, help="collection seed (default 0)")
        task.add_collect_arguments(task_parser)
        task_parser.add_argument("--overwrite", action="store_true", help="replace an existing store")
        task_parser.add_argument("--resume", action="store_true",
                                 help="finish a store an interrupted run with the same arguments left")
        task_parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        task_parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from pipeline.tasks.registry import get_task

    task = get_task(args.task)
    out = output(args)
    bar: Any = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:  # drawn once the store is open, so that a bad --out prints its error alone
            bar = tqdm(total=total, initial=done, unit="ep", desc=task.name,
                       disable=args.no_progress, file=sys.stderr, dynamic_ncols=True)
        else:
            bar.update(done - bar.n)

    try:
        summary = task.collect(args, out, progress)
    except KeyboardInterrupt:
        done = 0 if bar is None else bar.n
        if bar is not None:
            bar.close()
        print(f"{done} of {args.episodes} episodes are in {out}; run the same command with "
              "--resume to finish.", file=sys.stderr)
        raise
    finally:
        if bar is not None:
            bar.close()
    print(summary)
    return 0
