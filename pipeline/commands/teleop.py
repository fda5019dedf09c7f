"""`iws teleop`: drive the world model live from a browser tab and record demonstrations."""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import signal
from pathlib import Path

from schemas.errors import UserError

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "teleop", help="drive the world model from a browser page and record demonstrations",
        description="Serve a page showing the world model live, every camera side by side; "
        "keyboard or gamepad move the action; recordings are saved to an episode store. Default "
        "keys: a 2-D action (PushT) moves with the arrows or WASD and the left stick; a 4-D "
        "action (two arms, e.g. sweep's x0 y0 x1 y1) moves the first arm with WASD and the left "
        "stick, the second with the arrows or IJKL and the right stick; a gripper (the mug's x y z "
        "grip) moves over the table with the arrows or WASD, up and down with R/F, closes and "
        "opens with C/O; Shift for fine moves, "
        "Space to record. The page's Controls panel lists the keys in use. The address printed "
        "at start carries this launch's secret token: only it opens the page. See docs/teleop.md.")
    from pipeline.tasks.registry import default_task

    model = default_task().bundled_model  # the registry's first task gives the defaults
    parser.add_argument("--model", default=model, required=model is None,
                        help=f"checkpoint directory or bundled model name (default: {model})")
    parser.add_argument("--init", required=True, metavar="DATASET[:EPISODE]",
                        help="where the first frame comes from: an episode store, a LeRobot "
                        "dataset, an image or a folder of images; optionally the episode (image) "
                        "to start from, default 0; e.g. data/pusht.zarr:3 or examples/pusht_init")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free one)")
    parser.add_argument("--record-to", metavar="PATH",
                        help="episode store recordings are appended to (created if missing); "
                        "without it the page cannot record")
    parser.add_argument("--actions-dir", metavar="DIR",
                        help="where JSONL action logs go (default: <record-to stem>_actions/)")
    parser.add_argument("--fps", type=float,
                        help="sim steps per second (default: the model's fps)")
    parser.add_argument("--mapping", metavar="FILE",
                        help="YAML key/gamepad mapping (default: teleop.yaml beside the checkpoint, "
                        "else the default keys above)")
    parser.add_argument("--task", default="", help="task text stored with every recording")
    parser.add_argument("--max-steps", type=int,
                        help="stop and save a recording automatically after this many steps")
    parser.add_argument("--device", default="cpu", help="torch device for the model (default cpu)")
    parser.add_argument("--precision", choices=("auto", "fp32", "bf16"),
                        help="inference precision (default: the checkpoint's setting)")
    parser.add_argument("--threads", type=int,
                        help="torch CPU threads (default: torch's choice; 1 is often fastest at "
                        "batch 1 on a busy machine, see docs/teleop.md)")
    parser.add_argument("--codec", choices=("jpeg", "webp"), default="jpeg",
                        help="image codec on the wire (default jpeg)")
    parser.add_argument("--quality", type=int, default=90, help="image quality 1-100 (default 90)")
    parser.set_defaults(func=run)


def parse_init(value: str) -> tuple[str, int]:
    """'data.zarr:3' -> ('data.zarr', 3); 'data.zarr' -> ('data.zarr', 0)."""
    match = re.fullmatch(r"(.+?):(\d+)", value)
    return (match.group(1), int(match.group(2))) if match else (value, 0)


def _check_args(args: argparse.Namespace) -> None:
    if args.fps is not None and not 0 < args.fps <= 240:
        raise UserError(f"--fps {args.fps} is out of range; give a rate in (0, 240] steps per second.")
    if args.max_steps is not None and args.max_steps < 1:
        raise UserError(f"--max-steps {args.max_steps} must be at least 1.")
    if not 1 <= args.quality <= 100:
        raise UserError(f"--quality {args.quality} must be between 1 and 100.")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port} is not a TCP port; use 0..65535.")
    if args.threads is not None and args.threads < 1:
        raise UserError(f"--threads {args.threads} must be at least 1.")
    if args.actions_dir and not args.record_to:
        raise UserError("--actions-dir only makes sense with --record-to PATH.")


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    server = build_server(args)
    asyncio.run(serve(server, args.host, args.port))
    if server.failure is not None:
        raise server.failure
    return 0


def build_server(args: argparse.Namespace):  # -> TeleopServer (import kept inside: torch)
    from pipeline.teleop.loop import SimLoop
    from pipeline.teleop.mapping import resolve_mapping
    from pipeline.teleop.protocol import hello_message
    from pipeline.teleop.recording import EpisodeWriter
    from pipeline.teleop.server import TeleopServer
    from pipeline.teleop.session import InitFrames, TeleopSession
    from sim_model.world_model import WorldModel

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)  # the CLI owns this process; a library would not
    model = WorldModel.load(args.model, device=args.device, precision=args.precision)
    features = model.features
    dataset, episode = parse_init(args.init)
    init = InitFrames(dataset, features)
    if episode >= len(init):
        raise UserError(f"--init {dataset}:{episode}: episode {episode} is out of range; "
                        f"{dataset} has episodes 0..{len(init) - 1}.")
    checkpoint = Path(args.model) if Path(args.model).is_dir() else None
    mapper = resolve_mapping(features, args.mapping, checkpoint)
    writer = None
    if args.record_to:
        writer = EpisodeWriter(args.record_to, features, has_state=model.has_state,
                               actions_dir=args.actions_dir)
    session = TeleopSession(model, init, mapper, episode=episode, task=args.task,
                            max_steps=args.max_steps)
    fps = args.fps or features.fps
    sim = SimLoop(session, fps=fps, codec=args.codec, quality=args.quality,
                  recording_enabled=writer is not None)
    hello = hello_message(features, mapper.legend(), tick_fps=fps, model=str(args.model),
                          init_path=dataset, init_episodes=len(init), task=args.task,
                          max_steps=args.max_steps, record_to=args.record_to)
    return TeleopServer(sim, writer, hello=hello)


async def serve(server, host: str, port: int) -> None:
    """Run until Ctrl-C / SIGTERM (or a fatal model error), then shut down cleanly."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, server.request_stop)
    try:
        url = await server.start(host, port)
        log.info("teleop page at %s  (Ctrl-C to stop)", url)
        await server.wait()
    finally:
        await server.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        log.info("stopped; %d recording(s) saved this session", len(server.saved))
