"""How iws features map onto LeRobot feature names, both ways.

iws key            LeRobot key                    LeRobot feature
<camera>           observation.images.<camera>    video (H, W, 3)
state              observation.state              float32 (S,)
action             action                         float32 (A,)
<extra>            <extra>                        its dtype, shape (1,) for scalars

A camera's key can be chosen (`camera_keys`, `iws export lerobot --camera-key`): LeRobot's
simulated environments name a single camera `observation.image` (gym-pusht through
`lerobot-eval --env.type=pusht`), and a policy trained on `observation.images.top` finds no such
input there.

Extras keep their bare names: a key under `observation.` would become a policy input in
lerobot-train (dataset_to_policy_features), and extras such as block pose or success flags are
bookkeeping, not observations a real robot would have.
"""

from __future__ import annotations

import math
import re
from typing import Any

from schemas import CameraSpec, ExtraSpec, FeatureSpec, SpecError

CAMERA_PREFIX = "observation.images."
STATE_KEY = "observation.state"
ACTION_KEY = "action"
# Columns lerobot adds to every dataset; never features of their own on the iws side.
LEROBOT_DEFAULT_KEYS = ("timestamp", "frame_index", "episode_index", "index", "task_index")
_NOT_KEY_CHAR = re.compile(r"[^A-Za-z0-9_]")
# A camera key LeRobot reads as a policy's image input, and that is also a safe folder name
# (videos/<key>/...).
_CAMERA_KEY = re.compile(r"observation\.image|observation\.images\.[A-Za-z0-9_][A-Za-z0-9_.-]*")


def parse_camera_keys(entries: list[str] | None, cameras: tuple[str, ...]) -> dict[str, str]:
    """`--camera-key` values ('top=observation.image', or 'observation.image' when there is one
    camera) -> {camera: LeRobot key}."""
    mapping: dict[str, str] = {}
    for entry in entries or []:
        camera, sep, key = (part.strip() for part in entry.rpartition("="))
        if not sep:
            if len(cameras) != 1:
                raise SpecError(f"--camera-key {entry!r} names no camera, but the dataset has "
                                f"{len(cameras)} ({list(cameras)}); write CAMERA=KEY, e.g. "
                                f"{cameras[0] if cameras else 'top'}=observation.image.")
            camera = cameras[0]
        if camera in mapping:
            raise SpecError(f"--camera-key names camera '{camera}' twice.")
        mapping[camera] = key
    return mapping


def camera_key_map(features: FeatureSpec, camera_keys: dict[str, str] | None = None) -> dict[str, str]:
    """Camera name -> LeRobot key: `observation.images.<camera>` unless `camera_keys` says
    otherwise. SpecError for an unknown camera or a key LeRobot would not treat as a camera."""
    camera_keys = camera_keys or {}
    unknown = sorted(set(camera_keys) - set(features.camera_names))
    if unknown:
        raise SpecError(f"--camera-key names camera(s) {unknown}, which the dataset lacks; its "
                        f"cameras are {list(features.camera_names)}.")
    mapping = {cam: camera_keys.get(cam, CAMERA_PREFIX + cam) for cam in features.camera_names}
    taken = [STATE_KEY, ACTION_KEY, *LEROBOT_DEFAULT_KEYS, *(e.name for e in features.extras)]
    for cam, key in mapping.items():
        if not _CAMERA_KEY.fullmatch(key) or key in taken:
            raise SpecError(f"--camera-key gives camera '{cam}' the key {key!r}; use "
                            "'observation.image' (what LeRobot's single-camera environments "
                            "such as pusht feed a policy) or 'observation.images.<name>'.")
    keys = list(mapping.values())
    clashes = sorted({k for k in keys if keys.count(k) > 1})
    if clashes:
        raise SpecError(f"--camera-key gives several cameras the key(s) {clashes}; keys must be "
                        "unique.")
    return mapping


def key_map(features: FeatureSpec, camera_keys: dict[str, str] | None = None) -> dict[str, str]:
    """iws data key -> LeRobot feature key, in store order."""
    mapping = camera_key_map(features, camera_keys)
    if features.state_dim > 0:
        mapping["state"] = STATE_KEY
    mapping["action"] = ACTION_KEY
    for extra in features.extras:
        mapping[extra.name] = extra.name
    return mapping


