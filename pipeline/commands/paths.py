"""Paths of a command: where it writes (`DEST` as the last positional argument or `--out DEST`,
whichever the user writes: `iws collect pusht --out X` and `iws export lerobot SRC X` read alike)
and where the user's own code is imported from."""

from __future__ import annotations

import argparse
import os
import sys

from schemas.errors import UserError


def add_output(parser: argparse.ArgumentParser, help: str) -> None:
    """An optional positional DEST and an `--out DEST` option naming the same output."""
    parser.add_argument("dest", nargs="?", metavar="DEST", help=f"{help} (or --out DEST)")
    parser.add_argument("--out", metavar="DEST", help="the same as the positional DEST")


def output(args: argparse.Namespace) -> str:
    """The output the user named, either way; UserError if none, or two that differ."""
    if args.dest and args.out and args.dest != args.out:
        raise UserError(f"DEST {args.dest!r} and --out {args.out!r} name different outputs; "
                        "give one of them.")
    path = args.dest or args.out
    if not path:
        raise UserError("no output given: name it as the last argument (DEST) or with --out DEST.")
    return str(path)


def import_from_working_dir() -> None:
    """Policies and scorers named 'module:function' are found in the working directory too, as
    `python -m` would find them. The one place a command adds to sys.path."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
