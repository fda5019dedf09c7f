"""Where a command writes: `DEST` as the last positional argument or `--out DEST`, whichever the
user writes (`iws collect pusht --out X` and `iws export lerobot SRC X` read alike)."""

from __future__ import annotations

import argparse


def add_output(parser: argparse.ArgumentParser, help: str) -> None:
    """An optional positional DEST and an `--out DEST` option naming the same output."""
    parser.add_argument("dest", nargs="?", metavar="DEST", help=f"{help} (or --out DEST)")
    parser.add_argument("--out", metavar="DEST", help="the same as the positional DEST")


def output(args: argparse.Namespace) -> str:
    """The output the user named, either way; UserError if none, or two that differ."""
    from pipeline.cli import UserError

    if args.dest and args.out and args.dest != args.out:
        raise UserError(f"DEST {args.dest!r} and --out {args.out!r} name different outputs; "
                        "give one of them.")
    path = args.dest or args.out
    if not path:
        raise UserError("no output given: name it as the last argument (DEST) or with --out DEST.")
    return str(path)