def to_lerobot_features(features: FeatureSpec,
                        camera_keys: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """The `features` argument of LeRobotDataset.create for an iws FeatureSpec."""
    out: dict[str, dict[str, Any]] = {}
    cameras = camera_key_map(features, camera_keys)
    for cam in features.cameras:
        out[cameras[cam.name]] = {"dtype": "video", "shape": (cam.height, cam.width, 3),
                                         "names": ["height", "width", "channels"]}
    if features.state_dim > 0:
        out[STATE_KEY] = {"dtype": "float32", "shape": (features.state_dim,),
                          "names": list(features.state_names) if features.state_names else None}
    out[ACTION_KEY] = {"dtype": "float32", "shape": (features.action_dim,),
                       "names": list(features.action_names) if features.action_names else None}
    for extra in features.extras:
        if extra.name in LEROBOT_DEFAULT_KEYS:
            raise SpecError(f"extra '{extra.name}' collides with a column LeRobot adds to every "
                            "dataset; rename the extra before exporting.")
        out[extra.name] = {"dtype": extra.dtype, "shape": tuple(extra.shape) or (1,), "names": None}
    return out


def iws_name(lerobot_key: str) -> str:
    """A valid iws key for a LeRobot feature key: 'next.reward' -> 'next_reward'."""
    name = _NOT_KEY_CHAR.sub("_", lerobot_key)
    return name if name[:1].isalpha() else "f_" + name


def from_lerobot_features(info_features: dict[str, dict[str, Any]],
                          fps: float) -> tuple[FeatureSpec, dict[str, str]]:
    """An iws FeatureSpec for a LeRobot dataset's info.json features, and iws key -> LeRobot key.

    Cameras: every image/video feature (`observation.images.top` -> `top`, `observation.image`
    -> `image`). State: `observation.state`. Action: `action`. Everything else numeric becomes an
    extra under a sanitised name.
    """
    if ACTION_KEY not in info_features:
        raise SpecError(f"the LeRobot dataset has no '{ACTION_KEY}' feature (it has "
                        f"{sorted(info_features)}); iws needs actions to replay and train on.")
    cameras, extras, mapping = [], [], {}
    for key, ft in info_features.items():
        if key in LEROBOT_DEFAULT_KEYS or key in (ACTION_KEY, STATE_KEY):
            continue
        shape = tuple(ft["shape"])
        if ft["dtype"] in ("video", "image"):
            name = iws_name(key.removeprefix(CAMERA_PREFIX).removeprefix("observation."))
            height, width, channels = _hwc(key, shape, ft.get("names"))
            if channels != 3:
                raise SpecError(f"camera '{key}' has {channels} channels; iws stores RGB (3).")
            cameras.append(CameraSpec(name=name, height=height, width=width))
        elif ft["dtype"] == "string":
            continue
        else:
            name = iws_name(key)
            # a v2.1 export keeps a multi-dimensional extra flat, its shape beside it (lerobot_v21.py)
            kept = tuple(ft.get("iws_shape") or shape)
            if math.prod(kept) != math.prod(shape):
                raise SpecError(f"feature '{key}': iws_shape {list(kept)} does not hold its {list(shape)} values.")
            shape = kept
            extras.append(ExtraSpec(name=name, shape=() if shape == (1,) else shape,
                                    dtype=ft["dtype"]))
        mapping[name] = key
    if not cameras:
        raise SpecError("the LeRobot dataset has no image or video feature; iws needs frames.")
    action = info_features[ACTION_KEY]
    state = info_features.get(STATE_KEY)
    spec = FeatureSpec(
        cameras=tuple(cameras), action_dim=int(action["shape"][0]),
        state_dim=int(state["shape"][0]) if state else 0, fps=float(fps),
        action_names=_names(action, int(action["shape"][0])),
        state_names=_names(state, int(state["shape"][0])) if state else None,
        extras=tuple(extras))
    full = {cam.name: mapping[cam.name] for cam in cameras}
    full["action"] = ACTION_KEY
    if state:
        full["state"] = STATE_KEY
    full.update({e.name: mapping[e.name] for e in extras})
    return spec, full


def _hwc(key: str, shape: tuple[int, ...], names: list[str] | None) -> tuple[int, int, int]:
    if len(shape) != 3:
        raise SpecError(f"image feature '{key}' has shape {shape}; expected 3 dimensions.")
    if names and names[0] in ("channel", "channels"):
        return shape[1], shape[2], shape[0]
    return shape[0], shape[1], shape[2]


def _names(ft: dict[str, Any], dim: int) -> tuple[str, ...] | None:
    names = ft.get("names")
    if isinstance(names, dict):  # v2-era {"motors": [...]} style
        names = next(iter(names.values()), None)
    if isinstance(names, list) and len(names) == dim and all(isinstance(n, str) for n in names):
        return tuple(names)
    return None
