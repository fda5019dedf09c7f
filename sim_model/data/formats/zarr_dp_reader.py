"""Read a Diffusion-Policy ReplayBuffer Zarr store (`data/<key>`, `meta/episode_ends`) in place.

Any zarr format (2 or 3) that zarr-python 3 opens. Keys map DP names to iws names with the same
`iws=dp` pairs the exporter takes (`top=img,state=state`); unmapped keys keep their names:
uint8 (N, H, W, 3) arrays become cameras, `action` and `state` are themselves, anything else is
an extra. DP stores carry no rate, task text or episode ids: `fps` (default 10) and `task` are
parameters and episode ids are `<store name>-<index>` -- except in stores `iws export zarr-dp`
wrote, whose `iws_export` attribute restores key names, features and episode metadata. Actions and state are returned as float32 (the iws
contract); float32 sources are returned bit for bit.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from schemas import CameraSpec, EpisodeMeta, ExtraSpec, FeatureSpec, SpecError
from sim_model.data.formats.lerobot_features import iws_name
from sim_model.data.formats.source import ReaderBase

SOURCE_TAG = "import:zarr-dp"


def open_dp_group(path: str | os.PathLike[str]) -> Any:
    """The root group of a DP-layout store, or SpecError saying what is missing."""
    location = str(path)
    try:
        root = zarr.open_group(location, mode="r")
    except (FileNotFoundError, zarr.errors.GroupNotFoundError, zarr.errors.NodeTypeValidationError):
        raise SpecError(f"{location} is not a Zarr group; pass the path of a Diffusion-Policy "
                        "style store (data/<key>, meta/episode_ends).") from None
    meta = root.get("meta")
    if "data" not in root or not isinstance(meta, zarr.Group) or "episode_ends" not in meta:
        raise SpecError(f"{location} lacks the Diffusion-Policy layout: it needs a 'data' group "
                        "and a 'meta/episode_ends' array.")
    return root


class DPZarrReader(ReaderBase):
    """Episodes of a Diffusion-Policy Zarr store, read lazily chunk by chunk."""

    def __init__(self, path: str | os.PathLike[str], *, keys: dict[str, str] | None = None,
                 fps: float | None = None, task: str = "") -> None:
        self.path = str(Path(path).expanduser().absolute())
        self._args = {"keys": dict(keys or {}), "fps": fps, "task": task}
        self._root = open_dp_group(self.path)
        saved = self._root.attrs.asdict().get("iws_export") or {}
        arrays = {name: arr for name, arr in self._root["data"].arrays()}
        self._map = _resolve_keys(arrays, keys or saved.get("keys", {}), self.path)  # iws -> dp
        self._arrays = {iws: arrays[dp] for iws, dp in self._map.items()}
        inferred = _infer_features(self._arrays, 10.0, self.path)
        self._features = _restore(inferred, saved.get("features"))
        if fps is not None:
            self._features = self._features.model_copy(update={"fps": float(fps)})
        self._ends = _check_ends(np.asarray(self._root["meta/episode_ends"][:], dtype=np.int64),
                                 self._arrays, self.path)
        self._ends.setflags(write=False)
        metas = saved.get("episodes") or []
        self._saved_meta = metas if len(metas) == len(self._ends) else None
        self._task = task
        self._stem = iws_name(Path(self.path).name.removesuffix(".zarr")) or "dp"

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, **self._args}

    def __setstate__(self, state: dict[str, Any]) -> None:
        path = state.pop("path")
        self.__init__(path, **state)  # type: ignore[misc]

    @property
    def key_map(self) -> dict[str, str]:
        """iws key -> DP key."""
        return dict(self._map)

    def meta(self, i: int) -> EpisodeMeta:
        first, last = self.episode_range(i)
        i %= len(self)
        fps = self._features.fps
        if self._saved_meta is not None:
            meta = EpisodeMeta.model_validate(self._saved_meta[i])
            update: dict[str, Any] = {"fps": fps} | ({"task": self._task} if self._task else {})
            return meta.model_copy(update=update)
        return EpisodeMeta(episode_id=f"{self._stem}-{i:06d}", length=last - first,
                           task=self._task, source=SOURCE_TAG, fps=fps,
                           info={"source_path": self.path, "source_episode": i})

    def _read(self, i: int, start: int, stop: int, keys: list[str]) -> dict[str, np.ndarray]:
        first, _ = self.episode_range(i)
        out = {}
        for key in keys:
            value = np.asarray(self._arrays[key][first + start:first + stop])
            if key in ("action", "state"):
                value = value.astype(np.float32, copy=False).reshape(len(value), -1)
            elif key in self._features.camera_names:
                value = np.ascontiguousarray(value)
            else:
                extra = next(e for e in self._features.extras if e.name == key)
                value = value.astype(extra.dtype, copy=False)
            out[key] = value
        return out


def _resolve_keys(arrays: dict[str, Any], keys: dict[str, str], where: str) -> dict[str, str]:
    missing = {iws: dp for iws, dp in keys.items() if dp not in arrays}
    if missing:
        raise SpecError(f"--keys maps {missing} but {where}/data has only {sorted(arrays)}; "
                        "use iws=dp pairs naming arrays that exist.")
    mapping = dict(keys)
    taken = set(keys.values())
    for dp in arrays:
        if dp in taken:
            continue
        name = dp if dp in ("action", "state") else iws_name(dp)
        if name in mapping:
            continue  # its iws name is already used by an explicit mapping
        mapping[name] = dp
    if "action" not in mapping:
        raise SpecError(f"{where} has no 'action' array (arrays: {sorted(arrays)}); name the "
                        "action array with --keys action=<name>.")
    return mapping


def _is_image(arr: Any) -> bool:
    return arr.dtype == np.uint8 and arr.ndim == 4 and arr.shape[-1] == 3


def _infer_features(arrays: dict[str, Any], fps: float, where: str) -> FeatureSpec:
    cameras, extras = [], []
    for key, arr in arrays.items():
        if key in ("action", "state"):
            if arr.ndim > 2 or arr.dtype.kind not in "fiu":
                raise SpecError(f"'{key}' in {where} must be numeric (N,) or (N, D); it is "
                                f"{arr.dtype} {arr.shape}.")
        elif _is_image(arr):
            cameras.append(CameraSpec(name=key, height=arr.shape[1], width=arr.shape[2]))
        else:
            extras.append(ExtraSpec(name=key, shape=tuple(arr.shape[1:]), dtype=arr.dtype.name))
    if not cameras:
        raise SpecError(f"{where} has no uint8 (N, H, W, 3) image array; iws needs frames.")

    def dim(key: str) -> int:
        return int(np.prod(arrays[key].shape[1:])) if key in arrays else 0

    return FeatureSpec(cameras=tuple(cameras), action_dim=dim("action"), state_dim=dim("state"),
                       fps=fps, extras=tuple(extras))


def _restore(inferred: FeatureSpec, saved: dict[str, Any] | None) -> FeatureSpec:
    """The FeatureSpec iws saved at export (names, bounds, fps) if it still fits the arrays."""
    if not saved:
        return inferred
    spec = FeatureSpec.model_validate(saved)
    same = (spec.cameras == inferred.cameras and spec.action_dim == inferred.action_dim
            and spec.state_dim == inferred.state_dim and {(e.name, e.shape) for e in spec.extras}
            == {(e.name, e.shape) for e in inferred.extras})
    return spec if same else inferred


def _check_ends(ends: np.ndarray, arrays: dict[str, Any], where: str) -> np.ndarray:
    rows = min(arr.shape[0] for arr in arrays.values())
    if len(ends) == 0:
        raise SpecError(f"{where} holds no episodes (meta/episode_ends is empty).")
    starts = np.concatenate([[0], ends[:-1]])
    if (ends <= starts).any() or ends[-1] > rows:
        raise SpecError(f"{where}: meta/episode_ends must be strictly increasing and end at most "
                        f"at the data length {rows}; it is {ends[:8].tolist()}...")
    return ends
