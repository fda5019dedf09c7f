"""`iws teleop` on a two-camera, two-arm model: both views on the wire and on the page side by
side, WASD driving the first arm's target and the arrows the second's, recordings with both
views and 4-D actions. The model is a randomly initialised `tiny` one for the sweep features
(no trained sweep model exists); the first frames come from real sweep play.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from pipeline.cli import main
from pipeline.sweep.features import sweep_features
from pipeline.teleop.loop import Command, SimLoop
from pipeline.teleop.mapping import resolve_mapping
from pipeline.teleop.protocol import unpack_frame
from pipeline.teleop.recording import EpisodeWriter
from pipeline.teleop.session import InitFrames, TeleopSession
from sim_model.data.store import EpisodeStore
from sim_model.world_model import WorldModel
from tests.pipeline.teleop.test_teleop_browser import CHROMIUM, CHROMIUM_ARGS
from tests.pipeline.teleop.test_teleop_cli import TeleopProcess, free_port

RESOLUTION = 32
CAMERAS = ("top", "side")
FEATURES = sweep_features(RESOLUTION)
STEP = 0.4 * (FEATURES.action_high[0] - FEATURES.action_low[0]) / 10  # 40% of the range a second
N = 5


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def sweep_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sweep_model") / "model"
    WorldModel.random(FEATURES, preset="tiny", seed=0).save(path)
    return path


@pytest.fixture(scope="module")
def sweep_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep_play") / "play.zarr"
    assert main(["collect", "sweep", "--episodes", "2", "--steps", "8", "--resolution",
                 str(RESOLUTION), "--workers", "1", "--out", str(out), "--no-progress"]) == 0
    return out


def toward_middle(start: np.ndarray, dim: int) -> int:
    """+1 or -1: the direction with room to move (no clipping at the bounds during the test)."""
    return 1 if start[dim] < (FEATURES.action_low[dim] + FEATURES.action_high[dim]) / 2 else -1


KEYS = {0: ("KeyD", "KeyA"), 3: ("ArrowDown", "ArrowUp")}  # (plus, minus): arm 0 x, arm 1 y


def test_both_views_stream_and_each_hand_drives_an_arm(sweep_checkpoint: Path, sweep_store: Path,
                                                       tmp_path: Path) -> None:
    model = WorldModel.load(sweep_checkpoint, precision="fp32")
    session = TeleopSession(model, InitFrames(sweep_store, model.features),
                            resolve_mapping(model.features), episode=1, task="sweep")
    sim = SimLoop(session, fps=10)
    start = session.action.copy()
    signs = {dim: toward_middle(start, dim) for dim in KEYS}
    keys = [KEYS[dim][0 if sign > 0 else 1] for dim, sign in signs.items()]
    shown_first = {camera: session.frames[camera].copy() for camera in CAMERAS}
    hold = Command(1, "input", {"keys": keys})
    packets = [sim.tick_sync(commands, time.time()) for commands in
               ([hold, Command(1, "record", {"action": "start"})], *([[]] * (N - 1)))]
    header, images = unpack_frame(packets[-1].payload)
    assert [image["camera"] for image in header["images"]] == list(CAMERAS)
    assert all(images[camera][:2] == b"\xff\xd8" for camera in CAMERAS)  # one JPEG per view
    [episode] = sim.tick_sync([Command(1, "record", {"action": "stop"})], time.time()).finished

    moved = np.zeros(4, np.float32)
    for dim, sign in signs.items():
        moved[dim] = sign * STEP
    np.testing.assert_allclose(episode.action, start + np.outer(np.arange(1, N + 1), moved),
                               rtol=1e-5)  # dims 1 and 2 (the other arm's axes) stay put
    for camera in CAMERAS:
        assert episode.frames[camera].shape == (N, RESOLUTION, RESOLUTION, 3)
        np.testing.assert_array_equal(episode.frames[camera][0], shown_first[camera])
    assert not np.array_equal(episode.frames["top"], episode.frames["side"])
    assert episode.state is not None and episode.state.shape == (N, 4)

    writer = EpisodeWriter(tmp_path / "demos.zarr", model.features, has_state=model.has_state)
    index = writer.save(episode).index
    demos = EpisodeStore.open(tmp_path / "demos.zarr")
    stored = demos.episode(index)
    assert demos.features.camera_names == CAMERAS and demos.features.action_dim == 4
    for camera in CAMERAS:
        np.testing.assert_array_equal(stored.frames[camera], episode.frames[camera])
    np.testing.assert_array_equal(stored.action, episode.action)


@pytest.mark.skipif(not shutil.which(CHROMIUM), reason=f"{CHROMIUM} is not installed "
                    "(apt-get install chromium)")
def test_page_shows_both_views_side_by_side_and_records_two_arms(
        sweep_checkpoint: Path, sweep_store: Path, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="pip package 'playwright' not installed")
    teleop = TeleopProcess.start(
        ["--model", str(sweep_checkpoint), "--init", f"{sweep_store}:1", "--port", str(free_port()),
         "--record-to", str(tmp_path / "demos.zarr"), "--max-steps", str(N), "--task", "sweep",
         "--threads", "1", "--precision", "fp32"])
    start = EpisodeStore.open(sweep_store).episode(1).action[0]
    signs = {dim: toward_middle(start, dim) for dim in KEYS}
    keys = [KEYS[dim][0 if sign > 0 else 1] for dim, sign in signs.items()]
    errors: list[str] = []
    try:
        url = teleop.wait_url()
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                 args=CHROMIUM_ARGS)
            try:
                # A laptop-sized window, too narrow for two 384-px views beside the controls.
                page = browser.new_page(viewport={"width": 760, "height": 800})
                page.on("pageerror", lambda error: errors.append(str(error)))
                page.goto(url)
                page.wait_for_function("() => Number(document.getElementById('step').dataset.seq) > 2")
                top, side = (page.locator(f"#view-{c}").bounding_box() for c in CAMERAS)
                assert top is not None and side is not None
                assert top["y"] == side["y"] and side["x"] >= top["x"] + top["width"]
                assert side["x"] + side["width"] <= 760  # both wholly in view, no scrolling
                assert top["width"] == side["width"] >= 8 * RESOLUTION
                legend = page.inner_text("#legend")
                assert "x0" in legend and "ArrowRight" in legend and "y1" in legend

                def action(dim: int) -> float:
                    return float(page.inner_text(f"#action-{dim}"))

                before = {dim: action(dim) for dim in range(4)}
                for key in keys:
                    page.keyboard.down(key)
                for dim, sign in signs.items():
                    page.wait_for_function(f"() => {sign} * (Number(document.getElementById("
                                           f"'action-{dim}').textContent) - {before[dim]}) > 20")
                assert action(1) == before[1] and action(2) == before[2]
                page.click("#rec-start")  # --max-steps stops and saves it after N steps
                page.wait_for_function("() => document.getElementById('saved').textContent.includes('#0')")
                for key in keys:
                    page.keyboard.up(key)
            finally:
                browser.close()
    finally:
        stderr = teleop.stop()
    assert teleop.proc.returncode == 0, stderr[-2000:]
    assert errors == []

    episode = EpisodeStore.open(tmp_path / "demos.zarr").episode(0)
    assert len(episode) == N and episode.meta.task == "sweep"
    for camera in CAMERAS:
        assert episode.frames[camera].shape == (N, RESOLUTION, RESOLUTION, 3)
    steps = np.diff(episode.action, axis=0)
    for dim in range(4):
        expected = signs.get(dim, 0) * STEP
        np.testing.assert_allclose(steps[:, dim], expected, rtol=1e-4, atol=1e-3, err_msg=str(dim))
