"""An episode in memory: frames per camera, actions, optional state and extras, metadata."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from schemas import EpisodeMeta


@dataclass
class Episode:
    frames: dict[str, np.ndarray]  # camera -> (T, H, W, 3) uint8
    action: np.ndarray  # (T, A) float32
    meta: EpisodeMeta
    state: np.ndarray | None = None  # (T, S) float32
    extras: dict[str, np.ndarray] = field(default_factory=dict)  # key -> (T, ...)

    def __post_init__(self) -> None:
        lengths = {k: len(v) for k, v in self.frames.items()}
        lengths["action"] = len(self.action)
        if self.state is not None:
            lengths["state"] = len(self.state)
        lengths.update({k: len(v) for k, v in self.extras.items()})
        if len(set(lengths.values())) != 1:
            raise ValueError(f"episode arrays disagree in length: {lengths}")
        if self.meta.length != len(self.action):
            raise ValueError(f"meta.length={self.meta.length} but the episode has {len(self.action)} steps")
        for name, frames in self.frames.items():
            if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
                raise ValueError(f"camera '{name}' frames must be uint8 (T, H, W, 3), got "
                                 f"{frames.dtype} {frames.shape}")

    def __len__(self) -> int:
        return len(self.action)

    @property
    def timestamps(self) -> np.ndarray:
        return (np.arange(len(self), dtype=np.float64) / self.meta.fps).astype(np.float32)

    def arrays(self) -> dict[str, np.ndarray]:
        """Every per-step array by its store key, in a fixed order."""
        out: dict[str, np.ndarray] = dict(self.frames)
        out["action"] = self.action
        if self.state is not None:
            out["state"] = self.state
        out.update(self.extras)
        return out

    def checksum(self) -> str:
        """sha256 over every array (key, dtype, shape, bytes) in sorted key order."""
        return arrays_checksum(self.arrays())


def arrays_checksum(arrays: dict[str, np.ndarray]) -> str:
    """An episode's checksum from its arrays by store key (Episode.checksum; readers that check
    what they read against a recorded checksum compute it from the arrays they read)."""
    digest = hashlib.sha256()
    for key, value in sorted(arrays.items()):
        value = np.ascontiguousarray(value)
        digest.update(f"{key}|{value.dtype.str}|{value.shape}".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()
