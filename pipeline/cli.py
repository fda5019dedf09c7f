"""`iws` console entry point. Each subcommand lives in pipeline/commands/<name>.py and exposes
`register(subparsers)`, which adds its parser and sets `func=run`. Heavy imports (torch, ray,
lerobot) happen inside `run`, so `iws --help` stays fast."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import logging
import sys

from schemas.errors import SpecError

COMMANDS = [
    "schema",
    "collect",
    "train",
    "eval",
    "generate",
    "export",
    "import_",
    "teleop",
    "submit",
]


class UserError(Exception):
    """An error the user can fix; the CLI prints its message without a traceback."""


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
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"pipeline.commands.{name}")
        except ModuleNotFoundError as error:
            if error.name == f"pipeline.commands.{name}":
                continue  # subcommand not built yet
            raise
        module.register(sub)
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
