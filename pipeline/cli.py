"""`iws` console entry point. Each subcommand lives in pipeline/commands/<name>.py and exposes
`register(subparsers)`, which adds its parser and sets `func=run`; commands only parse, call the
library and print. Heavy imports (torch, ray, lerobot) happen inside `run`, so `iws --help` stays
fast. Errors a user can fix (schemas.errors.SpecError, UserError) are printed without a traceback."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import sys

from pipeline.commands import collect, export, generate, import_, schema, submit, teleop, train
from pipeline.commands import eval as eval_
from schemas.errors import SpecError, UserError

# In `iws --help` order. A command module imports its heavy dependencies inside `run`.
COMMANDS = [schema, collect, train, eval_, generate, export, import_, teleop, submit]


def _version() -> str:
    try:
        return importlib.metadata.version("iws")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return "(not installed)"


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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        result = args.func(args)
    except (SpecError, UserError, FileNotFoundError, PermissionError) as error:
        print(f"iws {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"iws {args.command}: interrupted; committed work is kept, rerun to resume.", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
