"""The real aiohttp server with real WebSocket clients: roles, reconnects, slow tabs, saving."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import numpy as np
import pytest
from yarl import URL

from pipeline.cli import build_parser
from pipeline.commands.teleop import build_server
from pipeline.teleop.protocol import unpack_frame
from pipeline.teleop.server import TeleopServer
from sim_model.data.store import EpisodeStore

STEP = 0.4 * 512 / 10


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make_server(tiny_checkpoint: Path, store: EpisodeStore, record_to: Path | None,
                *extra: str) -> TeleopServer:
    argv = ["teleop", "--model", str(tiny_checkpoint), "--init", f"{store.path}:1",
            "--precision", "fp32", "--fps", "20", *extra]
    if record_to is not None:
        argv += ["--record-to", str(record_to)]
    return build_server(build_parser().parse_args(argv))


class Tab:
    """A scripted browser tab: reads frames (acking them unless told not to), keeps messages."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, hello: dict, ack: bool = True) -> None:
        self.ws, self.hello, self.ack = ws, hello, ack
        self.messages: list[dict] = []

    @classmethod
    async def open(cls, http: aiohttp.ClientSession, url: str, tab: str, ack: bool = True,
                   **connect: object) -> Tab:
        """`url`: the page's address as the server printed it (with its ?token=...)."""
        ws = await http.ws_connect(ws_url(url, tab), **connect)
        while True:
            message = await ws.receive_json(timeout=10)
            if message["type"] == "hello":
                return cls(ws, message, ack)

    async def send(self, **message: object) -> None:
        await self.ws.send_json(message)

    async def frame(self) -> dict:
        while True:
            message = await self.ws.receive(timeout=10)
            if message.type == aiohttp.WSMsgType.BINARY:
                header, _ = unpack_frame(message.data)
                if self.ack:
                    await self.send(type="ack", seq=header["seq"])
                return header
            if message.type != aiohttp.WSMsgType.TEXT:
                raise ConnectionError(f"socket closed: {message.type}")
            self.messages.append(json.loads(message.data))

    async def until(self, predicate, limit: int = 200) -> dict:
        for _ in range(limit):
            header = await self.frame()
            if predicate(header):
                return header
        raise AssertionError("condition not reached")

    async def message(self, kind: str, limit: int = 200) -> dict:
        for _ in range(limit):
            found = [m for m in self.messages if m["type"] == kind]
            if found:
                self.messages.remove(found[0])
                return found[0]
            await self.frame()
        raise AssertionError(f"no {kind!r} message")


def ws_url(page_url: str, tab: str, token: str | None = None) -> str:
    """The socket a tab opens: /ws with the page's token (or `token`) and its tab id."""
    page = URL(page_url)
    return str(page.with_path("/ws").with_query(token=token or page.query["token"], tab=tab))


