"""Achieved teleop FPS at batch 1: sim steps/s and frames drawn/s by a real browser tab.

Runs the real `iws teleop` server (in-process, its own thread) on a randomly initialised
world model at 96x96 PushT features; a headless Chromium tab (Debian's /usr/bin/chromium
driven by Playwright) or, with `--client ws`, a plain WebSocket client in a subprocess draws
and acknowledges frames. Speed does not depend on the weights, so random weights measure the
same cost as trained ones of the same preset. Also times the stages of one tick offline.

    .venv/bin/python benchmarks/bench_teleop.py [--presets tiny small] [--rates 10 30 1000]
        [--seconds 8] [--threads 1] [--precision fp32] [--client chromium|ws]
        [--model CKPT] [--init SOURCE] [--screenshot docs/teleop.png]

A rate above what the machine sustains (e.g. 1000) shows the ceiling: ticks are dropped,
never queued. `--model` measures a checkpoint (e.g. the bundled 'pusht') instead of random
presets; `--screenshot` saves the page mid-recording after the first row (docs/teleop.png).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from pipeline.pusht.features import pusht_features
from pipeline.teleop.loop import SimLoop
from pipeline.teleop.mapping import resolve_mapping
from pipeline.teleop.protocol import encode_image, hello_message, pack_frame
from pipeline.teleop.recording import EpisodeWriter
from pipeline.teleop.server import TeleopServer
from pipeline.teleop.session import InitFrames, TeleopSession
from schemas import EpisodeMeta
from sim_model.data.episode import Episode
from sim_model.data.store import EpisodeStore
from sim_model.world_model import WorldModel

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WS_CLIENT = """
import asyncio, json, struct, sys, aiohttp
async def main(url, seconds):
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        loop = asyncio.get_running_loop(); end = loop.time() + seconds
        while loop.time() < end:
            msg = await ws.receive()
            if msg.type == aiohttp.WSMsgType.BINARY:
                n = struct.unpack_from("<I", msg.data)[0]
                await ws.send_str(json.dumps({"type": "ack", "seq": json.loads(msg.data[4:4 + n])["seq"]}))
