"""Initial frames of generated episodes: references, checks against the model, and loading.

A reference is a string: '<dataset>#<episode>:<frame>' for a Zarr episode store or a LeRobot
dataset, or the path of an image file. Replicas load frames by reference themselves, so frames
never travel through the driver.
"""

from __future__ import annotations

import glob
import logging
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from schemas import FeatureSpec, SpecError
from schemas.job import InitSpec
from sim_model import storage
from sim_model.data.formats import EpisodeSource, dataset_kind, open_dataset

log = logging.getLogger(__name__)

_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")


def parse_ref(ref: str) -> tuple[str, int, int] | None:
    """(dataset, episode, frame) for a dataset reference, None for an image path."""
    if "#" not in ref:
        return None
    path, _, where = ref.rpartition("#")
    episode, _, frame = where.partition(":")
    return path, int(episode), int(frame)


@lru_cache(maxsize=8)
def _zarr_store(path: str) -> Any:
    from sim_model.data.store import EpisodeStore

    return EpisodeStore.open(path, "r")


@lru_cache(maxsize=4)
def _opened(path: str) -> EpisodeSource:
    return open_dataset(path)  # sharded: in place; LeRobot: s3:// read from a cached local copy


def _dataset(path: str) -> EpisodeSource:
    """The Zarr EpisodeStore or LeRobot dataset at `path`, opened once per process."""
    kind = dataset_kind(path)
    if kind == "zarr":
        return _zarr_store(path)
    if kind in ("shards", "lerobot"):
        return _opened(path)
    raise SpecError(f"init.dataset {path} is a JSONL file; initial frames need a Zarr or LeRobot dataset.")


def _dataset_summary(path: str) -> tuple[dict[str, tuple[int, ...]], list[int]]:
    """Per-key per-step shapes (cameras as (H, W, 3), 'action', 'state') and episode lengths."""
    dataset = _dataset(path)
    f = dataset.features
    shapes: dict[str, tuple[int, ...]] = {c.name: (c.height, c.width, 3) for c in f.cameras}
    shapes["action"] = (f.action_dim,)
    if f.state_dim:
        shapes["state"] = (f.state_dim,)
    return shapes, np.diff(dataset.episode_ends, prepend=0).tolist()


def check_dataset_matches(path: str, features: FeatureSpec) -> list[int]:
    """SpecError unless the dataset's cameras and action size fit the model; returns episode lengths."""
    shapes, lengths = _dataset_summary(path)
    problems = []
    for cam in features.cameras:
        got = shapes.get(cam.name)
        if got is None:
            problems.append(f"camera '{cam.name}' is missing (dataset has "
                            f"{sorted(k for k in shapes if k not in ('action', 'state'))})")
        elif tuple(got[:2]) != (cam.height, cam.width):
            problems.append(f"camera '{cam.name}' is {got[0]}x{got[1]}, the model wants "
                            f"{cam.height}x{cam.width}")
    if shapes.get("action") != (features.action_dim,):
        problems.append(f"actions are {shapes.get('action')}, the model takes ({features.action_dim},)")
    if problems:
        raise SpecError(f"init.dataset {path} does not match the model's FeatureSpec:\n  - "
                        + "\n  - ".join(problems) + "\nUse a dataset recorded for this model, or another model.")
    return lengths


def _expand_images(patterns: list[str]) -> list[str]:
    paths: list[str] = []
    for pattern in patterns:
        hits = storage.glob(pattern) if glob.has_magic(pattern) else [pattern]
        hits = [h for h in hits if h.lower().endswith(_IMAGE_SUFFIXES) or not glob.has_magic(pattern)]
        if not hits or not all(_is_file(h) for h in hits):
            raise SpecError(f"init.images entry '{pattern}' matches no image file; check the path "
                            "(relative paths resolve against the job file's directory).")
        paths.extend(hits)
    return paths


def _is_file(path: str) -> bool:
    return storage.exists(path) if storage.is_remote(path) else Path(path).is_file()


