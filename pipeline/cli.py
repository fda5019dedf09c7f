"""`iws` console entry point. Each subcommand lives in pipeline/commands/<name>.py and exposes
`register(subparsers)`, which adds its parser and sets `func=run`; commands only parse, call the
library and print. Heavy imports (torch, ray, lerobot) happen inside `run`, so `iws --help` stays
fast. Errors a user can fix (schemas.errors.SpecError, UserError) are printed without a traceback."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import select
import signal
import sys

from pipeline.commands import (
    collect,
    export,
    generate,
    import_,
    schema,
    submit,
    teleop,
    train,
    verify,
)
from pipeline.commands import eval as eval_
from schemas.errors import SpecError, UserError

# In `iws --help` order. A command module imports its heavy dependencies inside `run`.
COMMANDS = [schema, collect, train, eval_, generate, verify, export, import_, teleop, submit]


def _version() -> str:
    try:
        return importlib.metadata.version("iws")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return "(not installed)"


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone (poll reports an error on it)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows) or no real stdout
        return False


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iws", description="Interactive world simulator: generate "
                                     "robot demonstrations with a learned world model.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"iws {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse itself ignores a closed pipe under --help
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        result = args.func(args)
        sys.stdout.flush()  # now, not at exit, where a closed pipe could only be a traceback
    except BrokenPipeError:
        if not _stdout_closed():  # a socket's, not standard output's: not ours to hide
            raise
        # The reader (`iws schema job | head`) has what it wanted: stop as a Unix tool does on
        # SIGPIPE, without a word, and with nothing left for Python to flush at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except (SpecError, UserError, FileNotFoundError, PermissionError) as error:
        print(f"iws {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"iws {args.command}: interrupted; committed work is kept, rerun to resume.", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
