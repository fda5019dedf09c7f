"""Sim loop + session + recording with a real tiny world model and real episode stores."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import numpy as np
import pytest

from pipeline.pusht.features import pusht_features
from pipeline.teleop.loop import Command, SimLoop
from pipeline.teleop.mapping import resolve_mapping
from pipeline.teleop.protocol import unpack_frame
from pipeline.teleop.recording import WALL_TIME_KEY, EpisodeWriter, default_actions_dir
from pipeline.teleop.session import CommandError, InitFrames, TeleopSession
from schemas import SpecError
from sim_model.data.store import EpisodeStore
from sim_model.world_model import WorldModel
from workers.actions.streams import ActionStreams

STEP = 0.4 * 512 / 10  # default mapping: 40% of the 0..512 range per second, 10 Hz model


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model(tiny_checkpoint: Path) -> WorldModel:
    return WorldModel.load(tiny_checkpoint, precision="fp32")


@pytest.fixture
def session(model: WorldModel, tiny_pusht_store: EpisodeStore) -> TeleopSession:
    init = InitFrames(tiny_pusht_store.path, model.features)
    return TeleopSession(model, init, resolve_mapping(model.features), episode=1, task="push T")


def run_ticks(sim: SimLoop, commands: list[list[Command]]) -> list[dict]:
    """One tick per entry, applying that entry's commands first; returns the frame headers."""
    return [unpack_frame(sim.tick_sync(cmds, time.time()).payload)[0] for cmds in commands]


def test_record_steps_pair_shown_frames_with_pressed_actions(
        session: TeleopSession, tiny_pusht_store: EpisodeStore, tmp_path: Path) -> None:
    sim = SimLoop(session, fps=10)
    start = session.action.copy()  # the init episode's action at frame 0
    np.testing.assert_allclose(start, tiny_pusht_store.window(1, 0, 1, ["action"])["action"][0])
    shown_first = session.frames["top"].copy()
    right = Command(1, "input", {"keys": ["ArrowRight"]})
    record = Command(1, "record", {"action": "start", "task": "push it"})
    headers = run_ticks(sim, [[right, record], [], [], [Command(1, "input", {"keys": ["ArrowDown"]})], []])
    shown_last = session.frames["top"].copy()
    packet = sim.tick_sync([Command(1, "record", {"action": "stop"})], time.time())
    assert packet.replies[0][1]["type"] == "info"
    [episode] = packet.finished

    assert len(episode) == 5 and [h["recording"]["steps"] for h in headers] == [1, 2, 3, 4, 5]
    expected = start + np.array([[1, 0], [2, 0], [3, 0], [3, 1], [3, 2]], np.float32) * STEP
    np.testing.assert_allclose(episode.action, expected, rtol=1e-5)
    np.testing.assert_array_equal(episode.frames["top"][0], shown_first)  # the frame seen first
    assert not np.array_equal(episode.frames["top"][-1], shown_last)  # the step's result is not in it
    assert episode.state is not None and episode.state.shape == (5, 2)
    assert episode.meta.source == "teleop" and episode.meta.task == "push it"
    assert episode.meta.model_hash == session.model.checkpoint_hash
    assert episode.meta.info == {"init_ref": f"{tiny_pusht_store.path}#1:0", "init_offset": 0}
    assert np.all(np.diff(episode.extras[WALL_TIME_KEY]) >= 0)

    writer = EpisodeWriter(tmp_path / "demos.zarr", session.features, has_state=True)
    saved = writer.save(episode)
    stored = EpisodeStore.open(tmp_path / "demos.zarr").episode(saved.index)
    np.testing.assert_array_equal(stored.action, episode.action)
    np.testing.assert_array_equal(stored.frames["top"], episode.frames["top"])
    assert stored.meta == episode.meta
    lines = [json.loads(line) for line in Path(saved.log_path).read_text().splitlines()]
    assert Path(saved.log_path).parent == default_actions_dir(tmp_path / "demos.zarr")
    assert lines[0]["episode_id"] == episode.meta.episode_id and lines[0]["length"] == 5
    assert lines[0]["action_names"] == ["x", "y"] and lines[0]["store_index"] == saved.index
    assert [line["step"] for line in lines] == list(range(5))
    np.testing.assert_allclose([line["action"] for line in lines], episode.action)
    # The generation pipeline's replay source reads both the log and the store.
    for source in (saved.log_path, str(tmp_path / "demos.zarr")):
        streams = ActionStreams(source)
        assert len(streams) == 1
        np.testing.assert_allclose(streams.stream(0), episode.action)


