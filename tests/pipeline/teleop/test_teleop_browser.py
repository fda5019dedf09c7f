"""End to end in headless Chromium: page loads, keys drive the model, recordings land in the store.

Needs Debian's /usr/bin/chromium and the `playwright` pip package (its own driver; no
`playwright install`). Skipped with the reason when either is missing.
"""

from __future__ import annotations

import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from sim_model.data.store import EpisodeStore
from tests.pipeline.teleop.test_teleop_cli import TeleopProcess, free_port
from tests.pipeline.teleop.test_teleop_server import ws_url

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
STEP = 0.4 * 512 / 10
N = 6
GAMEPAD = """
window.pad = {axes: [0, 0, 0, 0], buttons: Array.from({length: 17}, () => ({pressed: false}))};
navigator.getGamepads = () => [window.pad];
"""

pytestmark = pytest.mark.skipif(not shutil.which(CHROMIUM), reason=f"{CHROMIUM} is not installed "
                                "(apt-get install chromium)")
sync_api = pytest.importorskip("playwright.sync_api", reason="pip package 'playwright' not installed")


@pytest.fixture
def teleop_url(tiny_checkpoint: Path, tiny_pusht_store: EpisodeStore, tmp_path: Path):
    """The address `iws teleop` printed: http://127.0.0.1:PORT/?token=SECRET."""
    teleop = TeleopProcess.start(
        ["--model", str(tiny_checkpoint), "--init", f"{tiny_pusht_store.path}:1",
         "--port", str(free_port()), "--record-to", str(tmp_path / "demos.zarr"),
         "--max-steps", str(N), "--task", "push T", "--threads", "1", "--precision", "fp32"])
    try:
        url = teleop.wait_url()
        yield url
    finally:
        err = teleop.stop()
    assert teleop.proc.returncode == 0, err[-2000:]


# A page from another site that knows even the secret token: it opens the teleop socket and, if
# that works, records an episode with its own task text. It is served from another origin on
# this machine (a real server, so Chromium's local-network-access rule, which blocks public
# pages from reaching 127.0.0.1, does not stand in for the server's own check).
ATTACK = """async (url) => await new Promise((resolve) => {
  const ws = new WebSocket(url);
  ws.onopen = () => {
    ws.send(JSON.stringify({type: "record", action: "start", task: "attacker"}));
    setTimeout(() => { ws.send(JSON.stringify({type: "record", action: "stop"})); resolve("opened"); }, 1500);
  };
  ws.onerror = () => resolve("refused");
  setTimeout(() => resolve("no answer"), 15000);
})"""


