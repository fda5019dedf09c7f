"""`iws import SRC DEST` (or `--out DEST`): copy a LeRobot v3.0 dataset or Diffusion-Policy
Zarr store into an iws episode store (frames decoded once; every frame and action kept)."""

from __future__ import annotations

import argparse

from pipeline.commands.paths import add_output, output


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("import", help="copy a LeRobot or Diffusion-Policy dataset into an "
                            "iws episode store", description=__doc__)
    parser.add_argument("src", help="LeRobot v3.0 dataset root or Diffusion-Policy Zarr store")
    add_output(parser, "new iws episode store (an interrupted import resumes)")
    parser.add_argument("--keys", help="DP stores: name arrays, iws=dp pairs, e.g. "
                        "top=img,state=state,action=action")
    parser.add_argument("--fps", type=float, help="DP stores: control rate (default 10)")
    parser.add_argument("--task", default="", help="DP stores: task text for every episode")
    parser.add_argument("--overwrite", action="store_true", help="replace DEST if it exists")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from sim_model.data.formats import check_apart, import_dataset, open_dataset
    from sim_model.data.formats.zarr_dp_writer import parse_key_map

    out = output(args)
    check_apart(args.src, out)  # the path as given: an s3:// source is read from a local copy
    options = {}
    if args.keys or args.fps is not None or args.task:
        options = {"keys": parse_key_map(args.keys), "fps": args.fps, "task": args.task}
    source = open_dataset(args.src, **options)
    with tqdm(total=source.n_frames, unit="frame", desc="import") as bar:
        dest = import_dataset(source, out, overwrite=args.overwrite, on_episode=bar.update)
    print(f"imported {len(source)} episodes ({source.n_frames} frames) into {dest}")
    return 0