def test_max_steps_discard_and_empty_stop(session: TeleopSession) -> None:
    session.max_steps = 3
    sim = SimLoop(session, fps=10)
    start = Command(1, "record", {"action": "start"})
    finished = [sim.tick_sync(cmds, time.time()).finished for cmds in ([start], [], [], [])]
    assert [len(f) for f in finished] == [0, 0, 1, 0] and len(finished[2][0]) == 3
    assert session.recording is None

    packet = sim.tick_sync([start], time.time())
    packet = sim.tick_sync([Command(1, "record", {"action": "discard"})], time.time())
    assert packet.finished == [] and "discarded 1" in packet.replies[0][1]["message"]
    # Start and stop inside one tick: nothing was recorded, nothing is saved.
    packet = sim.tick_sync([start, Command(1, "record", {"action": "stop"})], time.time())
    assert packet.finished == [] and "nothing saved" in packet.replies[1][1]["message"]


def test_commands_that_cannot_run_are_answered_not_raised(session: TeleopSession) -> None:
    sim = SimLoop(session, fps=10, recording_enabled=False)
    packet = sim.tick_sync([Command(7, "record", {"action": "start"})], time.time())
    assert packet.replies == [(7, {"type": "error", "message": packet.replies[0][1]["message"]})]
    assert "--record-to" in packet.replies[0][1]["message"]
    packet = sim.tick_sync([Command(7, "reset", {"episode": 9, "frame": 0})], time.time())
    assert "episodes 0..2" in packet.replies[0][1]["message"]
    packet = sim.tick_sync([Command(7, "reset", {"episode": 2, "frame": 5})], time.time())
    assert "frames 0..4" in packet.replies[0][1]["message"]

    session.start_recording()
    with pytest.raises(CommandError, match="stop or discard"):
        session.reset(0, 0)
    with pytest.raises(CommandError, match="already recording"):
        session.start_recording()


def test_reset_restarts_from_the_chosen_frame(session: TeleopSession,
                                              tiny_pusht_store: EpisodeStore) -> None:
    sim = SimLoop(session, fps=10)
    run_ticks(sim, [[], []])
    [header] = run_ticks(sim, [[Command(1, "reset", {"episode": 2, "frame": 3})]])
    assert (session.episode, session.frame) == (2, 3) and header["step"] == 1
    window = tiny_pusht_store.window(2, 3, 4, ["action"])
    # After the reset the tick stepped once from the dataset's action (nothing held).
    np.testing.assert_allclose(header["action"], window["action"][0])


def test_slow_steps_drop_ticks_instead_of_queueing(session: TeleopSession) -> None:
    # Ask for 1 kHz: every tiny-model step (~20 ms on this CPU) overruns the 1 ms period.
    sim = SimLoop(session, fps=1000)
    published: list[int] = []

    async def drive() -> float:
        stop = asyncio.Event()
        task = asyncio.create_task(sim.run(stop, lambda p: published.append(p.seq)))
        await asyncio.sleep(1.0)
        stop.set()
        began = time.monotonic()
        await task
        return time.monotonic() - began

    t0 = time.monotonic()
    shutdown = asyncio.run(drive())
    elapsed = time.monotonic() - t0
    assert sim.dropped > 0
    assert published == list(range(1, len(published) + 1))
    # Executed + dropped ticks cover the wall time on the 1 ms grid: nothing was queued.
    assert abs(len(published) + sim.dropped - elapsed * 1000) <= 0.2 * elapsed * 1000
    assert shutdown < 1.0  # stopping waits for at most the step in progress


def test_init_and_record_stores_are_checked(model: WorldModel, tiny_pusht_store: EpisodeStore,
                                            tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="does not exist"):
        InitFrames(tmp_path / "nope.zarr", model.features)
    with pytest.raises(SpecError, match="the model wants 96x96"):
        InitFrames(tiny_pusht_store.path, pusht_features(96))
    # A ground-truth store has other extras than teleop recordings: refuse to mix them.
    with pytest.raises(SpecError, match="record into a new path"):
        EpisodeWriter(tiny_pusht_store.path, model.features)
    first = EpisodeWriter(tmp_path / "rec.zarr", model.features)
    again = EpisodeWriter(tmp_path / "rec.zarr", model.features)  # reopening to append is fine
    assert len(first) == len(again) == 0


def test_init_from_image_files(model: WorldModel, tiny_pusht_store: EpisodeStore,
                               tmp_path: Path) -> None:
    from PIL import Image

    frames = tiny_pusht_store.window(0, 0, 2, ["top"])["top"]
    for i, frame in enumerate(frames):
        Image.fromarray(frame).save(tmp_path / f"init_{i}.png")
    (tmp_path / "notes.txt").write_text("not an image")
    init = InitFrames(tmp_path, model.features)
    assert len(init) == 2 and init.ref(1, 0) == str(tmp_path / "init_1.png")
    loaded, state, action = init.load(1, 0)
    np.testing.assert_array_equal(loaded[0, 0], frames[1])
    assert state is None and action.tolist() == [256.0, 256.0]  # no dataset action: mid-range
    session = TeleopSession(model, InitFrames(tmp_path / "init_0.png", model.features),
                            resolve_mapping(model.features))
    session.tick(time.time())
    assert session.step == 1
    with pytest.raises(CommandError, match="frames 0..0"):
        session.reset(0, 1)