class ForeignSite(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>another site</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def foreign_page_attack(context, teleop_url: str) -> str:
    site = ThreadingHTTPServer(("127.0.0.1", 0), ForeignSite)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    page = context.new_page()
    try:
        page.goto(f"http://localhost:{site.server_address[1]}/")
        return page.evaluate(ATTACK, ws_url(teleop_url, "attacker").replace("http://", "ws://"))
    finally:
        page.close()
        site.shutdown()
        site.server_close()


def canvas(page) -> str:
    return page.evaluate("document.getElementById('view-top').toDataURL()")


def seq(page) -> int:
    return int(page.get_attribute("#step", "data-seq") or 0)


def test_keys_drive_the_model_and_recordings_reach_the_store(teleop_url: str, tmp_path: Path) -> None:
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS)
        errors: list[str] = []
        context.on("page", lambda p: p.on("pageerror", lambda e: errors.append(str(e))))
        # The page's Content-Security-Policy must allow all it loads and connects to. It refuses
        # eval, which Playwright uses for a wait_for_function expression: each is a function.
        context.on("page", lambda p: p.on("console", lambda m: errors.append(m.text)
                                          if "Content Security Policy" in m.text else None))
        try:
            assert foreign_page_attack(context, teleop_url) == "refused"
            page = context.new_page()
            base = teleop_url.split("?")[0]
            assert page.goto(base).status == 403  # the address without its token
            assert page.goto(f"{base}?token=guessed").status == 403
            page.goto(teleop_url)
            page.wait_for_function("() => Number(document.getElementById('step').dataset.seq) > 2")
            assert page.inner_text("#role") == "controlling"
            before, x0 = canvas(page), float(page.inner_text("#action-0"))

            page.keyboard.down("ArrowRight")
            page.wait_for_function(f"() => Number(document.getElementById('action-0').textContent) > {x0 + 30}")
            assert canvas(page) != before  # new frames are drawn
            page.click("#rec-start")  # --max-steps stops and saves it after N steps
            page.wait_for_function("() => document.getElementById('saved').textContent.includes('#0')")
            page.keyboard.up("ArrowRight")

            watcher = context.new_page()  # a second tab watches and cannot drive
            watcher.goto(teleop_url)
            watcher.wait_for_function("() => Number(document.getElementById('step').dataset.seq) > 0")
            assert watcher.inner_text("#role") == "watching"
            assert watcher.is_disabled("#rec-start")
            shown = seq(watcher)
            watcher.wait_for_function(f"() => Number(document.getElementById('step').dataset.seq) > {shown + 3}")

            page.bring_to_front()
            page.keyboard.down("ArrowDown")
            page.click("#rec-start")
            page.wait_for_function("() => Number(document.getElementById('rec-status').dataset.steps) >= 2")
            page.click("#rec-stop")
            page.wait_for_function("() => document.getElementById('saved').textContent.includes('#1')")
            page.keyboard.up("ArrowDown")
            assert float(page.inner_text("#sim-fps")) > 0
            assert float(page.inner_text("#delivered-fps")) > 0
            saved_text = page.inner_text("#saved")

            # A third tab with a gamepad (the Gamepad API, stubbed: headless has no devices).
            pad = context.new_page()
            pad.add_init_script(GAMEPAD)
            pad.goto(teleop_url)
            pad.wait_for_function("() => Number(document.getElementById('step').dataset.seq) > 0")
            pad.click("#take-control")
            pad.wait_for_function("() => document.getElementById('role').textContent === 'controlling'")
            pad.evaluate("window.pad.axes = [-1, 0, 0, 0]")  # left stick fully left
            press_start = "window.pad.buttons[9] = {pressed: true}; setTimeout(() => " \
                "window.pad.buttons[9] = {pressed: false}, 200)"
            pad.evaluate(press_start)  # Start: record
            pad.wait_for_function("() => Number(document.getElementById('rec-status').dataset.steps) >= 3")
            pad.evaluate(press_start)  # Start again: stop and save
            pad.wait_for_function("() => document.getElementById('saved').textContent.includes('#2')")
        finally:
            context.close()
    assert errors == []  # no script errors and nothing the page's policy refused, in any tab

    store = EpisodeStore.open(tmp_path / "demos.zarr")
    assert len(store) == 3
    first, second = store.episode(0), store.episode(1)
    assert len(first) == N and first.meta.source == "teleop" and first.meta.task == "push T"
    np.testing.assert_allclose(np.diff(first.action[:, 0]), STEP, rtol=1e-4)  # ArrowRight held
    np.testing.assert_allclose(np.diff(first.action[:, 1]), 0)
    assert f"({len(second)} steps)" in saved_text and len(second) >= 2
    np.testing.assert_allclose(np.diff(second.action[:, 1]), STEP, rtol=1e-4)  # ArrowDown held
    np.testing.assert_allclose(np.diff(second.action[:, 0]), 0)  # ArrowRight released
    assert first.frames["top"].shape == (N, 32, 32, 3) and first.state.shape == (N, 2)
    third = store.episode(2)
    assert len(third) >= 3
    np.testing.assert_allclose(np.diff(third.action[:, 0]), -STEP, rtol=1e-4)  # stick left
