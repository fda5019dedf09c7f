"""`iws teleop` as a user runs it: argument errors, and Ctrl-C in the middle of a recording."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from pipeline.cli import main
from pipeline.commands.teleop import parse_init
from sim_model.data.store import EpisodeStore
from tests.pipeline.test_teleop_server import Tab


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_parse_init() -> None:
    assert parse_init("data/pusht.zarr:3") == ("data/pusht.zarr", 3)
    assert parse_init("data/pusht.zarr") == ("data/pusht.zarr", 0)
    assert parse_init("s3://bucket/pusht.zarr:12") == ("s3://bucket/pusht.zarr", 12)


@pytest.mark.parametrize(("extra", "needle"), [
    (["--fps", "0"], "--fps 0.0 is out of range"),
    (["--max-steps", "0"], "--max-steps 0 must be at least 1"),
    (["--actions-dir", "x"], "only makes sense with --record-to"),
    (["--init", "{missing}"], "does not exist"),
    (["--init", "{store}:9"], "has episodes 0..2"),
    (["--model", "{missing}"], "checkpoint"),
    (["--mapping", "{bad_mapping}"], "field 'axes' is required"),
    (["--record-to", "{store}"], "record into a new path"),
])
def test_user_errors_are_one_clear_line(tiny_checkpoint: Path, tiny_pusht_store: EpisodeStore,
                                        tmp_path: Path, capsys: pytest.CaptureFixture,
                                        extra: list[str], needle: str) -> None:
    bad_mapping = tmp_path / "map.yaml"
    bad_mapping.write_text("speed: 0.3\n")
    names = {"missing": tmp_path / "missing.zarr", "store": tiny_pusht_store.path,
             "bad_mapping": bad_mapping}
    argv = ["teleop", "--model", str(tiny_checkpoint), "--init", str(tiny_pusht_store.path)]
    argv += [arg.format(**names) for arg in extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_port_in_use(tiny_checkpoint: Path, tiny_pusht_store: EpisodeStore,
                     capsys: pytest.CaptureFixture) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        code = main(["teleop", "--model", str(tiny_checkpoint), "--init", str(tiny_pusht_store.path),
                     "--port", str(port)])
    assert code == 2 and "--port 0 for any free one" in capsys.readouterr().err


def test_ctrl_c_mid_recording_keeps_saved_episodes_and_drops_the_open_one(
        tiny_checkpoint: Path, tiny_pusht_store: EpisodeStore, tmp_path: Path) -> None:
    port, record_to = free_port(), tmp_path / "demos.zarr"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "teleop", "--model", str(tiny_checkpoint),
         "--init", str(tiny_pusht_store.path), "--port", str(port), "--record-to", str(record_to),
         "--threads", "1", "--precision", "fp32", "--fps", "20"],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        saved = asyncio.run(_record_one_then_leave_one_open(f"http://127.0.0.1:{port}/"))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "unsaved steps discarded" in err and "1 recording(s) saved" in err
    store = EpisodeStore.open(record_to, mode="a")  # "a" repairs a torn tail: there is none
    assert len(store) == 1 and store.n_frames == len(store.episode(0)) == saved["length"] >= 4
    assert [p.name for p in record_to.parent.joinpath("demos_actions").iterdir()] == [
        f"{store.meta(0).episode_id}.jsonl"]


async def _record_one_then_leave_one_open(url: str) -> dict:
    async with aiohttp.ClientSession() as http:
        deadline = time.monotonic() + 60  # interpreter + torch import + model load
        while True:
            try:
                tab = await Tab.open(http, url, "cli")
                break
            except aiohttp.ClientConnectionError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.3)
        await tab.send(type="record", action="start")
        await tab.until(lambda h: h["recording"] and h["recording"]["steps"] >= 4)
        await tab.send(type="record", action="stop")
        saved = await tab.message("saved")
        await tab.send(type="record", action="start")
        await tab.until(lambda h: h["recording"] and h["recording"]["steps"] >= 3)
        return saved