asyncio.run(main(sys.argv[1], float(sys.argv[2])))
"""


def init_store(path: Path, resolution: int) -> EpisodeStore:
    features = pusht_features(resolution)
    store = EpisodeStore.create(path, features)
    frames = np.full((2, resolution, resolution, 3), 240, np.uint8)
    frames[:, resolution // 3: resolution // 2, resolution // 4: 3 * resolution // 4] = (119, 136, 153)
    extras = {"block_pose": np.zeros((2, 3), np.float32), "coverage": np.zeros(2, np.float32),
              "success": np.zeros(2, bool)}
    store.append(Episode(frames={"top": frames}, action=np.full((2, 2), 256, np.float32),
                         state=np.full((2, 2), 256, np.float32), extras=extras,
                         meta=EpisodeMeta(episode_id="bench", length=2)))
    return store


def stage_times(model: WorldModel, frame: np.ndarray, steps: int = 30) -> dict[str, float]:
    action = np.full((1, 2), 256, np.float32)
    for _ in range(3):
        model.step(action)
    t0 = time.perf_counter()
    for _ in range(steps):
        out = model.step(action).frames
    step_ms = (time.perf_counter() - t0) / steps * 1e3
    t0 = time.perf_counter()
    for _ in range(steps):
        jpeg = encode_image(out[0, 0])
    encode_ms = (time.perf_counter() - t0) / steps * 1e3
    png = io.BytesIO()
    Image.fromarray(out[0, 0]).save(png, format="PNG")
    message = pack_frame({"seq": 1, "step": 1, "action": [256.0, 256.0]}, [("top", jpeg)])
    return {"step_ms": step_ms, "encode_ms": encode_ms, "msg_bytes": len(message),
            "png_b64_bytes": len(base64.b64encode(png.getvalue()))}


class ServerThread:
    """The real TeleopServer on its own event loop, so the client can be driven from here."""

    def __init__(self, server: TeleopServer) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        started = threading.Event()

        async def main() -> None:
            self.url = await server.start("127.0.0.1", 0)
            started.set()
            await server.wait()
            await server.stop()

        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(main(),))
        self.thread.start()
        started.wait(60)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.request_stop)
        self.thread.join(30)


def measure(server: TeleopServer, url: str, args: argparse.Namespace, screenshot: str | None) -> dict:
    def sample() -> tuple[float, int, int, int]:
        tabs = list(server.clients.values())
        return (time.monotonic(), server.sim.seq, server.sim.dropped,
                sum(c.delivered for c in tabs))

    def window() -> dict:
        time.sleep(args.warmup)
        t0, s0, d0, a0 = sample()
        time.sleep(args.seconds)
        t1, s1, d1, a1 = sample()
        latency = [x for c in list(server.clients.values()) for x in c.latency]
        return {"sim_fps": (s1 - s0) / (t1 - t0), "shown_fps": (a1 - a0) / (t1 - t0),
                "dropped": d1 - d0,
                "latency_ms": 1e3 * float(np.mean(latency)) if latency else float("nan")}

    if args.client == "ws":
        ws_url = f"{server.base_url}ws?token={server.token}&tab=bench"
        proc = subprocess.Popen([sys.executable, "-c", WS_CLIENT, ws_url,
                                 str(args.seconds + args.warmup + 5)])
        try:
            return window()
        finally:
            proc.kill()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1000, "height": 900})
        try:
            page = context.new_page()
            page.goto(url)
            result = window()
            if screenshot:
                take_screenshot(page, screenshot)
            return result
        finally:
            context.close()


def take_screenshot(page, path: str) -> None:
    """The page mid-recording, after the target was moved right, then down: ~120 and ~80 of
    PushT's 512 units at the default key speed, so it stays inside the 25-487 the training data
    covers (held longer, the target reaches the wall, where the model has not seen the agent)."""
    page.keyboard.down("ArrowRight")
    page.click("#rec-start")
    time.sleep(0.6)
    page.keyboard.up("ArrowRight")
    page.keyboard.down("ArrowDown")
    time.sleep(0.4)
    page.keyboard.up("ArrowDown")
    time.sleep(1.0)
    page.screenshot(path=path, full_page=True)


def run_one(model: WorldModel, name: str, rate: float, args: argparse.Namespace, tmp: Path,
            screenshot: str | None) -> dict:
    features = model.features
    if args.init:
        init_path = Path(args.init)
    else:
        init_path = tmp / f"init-{len(list(tmp.iterdir()))}.zarr"
        init_store(init_path, features.cameras[0].height)
    init = InitFrames(init_path, features)
    mapper = resolve_mapping(features)
    session = TeleopSession(model, init, mapper, task="Push the T onto the green target")
    stages = stage_times(model, session.frames[features.camera_names[0]])
    session.reset(0, 0)
    record_to = tmp / f"rec-{len(list(tmp.iterdir()))}.zarr"
    writer = EpisodeWriter(record_to, features, has_state=model.has_state)
    hello = hello_message(features, mapper.legend(), tick_fps=rate, model=name,
                          init_path=str(init_path), init_episodes=len(init), task=session.task,
                          record_to=str(record_to))
    runner = ServerThread(TeleopServer(SimLoop(session, fps=rate), writer, hello=hello))
    try:
        result = measure(runner.server, runner.url, args, screenshot)
    finally:
        runner.close()
    params = sum(p.numel() for p in model.net.parameters()) / 1e6
    return {"name": name, "params_m": params, "rate": rate, **stages, **result}


def models(args: argparse.Namespace):
    """(name, model) pairs: the checkpoint given, else each random preset."""
    if args.model:
        yield args.model, WorldModel.load(args.model, precision=args.precision)
        return
    for preset in args.presets:
        yield f"random {preset}", WorldModel.random(pusht_features(args.resolution), preset=preset,
                                                    precision=args.precision)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", default=["tiny", "small"])
    parser.add_argument("--model", help="checkpoint dir or bundled name instead of random presets")
    parser.add_argument("--init", help="init frames (store, LeRobot dataset, image folder); "
                        "default: a synthetic one-episode store")
    parser.add_argument("--rates", nargs="+", type=float, default=[10, 30, 1000])
    parser.add_argument("--resolution", type=int, default=96)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto")
    parser.add_argument("--client", choices=("chromium", "ws"),
                        default="chromium" if shutil.which(CHROMIUM) else "ws")
    parser.add_argument("--screenshot", help="save a screenshot of the page (first row) here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"# teleop batch 1, {args.precision}, torch threads {args.threads}, client "
          f"{args.client}, {args.seconds:.0f} s per row, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at start\n")
    print("| model | params | target Hz | sim steps/s | frames shown/s | dropped ticks | "
          "latency ms | model step ms | JPEG encode ms | message bytes | base64 PNG bytes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    shot = args.screenshot if args.client == "chromium" else None
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in models(args):
            for rate in args.rates:
                r = run_one(model, name, rate, args, Path(tmp), shot)
                shot = None
                print(f"| {r['name']} | {r['params_m']:.2f} M | {r['rate']:g} | {r['sim_fps']:.1f} | "
                      f"{r['shown_fps']:.1f} | {r['dropped']} | {r['latency_ms']:.1f} | "
                      f"{r['step_ms']:.1f} | {r['encode_ms']:.2f} | {r['msg_bytes']} | "
                      f"{r['png_b64_bytes']} |", flush=True)


if __name__ == "__main__":
    main()
