"""`iws teleop` as a user runs it: argument errors, and Ctrl-C in the middle of a recording."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest

from pipeline.cli import main
from pipeline.commands.teleop import parse_init
from sim_model.data.store import EpisodeStore
from tests.pipeline.teleop.test_teleop_server import Tab


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class TeleopProcess:
    """`iws teleop` in a subprocess; its stderr is read as it comes, for the printed address."""

    proc: subprocess.Popen
    lines: list[str] = field(default_factory=list)
    printed: threading.Event = field(default_factory=threading.Event)
    url: str = ""
    reader: threading.Thread | None = None

    @classmethod
    def start(cls, argv: list[str]) -> TeleopProcess:
        proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "teleop", *argv],
                                stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        started = cls(proc)
        started.reader = threading.Thread(target=started._read, daemon=True)
        started.reader.start()
        return started

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            found = re.search(r"teleop page at (\S+)", line)
            if found and not self.url:
                self.url = found.group(1)
                self.printed.set()

    def wait_url(self, timeout: float = 60) -> str:
        """The address printed at start (interpreter + torch import + model load come first)."""
        if not self.printed.wait(timeout):
            self.proc.kill()
            raise AssertionError(f"iws teleop printed no address: {self.stderr[-2000:]}")
        return self.url

    def stop(self, timeout: float = 30) -> str:
        """Ctrl-C, wait, return everything it wrote to stderr."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=timeout)
        finally:
            self.proc.kill()
        if self.reader is not None:
            self.reader.join(5)  # it ends at the pipe's end of file
        return self.stderr

    @property
    def stderr(self) -> str:
        return "".join(self.lines)


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
    teleop = TeleopProcess.start(
        ["--model", str(tiny_checkpoint), "--init", str(tiny_pusht_store.path), "--port", str(port),
         "--record-to", str(record_to), "--threads", "1", "--precision", "fp32", "--fps", "20"])
    try:
        url = teleop.wait_url()
        assert re.fullmatch(rf"http://127\.0\.0\.1:{port}/\?token=[\w-]{{40,}}", url), url
        saved = asyncio.run(_record_one_then_leave_one_open(url))
    finally:
        err = teleop.stop()
    assert teleop.proc.returncode == 0, err
    assert "unsaved steps discarded" in err and "1 recording(s) saved" in err
    store = EpisodeStore.open(record_to, mode="a")  # "a" repairs a torn tail: there is none
    assert len(store) == 1 and store.n_frames == len(store.episode(0)) == saved["length"] >= 4
    assert [p.name for p in record_to.parent.joinpath("demos_actions").iterdir()] == [
        f"{store.meta(0).episode_id}.jsonl"]


async def _record_one_then_leave_one_open(url: str) -> dict:
    async with aiohttp.ClientSession() as http:
        tab = await Tab.open(http, url, "cli")  # the address is printed once it listens
        await tab.send(type="record", action="start")
        await tab.until(lambda h: h["recording"] and h["recording"]["steps"] >= 4)
        await tab.send(type="record", action="stop")
        saved = await tab.message("saved")
        await tab.send(type="record", action="start")
        await tab.until(lambda h: h["recording"] and h["recording"]["steps"] >= 3)
        return saved