def list_init_refs(init: InitSpec, features: FeatureSpec) -> list[str]:
    """Every initial-frame reference the spec allows, checked against the model's features."""
    if init.images is not None:
        if len(features.cameras) != 1:
            raise SpecError(f"init.images works for single-camera models; this model has cameras "
                            f"{list(features.camera_names)}. Use init.dataset instead.")
        refs = _expand_images(init.images)
        cam = features.cameras[0]
        for ref in refs:
            shape = load_image(ref).shape
            if shape[:2] != (cam.height, cam.width):
                raise SpecError(f"init image {ref} is {shape[1]}x{shape[0]} pixels; the model wants "
                                f"{cam.width}x{cam.height}. Resize it or use a matching model.")
        return refs
    assert init.dataset is not None
    lengths = check_dataset_matches(init.dataset, features)
    episodes = list(range(len(lengths))) if init.episodes is None else init.episodes
    bad = [e for e in episodes if not 0 <= e < len(lengths)]
    if bad:
        raise SpecError(f"init.episodes {bad} are out of range: {init.dataset} has {len(lengths)} episodes.")
    short = [e for e in episodes if init.frame >= lengths[e]]
    if short:
        raise SpecError(f"init.frame={init.frame} is past the end of episodes {short[:10]} of {init.dataset}.")
    if not episodes:
        raise SpecError(f"init selects no episodes of {init.dataset}.")
    return [f"{init.dataset}#{e}:{init.frame}" for e in episodes]


def load_image(path: str) -> np.ndarray:
    from PIL import Image

    try:
        with Image.open(storage.fetch(path)) as image:  # s3://: a cached local copy
            return np.asarray(image.convert("RGB"), dtype=np.uint8)  # (H, W, 3)
    except OSError as error:
        raise SpecError(f"cannot read init image {path}: {error}") from None


def _load_dataset_frame(path: str, episode: int, frame: int, features: FeatureSpec,
                        ) -> tuple[np.ndarray, np.ndarray | None]:
    """Frames (V, H, W, 3) uint8 and state (S,) float32 or None of one dataset step."""
    cams = features.camera_names
    dataset = _dataset(path)
    keys = list(cams) + (["state"] if dataset.features.state_dim else [])
    data = dataset.window(episode, frame, frame + 1, keys=keys)
    state = data["state"][0] if "state" in data else None
    return np.stack([data[c][0] for c in cams]), state


def load_init(refs: list[str], features: FeatureSpec) -> tuple[np.ndarray, np.ndarray | None]:
    """Frames (B, V, H, W, 3) uint8 and state (B, S) float32 (None unless every ref has one)."""
    frames: list[np.ndarray] = []
    states: list[np.ndarray | None] = []
    for ref in refs:
        parsed = parse_ref(ref)
        if parsed is None:
            frames.append(load_image(ref)[None])
            states.append(None)
        else:
            f, s = _load_dataset_frame(*parsed, features)
            frames.append(f)
            states.append(s)
    have_state = features.state_dim > 0 and all(s is not None and len(s) == features.state_dim for s in states)
    state = np.stack(states).astype(np.float32) if have_state else None  # type: ignore[arg-type]
    return np.stack(frames), state


def init_ref(text: str) -> str:
    """What a user names as one initial frame -> a reference: STORE -> STORE#0:0 (its first
    episode's first frame); references (STORE#e:f) and image paths pass through."""
    if "#" in text or Path(text).suffix.lower() in _IMAGE_SUFFIXES:
        return text
    return f"{text}#0:0"


def load_one_init(ref: str, features: FeatureSpec) -> tuple[np.ndarray, np.ndarray | None]:
    """Frames (V, H, W, 3) and state (S,) or None of one initial frame, checked against
    `features`; SpecError naming a frame the dataset does not have."""
    parsed = parse_ref(ref)
    if parsed is not None:
        lengths = check_dataset_matches(parsed[0], features)
        _, episode, frame = parsed
        if not 0 <= episode < len(lengths) or not 0 <= frame < lengths[episode]:
            raise SpecError(f"{ref}: episode {episode} frame {frame} does not exist "
                            f"({len(lengths)} episodes).")
    frames, state = load_init([ref], features)
    return frames[0], None if state is None else state[0]
