"""The fixed-rate sim loop: the single writer of the session.

Ticks follow a grid of 1/fps seconds. A tick that overruns (model step slower than the
period) drops the grid points it missed, runs the next tick at once and restarts the grid
from there, instead of running the missed ticks back to back: time passes as on a real robot,
nothing queues up, and the achieved rate is min(fps, 1 / tick time). Client commands are
queued by the event loop and applied by the sim thread at the start of the next tick, so the
session, and the recording in it, only ever change on that one thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pipeline.teleop.mapping import InputState
from pipeline.teleop.protocol import RateMeter, encode_image, pack_frame
from pipeline.teleop.session import CommandError, TeleopSession
from schemas import SpecError
from sim_model.data.episode import Episode

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Command:
    """A client request for the sim thread: 'input', 'record', 'reset'."""

    client_id: int | None
    kind: str
    data: dict = field(default_factory=dict)


@dataclass
class TickPacket:
    """What one tick produced: the frame message for every client, replies, finished episodes."""

    seq: int
    payload: bytes
    status: dict
    replies: list[tuple[int | None, dict]]  # (client id or None for everyone, JSON message)
    finished: list[Episode]


class SimLoop:
    def __init__(self, session: TeleopSession, *, fps: float, codec: str = "jpeg",
                 quality: int = 90, recording_enabled: bool = True) -> None:
        self.session = session
        self.fps = fps
        self.codec = codec
        self.quality = quality
        self.recording_enabled = recording_enabled
        self.steps = RateMeter()
        self.dropped = 0
        self.seq = 0
        self.status = session.status()  # snapshot, replaced (not mutated) each tick
        self._commands: list[Command] = []
        # One thread: torch releases the GIL, so the event loop keeps serving sockets meanwhile.
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="teleop-sim")

    def submit(self, command: Command) -> None:
        self._commands.append(command)

    async def run(self, stop: asyncio.Event, publish: Callable[[TickPacket], None]) -> None:
        loop = asyncio.get_running_loop()
        period = 1.0 / self.fps
        deadline = loop.time()
        while not stop.is_set():
            delay = deadline - loop.time()
            if delay > 0:
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                    break
                except TimeoutError:
                    pass
            commands, self._commands = self._commands, []
            packet = await loop.run_in_executor(self.pool, self.tick_sync, commands, time.time())
            self.steps.add(time.monotonic())
            publish(packet)
            deadline += period
            late = loop.time() - deadline
            if late > 0:
                # Overran: the grid points that passed are dropped, the next tick runs at once
                # and the grid restarts from there. No backlog is ever worked off in a burst.
                missed = int(late // period)
                self.dropped += missed
                deadline += late
                if missed:
                    log.debug("tick overran by %.1f ms; dropped %d tick(s)", late * 1e3, missed)

    def tick_sync(self, commands: list[Command], wall_time: float) -> TickPacket:
        """Apply queued commands, advance one step, encode the frame. Runs on the sim thread."""
        replies: list[tuple[int | None, dict]] = []
        finished: list[Episode] = []
        for command in commands:
            try:
                reply = self._apply(command, finished)
            except (CommandError, SpecError) as error:
                reply = {"type": "error", "message": str(error)}
            if reply is not None:
                replies.append((command.client_id, reply))
        episode = self.session.tick(wall_time)
        if episode is not None:
            finished.append(episode)
            replies.append((None, {"type": "info", "message": f"recording reached "
                                   f"{len(episode)} steps; saving {episode.meta.episode_id}"}))
        self.seq += 1
        status = self.session.status()
        images = [(name, encode_image(frame, self.codec, self.quality))
                  for name, frame in self.session.frames.items()]
        payload = pack_frame({"seq": self.seq, "t": wall_time, **status}, images, self.codec)
        self.status = status
        return TickPacket(self.seq, payload, status, replies, finished)

    def _apply(self, command: Command, finished: list[Episode]) -> dict | None:
        session, data = self.session, command.data
        match command.kind:
            case "input":
                session.set_input(InputState(frozenset(data.get("keys", ())),
                                             tuple(data.get("axes", ()))))
                return None
            case "reset":
                session.reset(data.get("episode"), int(data.get("frame", 0)))
                return {"type": "info", "message": f"reset to episode {session.episode} "
                        f"frame {session.frame}"}
            case "record":
                return self._record(data.get("action"), data.get("task"), finished)
        raise CommandError(f"unknown command {command.kind!r}")

    def _record(self, action: object, task: object, finished: list[Episode]) -> dict:
        session = self.session
        match action:
            case "start":
                if not self.recording_enabled:
                    raise CommandError("recording is off: restart `iws teleop` with --record-to PATH.")
                episode_id = session.start_recording(task if isinstance(task, str) else None)
                return {"type": "info", "message": f"recording {episode_id}"}
            case "stop":
                episode = session.stop_recording()
                if episode is None:
                    return {"type": "info", "message": "stopped before the first step; nothing saved"}
                finished.append(episode)
                return {"type": "info", "message": f"saving {episode.meta.episode_id} "
                        f"({len(episode)} steps)"}
            case "discard":
                steps = session.discard_recording()
                return {"type": "info", "message": f"discarded {steps} recorded steps"}
        raise CommandError(f"unknown record action {action!r}; use start, stop or discard.")
