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


_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")


def _image_files(source: Path) -> list[str] | None:
    """The image(s) `source` names (one file, or a folder of them), None for a dataset."""
    if source.is_file() and source.suffix.lower() in _IMAGE_SUFFIXES:
        return [str(source)]
    if source.is_dir() and not any((source / marker).exists()
                                   for marker in ("zarr.json", ".zgroup", "meta")):
        found = sorted(str(p) for p in source.iterdir() if p.suffix.lower() in _IMAGE_SUFFIXES)
        return found or None
    return None


class InitFrames:
    """Initial frames from an episode store, a LeRobot dataset, or image files (one per "episode").

    Loading and the checks against the model are the generation pipeline's (workers.init_frames),
    so teleop accepts exactly what `iws generate` accepts as init frames.
    """

    def __init__(self, source: str | Path, features: FeatureSpec) -> None:
        from schemas.job import InitSpec
        from sim_model.data.formats import dataset_kind
        from workers.init_frames import check_dataset_matches, list_init_refs

        self.path, self.features = str(source), features
        if not Path(source).exists():
            raise SpecError(f"--init {source} does not exist; pass an episode store (e.g. from "
                            "`iws collect`), a LeRobot dataset, or image file(s).")
        images = _image_files(Path(source))
        self._store = None
        if images is not None:
            self.refs: list[str] | None = list_init_refs(InitSpec(images=images), features)
            self.lengths = [1] * len(self.refs)
        else:
            self.refs = None
            self.lengths = check_dataset_matches(self.path, features)
            if dataset_kind(self.path) == "zarr":
                from sim_model.data.store import EpisodeStore

                self._store = EpisodeStore.open(self.path, mode="r")
        if not self.lengths:
            raise SpecError(f"--init {source} holds no episodes.")

    def __len__(self) -> int:
        return len(self.lengths)

    def check(self, episode: int, frame: int) -> None:
        if not 0 <= episode < len(self.lengths):
            raise CommandError(f"episode {episode} is out of range; {self.path} has episodes "
                               f"0..{len(self.lengths) - 1}.")
        if not 0 <= frame < self.lengths[episode]:
            raise CommandError(f"frame {frame} is out of range; episode {episode} has frames "
                               f"0..{self.lengths[episode] - 1}.")

    def ref(self, episode: int, frame: int) -> str:
        """The init reference as `iws generate` writes it: 'data.zarr#3:0' or an image path."""
        return self.refs[episode] if self.refs is not None else f"{self.path}#{episode}:{frame}"

    def load(self, episode: int, frame: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """frames (1, V, H, W, 3) uint8, state (1, S) float32 or None, start action (A,) float32."""
        from workers.init_frames import load_init

        self.check(episode, frame)
        frames, state = load_init([self.ref(episode, frame)], self.features)
        return frames, state, self._start_action(episode, frame, state)

    def _start_action(self, episode: int, frame: int, state: np.ndarray | None) -> np.ndarray:
        """The dataset's action there; else the state for position control; else mid-range."""
        f = self.features
        if self._store is not None:
            return self._store.window(episode, frame, frame + 1, ["action"])["action"][0].astype(np.float32)
        if state is not None and f.state_dim == f.action_dim:
            return state[0].astype(np.float32)
        if f.action_low is not None and f.action_high is not None:
            return (np.asarray(f.action_low, np.float32) + np.asarray(f.action_high, np.float32)) / 2
        return np.zeros(f.action_dim, np.float32)


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
        self.recording = Recording(episode_id, self.init.ref(self.episode, self.frame),
                                   self.task if task is None else task, init_offset=self.step)
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
