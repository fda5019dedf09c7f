"""aiohttp server: the page, one WebSocket per tab, roles, FPS stats, saving recordings.

One tab controls (its keys move the action, its buttons record and reset); other tabs watch.
A reconnecting tab presents the tab id it chose and gets its role back. A controller that
disconnects leaves the simulation running with no keys held, and the recording intact.
Every request but the static files needs the launch's secret token and, from a browser, the
page's own origin (access.py); messages to tabs name files, never where they lie on this machine.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import uuid
from collections import deque
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import WSMsgType, web

from pipeline.teleop.access import Access, page_headers, scrub_paths
from pipeline.teleop.loop import Command, SimLoop, TickPacket
from pipeline.teleop.protocol import RateMeter, clean_input, is_index, parse_message
from pipeline.teleop.recording import EpisodeWriter, SavedEpisode
from schemas.errors import UserError
from sim_model.data.episode import Episode

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
MAX_IN_FLIGHT = 2  # frames sent but not yet drawn; beyond this a slow tab skips frames
ACK_TIMEOUT_S = 2.0  # a frame not acknowledged by then counts as lost (e.g. a hidden tab)
STATS_PERIOD_S = 0.5


@dataclass
class Client:
    id: int
    tab: str  # chosen by the tab, kept across its reconnects: it gets its role back
    ws: web.WebSocketResponse
    in_flight: dict[int, float] = field(default_factory=dict)  # seq -> send time
    acks: RateMeter = field(default_factory=RateMeter)
    latency: deque[float] = field(default_factory=lambda: deque(maxlen=20))
    skipped: int = 0
    delivered: int = 0  # frames this tab acknowledged as drawn


class TeleopServer:
    def __init__(self, sim: SimLoop, writer: EpisodeWriter | None, *, hello: dict,
                 token: str | None = None) -> None:
        self.sim = sim
        self.access = Access(token)  # token None: a new secret for this launch
        self.base_url = ""  # http://HOST:PORT/ once started
        self.writer = writer
        self.hello = hello
        self.clients: dict[int, Client] = {}
        self.controller: int | None = None
        self.controller_tab: str | None = None
        self.saved: list[SavedEpisode] = []
        self.failure: BaseException | None = None
        self._next_id = 0
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._saves: set[asyncio.Future] = set()
        self._sends: set[asyncio.Task] = set()  # keeps send tasks alive until done
        self._runner: web.AppRunner | None = None
        # One writer thread: appends to the store happen one at a time, off the sim thread.
        self._writer_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="teleop-writer")

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def token(self) -> str:
        return self.access.token

    async def start(self, host: str = "127.0.0.1", port: int = 8765) -> str:
        """Listen; returns the page's address, secret token included."""
        self.access.bind_host = host
        app = web.Application(middlewares=[self.access.middleware])
        app.router.add_get("/", self._index)
        app.router.add_get("/ws", self._websocket)
        app.router.add_get("/api/status", self._status)
        app.router.add_static("/static", STATIC)
        self._runner = web.AppRunner(app, shutdown_timeout=2.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        try:
            await site.start()
        except OSError as error:
            await self._runner.cleanup()
            self._runner = None
            raise UserError(f"cannot listen on {host}:{port} ({error.strerror}); pick another "
                            "--port, or --port 0 for any free one.") from None
        bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._tasks = [asyncio.create_task(self._run_sim()), asyncio.create_task(self._run_stats())]
        self.base_url = f"http://{host}:{bound}/"
        return f"{self.base_url}?token={self.token}"

    async def wait(self) -> None:
        await self._stop.wait()

    def request_stop(self) -> None:
        self._stop.set()

    async def stop(self) -> None:
        """Stop ticking, drop an unfinished recording, finish pending saves, close sockets."""
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        session = self.sim.session
        if session.recording is not None:
            steps = session.discard_recording()
            log.warning("shutting down mid-recording: %d unsaved steps discarded", steps)
        if self._saves:
            await asyncio.gather(*self._saves, return_exceptions=True)
        for client in list(self.clients.values()):
            await client.ws.close(code=1001, message=b"server shutting down")
        if self._runner is not None:
            await self._runner.cleanup()
        self.sim.pool.shutdown(wait=True)
        self._writer_pool.shutdown(wait=True)

    async def _run_sim(self) -> None:
        try:
            await self.sim.run(self._stop, self._publish)
        except Exception as error:  # a model failure is fatal: report it, don't spin on it
            log.exception("simulation step failed; stopping the server")
            self.failure = error
            self._stop.set()

    # -- HTTP -----------------------------------------------------------------------------------
    async def _index(self, request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "index.html", headers=page_headers(request.host))

    async def _status(self, request: web.Request) -> web.Response:
        return web.json_response({**self.sim.status, "stats": self._stats(None),
                                  "saved": [s.for_page() for s in self.saved]})

    # -- WebSocket ------------------------------------------------------------------------------
    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=10.0, max_msg_size=1 << 16)
        await ws.prepare(request)
        tab = request.query.get("tab", "")[:64] or uuid.uuid4().hex
        self._next_id += 1
        client = Client(self._next_id, tab, ws)
        self.clients[client.id] = client
        if self.controller not in self.clients or tab == self.controller_tab:
            self._set_controller(client, announce=False)  # the hello carries the role
        try:
            hello = {**self.hello, "type": "hello", "client_id": client.id, "tab": tab,
                     "role": self._role(client), "status": self.sim.status, "saved": len(self.saved)}
            await ws.send_str(scrub_paths(json.dumps(hello)))
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self._on_message(client, message.data)
        except ConnectionError:
            pass  # the tab left before its hello went out
        finally:
            self.clients.pop(client.id, None)
            if self.controller == client.id:
                # Keys held in a tab that vanished must not keep moving the robot.
                self.controller = None
                self.sim.submit(Command(None, "input", {}))
                log.info("controlling tab %d disconnected; simulation continues", client.id)
        return ws

    def _role(self, client: Client) -> str:
        return "controller" if self.controller == client.id else "watcher"

    def _set_controller(self, client: Client, announce: bool = True) -> None:
        previous = self.clients.get(self.controller) if self.controller is not None else None
        self.controller, self.controller_tab = client.id, client.tab
        self.sim.submit(Command(None, "input", {}))  # nothing is held by the new controller yet
        if previous is not None and previous is not client:
            self._send(previous, {"type": "role", "role": "watcher"})
        if announce:
            self._send(client, {"type": "role", "role": "controller"})

    def _on_message(self, client: Client, text: str) -> None:
        data = parse_message(text)
        if data is None:
            self._send(client, {"type": "error", "message": "malformed message"})
            return
        kind = data["type"]
        if kind == "ack":
            self._on_ack(client, data.get("seq"))
        elif kind == "take_control":
            self._set_controller(client)
        elif self.controller != client.id:
            if kind != "input":  # watchers' keys are ignored silently
                self._send(client, {"type": "error", "message": "this tab is watching; press "
                                    "'Take control' to drive the simulation."})
        elif kind == "input":
            self.sim.submit(Command(client.id, "input", clean_input(data)))
        elif kind == "record" and data.get("action") in ("start", "stop", "discard"):
            task = data.get("task")
            self.sim.submit(Command(client.id, "record", {
                "action": data["action"], "task": task[:500] if isinstance(task, str) else None}))
        elif kind == "reset" and is_index(data.get("frame", 0)) and (
                data.get("episode") is None or is_index(data.get("episode"))):
            self.sim.submit(Command(client.id, "reset", {"episode": data.get("episode"),
                                                         "frame": data.get("frame", 0)}))
        else:
            self._send(client, {"type": "error", "message": f"bad {kind!r} message"})

    def _on_ack(self, client: Client, seq: object) -> None:
        if not isinstance(seq, int) or seq not in client.in_flight:
            return
        now = time.monotonic()
        client.latency.append(now - client.in_flight[seq])
        client.acks.add(now)
        client.delivered += 1
        for old in [s for s in client.in_flight if s <= seq]:
            del client.in_flight[old]

    # -- publishing -----------------------------------------------------------------------------
    def _publish(self, packet: TickPacket) -> None:
        now = time.monotonic()
        for client in list(self.clients.values()):
            for seq in [s for s, sent in client.in_flight.items() if now - sent > ACK_TIMEOUT_S]:
                del client.in_flight[seq]
            if len(client.in_flight) >= MAX_IN_FLIGHT:
                client.skipped += 1  # the tab is behind: send it the newest frame later instead
                continue
            client.in_flight[packet.seq] = now
            self._spawn(self._send_bytes(client, packet.payload))
        for client_id, message in packet.replies:
            if client_id is None:
                self._broadcast(message)
            elif client_id in self.clients:
                self._send(self.clients[client_id], message)
        for episode in packet.finished:
            self._save(episode)

    def _save(self, episode: Episode) -> None:
        if self.writer is None:
            return
        future = asyncio.get_running_loop().run_in_executor(self._writer_pool, self.writer.save, episode)
        self._saves.add(future)
        future.add_done_callback(self._saved)

    def _saved(self, future: asyncio.Future) -> None:
        self._saves.discard(future)
        if future.exception() is not None:
            log.error("saving a teleop episode failed: %s", future.exception())
            self._broadcast({"type": "error", "message": f"saving failed: {future.exception()}"})
            return
        saved: SavedEpisode = future.result()
        self.saved.append(saved)
        self._broadcast({"type": "saved", **saved.for_page(), "count": len(self.saved)})

    def _send(self, client: Client, message: dict) -> None:
        if not client.ws.closed:  # errors can quote a path: tabs learn file names only
            self._spawn(self._send_text(client, scrub_paths(json.dumps(message))))

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    def _broadcast(self, message: dict) -> None:
        for client in list(self.clients.values()):
            self._send(client, message)

    @staticmethod
    async def _send_bytes(client: Client, payload: bytes) -> None:
        try:
            await client.ws.send_bytes(payload)
        except (ConnectionError, RuntimeError):
            pass  # the tab went away; its handler cleans up

    @staticmethod
    async def _send_text(client: Client, text: str) -> None:
        try:
            await client.ws.send_str(text)
        except (ConnectionError, RuntimeError):
            pass

    # -- stats ----------------------------------------------------------------------------------
    def _stats(self, client: Client | None) -> dict:
        now = time.monotonic()
        stats: dict[str, object] = {"sim_fps": round(self.sim.steps.rate(now), 2),
                 "target_fps": self.sim.fps, "dropped_ticks": self.sim.dropped,
                 "clients": len(self.clients)}
        if client is not None:
            latency = sum(client.latency) / len(client.latency) if client.latency else math.nan
            stats.update(delivered_fps=round(client.acks.rate(now), 2), skipped=client.skipped,
                         latency_ms=None if math.isnan(latency) else round(latency * 1e3, 1),
                         role=self._role(client))
        else:
            stats["delivered_fps"] = {str(c.id): round(c.acks.rate(now), 2) for c in self.clients.values()}
        return stats

    async def _run_stats(self) -> None:
        while not self._stop.is_set():
            for client in list(self.clients.values()):
                self._send(client, {"type": "stats", **self._stats(client)})
            try:
                await asyncio.wait_for(self._stop.wait(), STATS_PERIOD_S)
            except TimeoutError:
                pass

