"""Only the holder of the launch's token, from the page's own origin, reaches the teleop server;
and what it tells tabs names files without saying where they are. Real server, real sockets."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import aiohttp
import pytest
from yarl import URL

from pipeline.teleop.access import display_name, is_loopback, scrub_paths
from pipeline.teleop.protocol import unpack_frame
from sim_model.data.store import EpisodeStore
from tests.pipeline.teleop.test_teleop_server import Tab, make_server, serve, ws_url

pytestmark = pytest.mark.usefixtures("one_torch_thread")


async def attempt(http: aiohttp.ClientSession, url: str, **connect: object) -> int:
    """Open a socket as an intruder would and, if it opens, record an episode of its own.

    Returns the HTTP status of a refused handshake, or 101 when the socket opened."""
    try:
        ws = await http.ws_connect(url, **connect)
    except aiohttp.WSServerHandshakeError as error:
        return error.status
    await ws.send_json({"type": "record", "action": "start", "task": "intruder"})
    await asyncio.sleep(0.5)
    await ws.send_json({"type": "record", "action": "stop"})
    await asyncio.sleep(0.5)
    await ws.close()
    return 101


def test_without_the_token_or_from_another_origin_nothing_is_served_or_recorded(
        tiny_checkpoint: Path, tiny_pusht_store, tmp_path: Path) -> None:
    server = make_server(tiny_checkpoint, tiny_pusht_store, tmp_path / "demos.zarr")

    async def scenario(http: aiohttp.ClientSession, url: str) -> None:
        page = URL(url)
        assert page.query["token"] == server.token and len(server.token) >= 40
        base = str(page.with_query(None))
        origin = f"http://{page.host}:{page.port}"
        refused = {
            "no token": await attempt(http, f"{base}ws?tab=x"),
            "wrong token": await attempt(http, ws_url(url, "x", token="x" + server.token[1:])),
            "empty token": await attempt(http, f"{base}ws?token=&tab=x"),
            "foreign origin": await attempt(http, ws_url(url, "x"), origin="http://evil.example"),
            "origin on another port": await attempt(http, ws_url(url, "x"),
                                                    origin=f"http://{page.host}:{page.port + 1}"),
            "null origin": await attempt(http, ws_url(url, "x"), origin="null"),
            "rebound host name": await attempt(http, ws_url(url, "x"),
                                               origin=f"http://evil.example:{page.port}",
                                               headers={"Host": f"evil.example:{page.port}"}),
        }
        assert refused == dict.fromkeys(refused, 403)
        for path in ("", "?token=nope", "api/status", f"api/status?token={server.token}x"):
            response = await http.get(base + path)
            assert response.status == 403, path
            assert "token" in await response.text()
        assert server.clients == {} and server.sim.status["recording"] is None

        # The right token works, from a script (no Origin) and from the page's own origin.
        assert (await http.get(url)).status == 200
        assert (await http.get(f"{base}static/teleop.js")).status == 200  # public code: no token
        tab = await Tab.open(http, url, "owner", origin=origin)
        assert tab.hello["role"] == "controller"
        await tab.send(type="record", action="start", task="owner")
        await tab.until(lambda h: h["recording"] and h["recording"]["steps"] >= 2)
        await tab.send(type="record", action="stop")
        await tab.message("saved")

    asyncio.run(serve(server, scenario))
    store = EpisodeStore.open(tmp_path / "demos.zarr")
    assert len(store) == 1 and store.meta(0).task == "owner"


def test_no_local_path_reaches_a_tab(tiny_checkpoint: Path, tiny_pusht_store, tmp_path: Path,
                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    server = make_server(tiny_checkpoint, tiny_pusht_store, tmp_path / "demos.zarr")
    seen: list[str] = []

    async def scenario(http: aiohttp.ClientSession, url: str) -> None:
        tab = await Tab.open(http, url, "a")
        seen.append(json.dumps(tab.hello))
        await tab.send(type="reset", episode=99, frame=0)  # its error names the init store
        assert "out of range" in (await tab.message("error"))["message"]
        await tab.send(type="record", action="start")
        await tab.until(lambda h: h["recording"] and h["recording"]["steps"] >= 2)
        await tab.send(type="record", action="stop")
        saved = await tab.message("saved")
        assert saved["log_name"].endswith(".jsonl")
        for _ in range(5):  # frame headers too
            seen.append(json.dumps(await tab.frame()))
        seen.extend(json.dumps(m) for m in tab.messages)
        seen.append(json.dumps(saved))
        status = URL(url).with_path("/api/status").with_query(token=server.token)
        seen.append(await (await http.get(str(status))).text())
        raw = await http.ws_connect(ws_url(url, "raw"))  # undecoded bytes, as a tab gets them
        for _ in range(4):
            message = await raw.receive(timeout=10)
            seen.append(message.data if message.type == aiohttp.WSMsgType.TEXT
                        else json.dumps(unpack_frame(message.data)[0]))
        await raw.close()

    asyncio.run(serve(server, scenario))
    everything = "\n".join(seen)
    init = Path(tiny_pusht_store.path)
    assert '"saved": [{' in everything  # /api/status answered (the token went with it)
    assert "demos.zarr" in everything and init.name in everything  # named...
    for local in (tmp_path_factory.getbasetemp(), Path.cwd(), Path.home(), tiny_checkpoint,
                  init, tmp_path):
        for form in {str(local), os.path.realpath(local)}:
            assert form not in everything, form  # ...but not located


def test_scrub_paths_and_display_names() -> None:
    assert scrub_paths("episode 9 is out of range; /tmp/x/store.zarr has episodes 0..2") == (
        "episode 9 is out of range; store.zarr has episodes 0..2")
    assert scrub_paths("Permission denied: '/home/u/demos_actions/t.jsonl'") == (
        "Permission denied: 't.jsonl'")
    assert scrub_paths('{"path": "/a/b/c.zarr#3:0"}') == '{"path": "c.zarr#3:0"}'
    for kept in ("s3://bucket/key/x.zarr", "units/s, x / y", "data/pusht.zarr"):
        assert scrub_paths(kept) == kept
    assert display_name("/srv/runs/pusht/model") == "model"
    assert display_name("s3://bucket/demos.zarr/") == "demos.zarr"
    assert display_name("pusht") == "pusht" and display_name(None) is None
    assert [is_loopback(h) for h in ("127.0.0.1", "localhost", "[::1]", "a.localhost")] == [True] * 4
    assert not any(is_loopback(h) for h in ("evil.example", "0.0.0.0", "10.0.0.1", None))
