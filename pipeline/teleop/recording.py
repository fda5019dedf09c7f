"""A teleop recording in progress, and where finished ones go: an EpisodeStore plus a JSONL log.

Each step pairs the frame the operator *saw* with the action they commanded while seeing it
(Diffusion Policy's obs_t/action_t convention), the model's predicted state at that frame and
the wall-clock time since the recording started.

JSONL action log, one file per recording (`<actions_dir>/<episode_id>.jsonl`), one line per
step in the per-step form the generation pipeline's replay source reads
(ReplaySource.path; `episode` is the stream's index within the file, always 0 here). The first
line also carries the recording's metadata:

    {"episode": 0, "step": 0, "t": 0.0, "action": [231.0, 250.5], "episode_id": "teleop-...",
     "fps": 10.0, "action_names": ["x", "y"], "task": "...", "model_hash": "...",
     "init_ref": "data.zarr#3:0", "init_offset": 17, "length": 120, "store": "demos.zarr",
     "store_index": 4}
    {"episode": 0, "step": 1, "t": 0.101, "action": [236.1, 250.5]}
    ...

`t` is wall-clock seconds since the recording started; the control rate is `fps`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from schemas import EpisodeMeta, ExtraSpec, FeatureSpec, SpecError
from sim_model.data.episode import Episode
from sim_model.storage import atomic

log = logging.getLogger(__name__)

WALL_TIME_KEY = "wall_time"


def record_features(model_features: FeatureSpec, has_state: bool = True) -> FeatureSpec:
    """Features of teleop episodes: the model's cameras/action/state, plus wall-clock time.

    The model predicts no extras (block pose, coverage, ...), so those are dropped; a model
    without a state head records no state.
    """
    update: dict = {"extras": (ExtraSpec(name=WALL_TIME_KEY, shape=(), dtype="float32"),)}
    if not has_state:
        update.update(state_dim=0, state_names=None)
    return FeatureSpec.model_validate({**model_features.model_dump(), **update})


@dataclass
class Recording:
    """Steps buffered in memory until stop (then one Episode) or discard (then nothing)."""

    episode_id: str
    init_ref: str  # where the model was reset from, e.g. 'data.zarr#3:0'
    task: str
    init_offset: int = 0  # model steps between that reset and the recording's first step
    frames: dict[str, list[np.ndarray]] = field(default_factory=dict)  # camera -> [(H, W, 3)]
    actions: list[np.ndarray] = field(default_factory=list)  # [(A,)]
    states: list[np.ndarray] = field(default_factory=list)  # [(S,)]
    wall: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.actions)

    def add(self, frames: dict[str, np.ndarray], action: np.ndarray, state: np.ndarray | None,
            wall_time: float) -> None:
        for name, frame in frames.items():
            self.frames.setdefault(name, []).append(frame)
        self.actions.append(np.asarray(action, dtype=np.float32).copy())
        if state is not None:
            self.states.append(np.asarray(state, dtype=np.float32).copy())
        self.wall.append(wall_time)

    def to_episode(self, features: FeatureSpec, model_hash: str | None) -> Episode:
        t0 = self.wall[0]
        meta = EpisodeMeta(episode_id=self.episode_id, length=len(self), task=self.task,
                           source="teleop", model_hash=model_hash, fps=features.fps,
                           info={"init_ref": self.init_ref, "init_offset": self.init_offset})
        return Episode(
            frames={name: np.stack(frames) for name, frames in self.frames.items()},
            action=np.stack(self.actions),
            state=np.stack(self.states) if self.states else None,
            extras={WALL_TIME_KEY: np.asarray([w - t0 for w in self.wall], dtype=np.float32)},
            meta=meta,
        )


def action_log_text(episode: Episode, features: FeatureSpec, *, store: str, store_index: int) -> str:
    """The JSONL action log of a finished episode (format in the module docstring)."""
    header = {"episode_id": episode.meta.episode_id, "fps": episode.meta.fps,
              "action_names": list(features.action_names) if features.action_names else None,
              "task": episode.meta.task, "model_hash": episode.meta.model_hash,
              "init_ref": episode.meta.info.get("init_ref"),
              "init_offset": episode.meta.info.get("init_offset"), "length": len(episode),
              "store": store, "store_index": store_index}
    lines = []
    wall = episode.extras[WALL_TIME_KEY]
    for step, (action, t) in enumerate(zip(episode.action, wall, strict=True)):
        line = {"episode": 0, "step": step, "t": round(float(t), 4),
                "action": [float(a) for a in action]}
        lines.append(json.dumps({**line, **header} if step == 0 else line))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class SavedEpisode:
    episode_id: str
    index: int
    length: int
    log_path: str

    def for_page(self) -> dict:
        """What tabs are told: the log's file name, not where it lies on this machine."""
        return {"episode_id": self.episode_id, "index": self.index, "length": self.length,
                "log_name": Path(self.log_path).name}


class EpisodeWriter:
    """Appends finished recordings to an EpisodeStore and writes their JSONL logs.

    Used from one thread at a time (the server's writer thread): the store has one writer.
    """

    def __init__(self, store_path: str | Path, features: FeatureSpec, *, has_state: bool = True,
                 actions_dir: str | Path | None = None) -> None:
        from sim_model.data.store import EpisodeStore

        self.store_path = str(store_path)
        self.features = record_features(features, has_state)
        if Path(store_path).exists():
            self.store = EpisodeStore.open(store_path, mode="a")
            if self.store.features != self.features:
                raise SpecError(
                    f"--record-to {store_path} holds episodes with different features "
                    f"(cameras {list(self.store.features.camera_names)}, action_dim "
                    f"{self.store.features.action_dim}, extras "
                    f"{[e.name for e in self.store.features.extras]}) than this model's teleop "
                    f"recordings (cameras {list(self.features.camera_names)}, action_dim "
                    f"{self.features.action_dim}, extras [{WALL_TIME_KEY!r}]); "
                    "record into a new path.")
        else:
            self.store = EpisodeStore.create(store_path, self.features)
        self.actions_dir = Path(actions_dir) if actions_dir else default_actions_dir(store_path)

    def __len__(self) -> int:
        return len(self.store)

    def save(self, episode: Episode) -> SavedEpisode:
        # Store first: it is the dataset; the log names the store index it belongs to.
        index = self.store.append(episode)
        log_path = self.actions_dir / f"{episode.meta.episode_id}.jsonl"
        atomic.write_text(log_path, action_log_text(episode, self.features, store=self.store_path, store_index=index))
        log.info("saved teleop episode %s (%d steps) as #%d in %s; actions in %s",
                 episode.meta.episode_id, len(episode), index, self.store_path, log_path)
        return SavedEpisode(episode.meta.episode_id, index, len(episode), str(log_path))


def default_actions_dir(store_path: str | Path) -> Path:
    """`demos.zarr` -> `demos_actions/` beside it."""
    path = Path(store_path)
    stem = path.name.removesuffix(".zarr") or "teleop"
    return path.parent / f"{stem}_actions"