async def serve(server: TeleopServer, scenario) -> None:
    url = await server.start("127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession() as http:
            await scenario(http, url)
    finally:
        await server.stop()


def test_reconnect_and_extra_tabs_do_not_corrupt_a_recording(
        tiny_checkpoint: Path, tiny_pusht_store: EpisodeStore, tmp_path: Path) -> None:
    server = make_server(tiny_checkpoint, tiny_pusht_store, tmp_path / "demos.zarr")
    saved: dict = {}

    async def scenario(http: aiohttp.ClientSession, url: str) -> None:
        a = await Tab.open(http, url, "tab-a")
        b = await Tab.open(http, url, "tab-b")
        assert (a.hello["role"], b.hello["role"]) == ("controller", "watcher")
        await b.send(type="record", action="start")
        assert "watching" in (await b.message("error"))["message"]
        await b.send(type="input", keys=["ArrowLeft"])  # ignored: b does not control
        await a.send(type="input", keys=["ArrowRight"])
        await a.send(type="record", action="start")
        await a.until(lambda h: h["recording"] and h["recording"]["steps"] >= 3)
        await a.ws.close()  # the controlling tab vanishes mid-recording
        during = await b.until(lambda h: h["recording"] and h["recording"]["steps"] >= 8)
        assert during["recording"] is not None
        a = await Tab.open(http, url, "tab-a")  # same token: control comes back
        assert a.hello["role"] == "controller" and a.hello["status"]["recording"] is not None
        await a.send(type="record", action="stop")
        saved.update(await a.message("saved"))

    asyncio.run(serve(server, scenario))
    episode = EpisodeStore.open(tmp_path / "demos.zarr").episode(saved["index"])
    assert len(episode) == saved["length"] >= 8
    dx = np.diff(episode.action[:, 0])
    assert np.allclose(dx[:2], STEP)  # ArrowRight held at the start
    assert np.allclose(dx[-3:], 0)  # released when the tab disconnected: the target stays
    assert np.all(dx >= 0) and np.all(episode.action[:, 1] == episode.action[0, 1])
    assert (tmp_path / "demos_actions" / saved["log_name"]).is_file()


def test_take_control_and_a_tab_that_never_acknowledges(
        tiny_checkpoint: Path, tiny_pusht_store: EpisodeStore) -> None:
    server = make_server(tiny_checkpoint, tiny_pusht_store, None)

    async def scenario(http: aiohttp.ClientSession, url: str) -> None:
        a = await Tab.open(http, url, "a")
        slow = await Tab.open(http, url, "slow", ack=False)
        for _ in range(12):
            await a.frame()
        stats = await a.message("stats")
        for _ in range(10):  # the first stats can predate the server's first acknowledged frame
            if stats["delivered_fps"] > 0:
                break
            stats = await a.message("stats")
        assert stats["role"] == "controller" and stats["delivered_fps"] > 0
        assert stats["latency_ms"] is not None and stats["sim_fps"] > 0
        assert server.clients[2].skipped > 0  # at most 2 frames wait for a tab that is behind
        assert len(server.clients[2].in_flight) <= 2
        await slow.send(type="take_control")
        assert (await a.message("role"))["role"] == "watcher"
        await a.send(type="reset", episode=0, frame=0)
        assert "watching" in (await a.message("error"))["message"]
        slow.ack = True
        await slow.send(type="record", action="start")
        assert "--record-to" in (await slow.message("error"))["message"]
        await slow.send(type="reset", episode=2, frame=1)
        assert "episode 2 frame 1" in (await slow.message("info"))["message"]
        await slow.send(type="reset", episode="two")
        assert "bad 'reset'" in (await slow.message("error"))["message"]
        await slow.ws.send_str("{not json")
        assert "malformed" in (await slow.message("error"))["message"]

    asyncio.run(serve(server, scenario))


def test_page_static_files_and_status(tiny_checkpoint: Path, tiny_pusht_store: EpisodeStore) -> None:
    server = make_server(tiny_checkpoint, tiny_pusht_store, None)

    async def scenario(http: aiohttp.ClientSession, url: str) -> None:
        page = await (await http.get(url)).text()  # the printed address, token included
        assert "/static/teleop.js" in page
        for name in ("teleop.js", "teleop.css"):
            assert (await http.get(f"{server.base_url}static/{name}")).status == 200
        await asyncio.sleep(0.5)
        status = await (await http.get(f"{server.base_url}api/status?token={server.token}")).json()
        assert status["step"] > 0 and status["recording"] is None and status["saved"] == []
        assert status["stats"]["target_fps"] == 20

    asyncio.run(serve(server, scenario))


def test_deeply_nested_json_is_refused_and_the_socket_lives_on(
        tiny_checkpoint: Path, tiny_pusht_store: EpisodeStore, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 34: a message nested thousands deep (within the 64 KiB a message may hold) made
    json.loads raise RecursionError, which the server logged as an uncaught error and which
    closed the tab's socket. It is a malformed message like any other."""
    server = make_server(tiny_checkpoint, tiny_pusht_store, None)

    async def scenario(http: aiohttp.ClientSession, url: str) -> None:
        tab = await Tab.open(http, url, "a")
        for text in ("[" * 60000, '{"type": "input", "keys": ' + "[" * 30000 + "]" * 30000 + "}"):
            await tab.ws.send_str(text)
            assert "malformed" in (await tab.message("error"))["message"]
        await tab.send(type="input", keys=["ArrowRight"], axes=[])  # shallow messages still work
        await tab.frame()

    with caplog.at_level("DEBUG"):
        asyncio.run(serve(server, scenario))
    assert "RecursionError" not in caplog.text and "Error handling request" not in caplog.text


def test_the_page_that_carries_the_token_is_kept_to_itself(tiny_checkpoint: Path,
                                                           tiny_pusht_store: EpisodeStore) -> None:
    """Issue 34: the page's address holds the launch's secret token. Its response is not to be
    cached, framed by another site, or named in a Referer, and runs only the package's own files."""
    server = make_server(tiny_checkpoint, tiny_pusht_store, None)

    async def scenario(http: aiohttp.ClientSession, url: str) -> None:
        headers = (await http.get(url)).headers
        assert headers["Cache-Control"] == "no-store" and headers["X-Frame-Options"] == "DENY"
        assert headers["Referrer-Policy"] == "no-referrer"
        policy = dict(part.strip().split(" ", 1) for part in headers["Content-Security-Policy"].split(";"))
        assert policy["default-src"] == "'none'" and policy["script-src"] == "'self'"
        assert policy["frame-ancestors"] == "'none'"

    asyncio.run(serve(server, scenario))
