"""The live simulation one operator drives: world model, current action, recording.

Every method is called from the server's single sim thread, one at a time, so the session
is the only writer of its frames, action and recording (no locks needed).
"""

from __future__ import annotations

import datetime
import logging
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.teleop.mapping import ActionMapper, InputState
from pipeline.teleop.recording import Recording
from schemas import FeatureSpec, SpecError
from sim_model.data.episode import Episode

log = logging.getLogger(__name__)


class CommandError(Exception):
    """A client's command cannot be carried out now; the message goes back to that client."""


class InitFrames:
    """Initial frames (and state, action) from an EpisodeStore, checked against the model."""

    def __init__(self, path: str | Path, features: FeatureSpec) -> None:
        from sim_model.data.store import EpisodeStore

        if not Path(path).exists():
            raise SpecError(f"--init dataset {path} does not exist; pass an episode store "
                            "(e.g. one written by `iws collect`).")
        self.path = str(path)
        self.store = EpisodeStore.open(path, mode="r")
        have = {c.name: (c.height, c.width) for c in self.store.features.cameras}
        for cam in features.cameras:
            if have.get(cam.name) != (cam.height, cam.width):
                raise SpecError(f"--init dataset {path} has cameras {have}, but the model needs camera "
                                f"'{cam.name}' at {cam.height}x{cam.width}; use a dataset recorded "
                                "for this model.")
        if self.store.features.action_dim != features.action_dim:
            raise SpecError(f"--init dataset {path} has action_dim {self.store.features.action_dim}, "
                            f"the model {features.action_dim}; use a dataset recorded for this model.")
        if len(self.store) == 0:
            raise SpecError(f"--init dataset {path} holds no episodes.")
        self.cameras = features.camera_names
        self.has_state = self.store.features.state_dim == features.state_dim > 0

    def __len__(self) -> int:
        return len(self.store)

    def check(self, episode: int, frame: int) -> None:
        if not 0 <= episode < len(self.store):
            raise CommandError(f"episode {episode} is out of range; {self.path} has episodes "
                               f"0..{len(self.store) - 1}.")
        length = self.store.meta(episode).length
        if not 0 <= frame < length:
            raise CommandError(f"frame {frame} is out of range; episode {episode} has frames "
                               f"0..{length - 1}.")

    def load(self, episode: int, frame: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """frames (1, V, H, W, 3) uint8, state (1, S) float32 or None, action (A,) float32."""
        self.check(episode, frame)
        keys = [*self.cameras, "action"] + (["state"] if self.has_state else [])
        window = self.store.window(episode, frame, frame + 1, keys=keys)
        frames = np.stack([window[c][0] for c in self.cameras])[None]
        state = window["state"][:1].astype(np.float32) if self.has_state else None
        return frames, state, window["action"][0].astype(np.float32)


class TeleopSession:
    """World model + operator input + optional recording, advanced one control step per tick."""

    def __init__(self, model: Any, init: InitFrames, mapper: ActionMapper, *, episode: int = 0,
                 frame: int = 0, task: str = "", max_steps: int | None = None, seed: int = 0) -> None:
        self.model = model
        self.features: FeatureSpec = model.features
        self.init = init
        self.mapper = mapper
        self.task = task
        self.max_steps = max_steps
        self._rng = np.random.default_rng(seed)
        self._seed = seed
        self._input = InputState()
        self.recording: Recording | None = None
        self.episode, self.frame = episode, frame
        self.reset(episode, frame)

    # -- commands -------------------------------------------------------------------------------
    def reset(self, episode: int | None = None, frame: int = 0) -> None:
        """Restart the model from frame `frame` of init episode `episode` (None: a random one)."""
        if self.recording is not None:
            raise CommandError("a recording is in progress; stop or discard it before resetting.")
        if episode is None:
            episode = int(self._rng.integers(len(self.init)))
        frames, state, action = self.init.load(episode, frame)
        self._seed += 1
        self.model.reset(frames, state=state if self.model.has_state else None, seeds=[self._seed])
        self.episode, self.frame, self.step = episode, frame, 0
        self.frames = {name: frames[0, v] for v, name in enumerate(self.features.camera_names)}
        self.state = state[0] if state is not None else None
        # Start the target where the dataset's operator had it, so nothing jumps at reset.
        self.action = self.mapper.clip(action)
        log.info("reset to %s episode %d frame %d", self.init.path, episode, frame)

    def set_input(self, state: InputState) -> None:
        self._input = state

    def start_recording(self, task: str | None = None) -> str:
        if self.recording is not None:
            raise CommandError("already recording; stop or discard the current recording first.")
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
        episode_id = f"teleop-{stamp}-{uuid.uuid4().hex[:6]}"
        init_ref = f"{self.init.path}#{self.episode}:{self.frame}+{self.step}"
        self.recording = Recording(episode_id, init_ref, self.task if task is None else task)
        log.info("recording %s started", episode_id)
        return episode_id

    def stop_recording(self) -> Episode | None:
        """The finished episode, or None when no step was recorded yet."""
        if self.recording is None:
            raise CommandError("not recording.")
        recording, self.recording = self.recording, None
        if len(recording) == 0:
            log.info("recording %s stopped before its first step; nothing to save",
                     recording.episode_id)
            return None
        return recording.to_episode(self.features, getattr(self.model, "checkpoint_hash", None))

    def discard_recording(self) -> int:
        if self.recording is None:
            raise CommandError("not recording.")
        steps = len(self.recording)
        log.info("recording %s discarded (%d steps)", self.recording.episode_id, steps)
        self.recording = None
        return steps

    # -- the control step -----------------------------------------------------------------------
    def tick(self, wall_time: float) -> Episode | None:
        """One control step; returns the episode when a recording reached max_steps."""
        # Model time per step is the model's 1/fps, whatever rate the server ticks at.
        action = self.mapper.advance(self.action, self._input, 1.0 / self.features.fps)
        if self.recording is not None:
            self.recording.add(self.frames, action, self.state, wall_time)
        result = self.model.step(action[None])
        frames = np.asarray(result.frames)
        if frames.ndim == 4:  # (B, H, W, 3): one camera without a view axis
            frames = frames[:, None]
        self.frames = {name: frames[0, v] for v, name in enumerate(self.features.camera_names)}
        self.state = None if result.state is None else np.asarray(result.state)[0]
        self.action = action
        self.step += 1
        if self.recording is not None and self.max_steps and len(self.recording) >= self.max_steps:
            return self.stop_recording()
        return None

    def status(self) -> dict:
        rec = self.recording
        return {"step": self.step, "episode": self.episode, "frame": self.frame,
                "action": [float(a) for a in self.action],
                "state": None if self.state is None else [float(s) for s in self.state],
                "recording": None if rec is None else {"episode_id": rec.episode_id,
                                                       "steps": len(rec), "task": rec.task},
                "max_steps": self.max_steps}
