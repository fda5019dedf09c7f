"""`iws export {lerobot,zarr-dp} SRC DEST` (or `--out DEST`): write a dataset in a trainer's own
format."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from pipeline.commands.paths import add_output, output

if TYPE_CHECKING:
    from collections.abc import Callable

    from schemas import FeatureSpec
    from sim_model.data.formats import EpisodeSource

VCODECS = ("libsvtav1", "h264", "hevc", "auto")  # mirrors sim_model.data.formats.lerobot_writer.VCODECS
CODEBASES = ("v3.0", "v2.1")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("export", help="write a dataset as LeRobot (v3.0, v2.1) or Diffusion-Policy Zarr",
                            description="SRC may be an iws episode store, a Diffusion-Policy Zarr "
                            "store or a LeRobot v3.0 or v2.1 dataset root.")
    formats = parser.add_subparsers(dest="format", required=True, metavar="FORMAT")

    lerobot = formats.add_parser("lerobot", help="LeRobot v3.0 dataset (lerobot-train reads it), or "
                                 "v2.1 (openpi, GR00T: --codebase v2.1)")
    _common(lerobot)
    lerobot.add_argument("--codebase", choices=CODEBASES, default="v3.0",
                         help="LeRobot layout: v3.0 (lerobot 0.4+, lerobot-train; default) or v2.1 "
                         "(openpi's pi0/pi0.5 and GR00T N1.x fine-tuning; docs/lerobot.md)")
    lerobot.add_argument("--groot", action="store_true",
                         help="with --codebase v2.1: also write meta/modality.json for GR00T")
    lerobot.add_argument("--embodiment", default="new_embodiment",
                         help="with --groot: GR00T's embodiment tag, kept as robot_type in "
                         "meta/info.json (default new_embodiment, GR00T's tag for a new robot)")
    lerobot.add_argument("--repo-id", help="dataset id, e.g. iws/pusht_gen (default: iws/<DEST name>)")
    lerobot.add_argument("--task", help="task text for episodes that have none")
    lerobot.add_argument("--vcodec", choices=VCODECS,
                         help="video codec (v3.0: default libsvtav1 = AV1, lerobot's default, h264 "
                         "for frames under 32 px; v2.1: default h264, which every reader decodes)")
    lerobot.add_argument("--workers", type=int, default=1,
                         help="parallel writers merged with lerobot's aggregation (default 1; "
                         "see benchmarks/results/export.md); datasets with a multi-dimensional "
                         "feature, such as sweep's disc centres, always use one")
    lerobot.add_argument("--camera-key", action="append", metavar="[CAMERA=]KEY",
                         help="LeRobot key of a camera instead of observation.images.CAMERA, e.g. "
                         "observation.image, the camera key of lerobot-eval --env.type=pusht "
                         "(repeat for several cameras; docs/lerobot.md)")
    lerobot.set_defaults(func=run)

    dp = formats.add_parser("zarr-dp", help="Diffusion-Policy ReplayBuffer Zarr (zarr format 2)")
    _common(dp)
    dp.add_argument("--keys", help="rename arrays, iws=dp pairs, e.g. top=image,state=agent_pos "
                    "(default: a single camera is written as img, as Diffusion Policy's PushT "
                    "dataset reads it; other arrays keep their names)")
    dp.set_defaults(func=run)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", help="source dataset")
    add_output(parser, "output directory (must not exist unless --overwrite)")
    parser.add_argument("--overwrite", action="store_true", help="replace DEST if it exists")
    parser.add_argument("--no-verify", dest="verify", action="store_false",
                        help="do not check each episode of a job's dataset against the checksum it "
                        "was committed with (checked by default: a damaged episode stops the export)")


def run(args: argparse.Namespace) -> int:
    from pipeline.commands.progress import LazyBar, quiet_logging
    from sim_model.data.formats import check_apart, open_dataset
    from sim_model.data.formats.lerobot_writer import quiet_encoders

    quiet_encoders()
    out = output(args)
    check_apart(args.src, out)  # the path as given: an s3:// source is read from a local copy
    source = open_dataset(args.src, verify=args.verify)
    with quiet_logging(getattr(args, "verbose", False)), LazyBar(
            total=source.n_frames, unit="frame",
            desc=f"export {args.format}") as bar:
        if args.format == "lerobot":
            dest = _export_lerobot(args, source, out, bar.update)
        else:
            from sim_model.data.formats.zarr_dp_writer import export_zarr_dp, parse_key_map

            keys = parse_key_map(args.keys)
            dest = export_zarr_dp(source, out, keys=keys, overwrite=args.overwrite,
                                  on_episode=bar.update)
    print(f"wrote {len(source)} episodes ({source.n_frames} frames) to {dest}"
          + (f" (LeRobot {args.codebase})" if args.format == "lerobot" else ""))
    if args.format == "zarr-dp":
        print(_dp_arrays_note(source.features, keys))
    return 0


def _export_lerobot(args: argparse.Namespace, source: EpisodeSource, out: str,
                    on_episode: Callable[[int], None]) -> object:
    from schemas.errors import UserError
    from sim_model.data.formats.lerobot_features import parse_camera_keys

    cameras = parse_camera_keys(args.camera_key, source.features.camera_names)
    if args.codebase == "v3.0":
        from sim_model.data.formats.lerobot_writer import export_lerobot

        if args.groot:
            raise UserError("--groot writes GR00T's modality file into a v2.1 dataset; add --codebase v2.1.")
        return export_lerobot(source, out, repo_id=args.repo_id, task=args.task,
                              vcodec=args.vcodec or "libsvtav1", workers=args.workers,
                              camera_keys=cameras, overwrite=args.overwrite, on_episode=on_episode)
    from sim_model.data.formats.lerobot_v21 import export_lerobot_v21

    if args.vcodec == "auto":
        raise UserError("--vcodec auto picks a hardware encoder for v3.0 only; give h264, hevc or libsvtav1.")
    return export_lerobot_v21(source, out, task=args.task, vcodec=args.vcodec or "h264",
                              workers=args.workers, camera_keys=cameras, groot=args.groot,
                              embodiment=args.embodiment, overwrite=args.overwrite,
                              on_episode=on_episode)


def _dp_arrays_note(features: FeatureSpec, keys: dict[str, str]) -> str:
    """Which arrays the store holds under data/, and how to name them otherwise."""
    from sim_model.data.formats.zarr_dp_writer import resolve_dp_keys

    mapping = resolve_dp_keys(features, keys)
    names = ", ".join(dp if dp == key else f"{dp} (from {key})" for key, dp in mapping.items())
    return (f"arrays under data/: {names}; episode ends in meta/episode_ends. "
            "Rename with --keys iws_key=dp_key, e.g. --keys top=image.")
