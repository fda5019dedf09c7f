"""`iws submit [--address URL] train <iws train arguments>`: a training stage as a Ray job.

The job runs `iws train <arguments> --no-progress` on the cluster's head as a Ray driver, so
`--workers N [--gpus-per-worker G]` trains on the cluster's workers (the driver joins the
cluster through RAY_ADDRESS, which Ray sets for jobs), and without `--workers` the stage trains
in the driver itself. Resubmitting the same command resumes the stage from its last checkpoint,
as rerunning `iws train` does; `iws submit --stop ID` stops it, keeping what rank 0 wrote.

What travels: the working directory (--working-dir, else the --config file's directory, else
nothing), with the --config file and a relative --init-from checkpoint, which must lie inside
it. What must already be where the cluster can read it: --data (s3:// or an absolute path the
head and workers see) and --out (an absolute path on a filesystem every node shares). Both are
refused when relative, before anything is uploaded: a relative path would resolve inside the
job's temporary copy of the working directory on the head and be lost. Credentials never
travel (docs/cluster.md).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from pipeline.ray_jobs import EXCLUDES, Submission
from schemas import SpecError
from sim_model import storage


def prepare_training(argv: list[str], parser: argparse.ArgumentParser, *,
                     working_dir: str | Path | None = None) -> Submission:
    """Check `iws train` arguments for a cluster and build the submission; SpecError (or
    argparse's usage error) naming the problem otherwise. `parser` is `iws train`'s own
    (pipeline.commands.train.submission_parser()): the CLI hands it in, so that this module
    needs nothing from the CLI above it."""
    try:
        args = parser.parse_args(argv)
    except SystemExit:  # argparse printed the usage error
        raise SpecError(f"`iws submit train` takes `iws train` arguments; these are not valid: "
                        f"{shlex.join(argv)} (see `iws train --help`).") from None
    if not storage.is_remote(args.data) and not Path(args.data).is_absolute():
        raise SpecError(f"--data '{args.data}' is a relative path: on the cluster it would resolve "
                        "inside the job's temporary working directory. Give an s3:// URI or an "
                        "absolute path every node can read.")
    if storage.is_remote(args.out) or not Path(args.out).is_absolute():
        raise SpecError(f"--out '{args.out}' must be an absolute path on a filesystem every node "
                        "shares (rank 0 writes the run there); keep checkpoints on s3:// with "
                        "--storage as well if the nodes do not share it.")
    local = {flag: value for flag, value in (("--config", args.config), ("--init-from", args.init_from))
             if value is not None and _is_local_relative(value)}
    if working_dir is not None:
        root = Path(working_dir).expanduser().resolve()
    elif args.config is not None and not Path(args.config).is_absolute():
        root = Path(args.config).expanduser().resolve().parent
    else:
        root = None
    if root is not None and not root.is_dir():
        raise SpecError(f"--working-dir {root} is not a directory.")
    rewritten = list(argv)
    for flag, value in local.items():
        resolved = Path(value).expanduser().resolve()
        if root is None or not resolved.is_relative_to(root):
            raise SpecError(f"{flag} '{value}' is not inside the working directory that is uploaded "
                            f"({root or 'none'}); pass a --working-dir that contains it, or an "
                            "absolute path that exists on the cluster.")
        if not resolved.exists():
            raise SpecError(f"{flag} '{value}' does not exist here, so it cannot be uploaded.")
        rewritten = _replace_value(rewritten, flag, resolved.relative_to(root).as_posix())
    if "--no-progress" not in rewritten:
        rewritten.append("--no-progress")
    return Submission(job_name=f"train-{args.stage}", entrypoint=shlex.join(["iws", "train", *rewritten]),
                      working_dir=root, excludes=list(EXCLUDES))


def _is_local_relative(value: str) -> bool:
    """A relative filesystem path (not a bundled model name like 'pusht', not s3://)."""
    if storage.is_remote(value) or Path(value).is_absolute():
        return False
    return "/" in value or "\\" in value or Path(value).exists()


def _replace_value(argv: list[str], flag: str, value: str) -> list[str]:
    """argv with `flag`'s value (as `flag V` or `flag=V`) replaced."""
    out: list[str] = []
    skip = found = False
    for i, item in enumerate(argv):
        if skip:
            skip = False
            continue
        if item == flag and i + 1 < len(argv):
            out += [flag, value]
            skip = found = True
        elif item.startswith(flag + "="):
            out.append(f"{flag}={value}")
            found = True
        else:
            out.append(item)
    if not found:  # argparse took an abbreviation of the flag
        raise SpecError(f"spell out {flag} in full in `iws submit train` (its path is rewritten for "
                        "the upload).")
    return out
