"""How keyboard keys and gamepad sticks move the action vector.

A mapping turns what the operator holds (keys, stick deflection) into a *velocity* of each
mapped action dimension; the sim loop integrates it once per control step and clips the
result to FeatureSpec.action_low/high. For PushT that makes the action a 2-D position target
that the arrow keys, WASD or the left stick push around, as in gym-pusht's own teleop; for two
arms (sweep's 4-D x0 y0 x1 y1) WASD and the left stick move the first arm's target, the arrows,
IJKL and the right stick the second's; for a gripper (the mug task's x y z grip) the arrows or
WASD move it over the table, R/F raise and lower it, C/O close and open it.

The mapping is read from, in order: `--mapping FILE`, `teleop.yaml` beside the checkpoint,
or a default built from the FeatureSpec (see `default_mapping`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from schemas import FeatureSpec, SpecError, load_yaml

MAPPING_FILENAME = "teleop.yaml"
_MODIFIERS = ("Shift", "Control", "Alt", "Meta")


class AxisMapping(BaseModel):
    """One action dimension driven by keys and/or one gamepad axis."""

    model_config = ConfigDict(extra="forbid")

    dim: int | str = Field(description="Action dimension: index, or a name from FeatureSpec.action_names.")
    plus: list[str] = Field(default_factory=list, description="Keys that increase it, e.g. ['ArrowRight', 'd'].")
    minus: list[str] = Field(default_factory=list, description="Keys that decrease it.")
    gamepad_axis: int | None = Field(default=None, ge=0, description="Gamepad API axis index "
                                     "(0/1: left stick x/y, 2/3: right stick x/y), or none.")
    invert: bool = Field(default=False, description="Flip the gamepad axis' sign.")
    speed: float | None = Field(default=None, gt=0, description="Action units per second at full "
                                "deflection; default: the mapping's `speed` times the action range.")


class CursorSpec(BaseModel):
    """Draw the action as a crosshair on a camera view (for image-space position targets)."""

    model_config = ConfigDict(extra="forbid")

    camera: str | None = Field(default=None, description="Camera to draw on; default: the first one.")
    x: int | str = Field(description="Action dimension shown along the image's width.")
    y: int | str = Field(description="Action dimension shown along the image's height (down is +).")


class ActionMapping(BaseModel):
    """A per-task teleoperation mapping (YAML file or `teleop.yaml` beside a checkpoint)."""

    model_config = ConfigDict(extra="forbid")

    axes: list[AxisMapping] = Field(min_length=1, description="Mapped action dimensions.")
    speed: float = Field(default=0.4, gt=0, description="Default speed: fraction of each bounded "
                         "dimension's range per second at full deflection.")
    fine_keys: list[str] = Field(default_factory=lambda: ["Shift"], description="Held for fine control.")
    fine_scale: float = Field(default=0.25, gt=0, le=1, description="Speed factor while a fine key is held.")
    deadzone: float = Field(default=0.15, ge=0, lt=1, description="Stick deflection ignored around centre.")
    cursor: CursorSpec | None = Field(default=None, description="Optional crosshair overlay.")


def key_codes(name: str) -> list[str]:
    """Browser KeyboardEvent.code values for a key name: 'd' -> KeyD, 'Shift' -> ShiftLeft/Right."""
    if len(name) == 1 and name.isalpha():
        return [f"Key{name.upper()}"]
    if len(name) == 1 and name.isdigit():
        return [f"Digit{name}"]
    if name in _MODIFIERS:
        return [f"{name}Left", f"{name}Right"]
    if name == " ":
        return ["Space"]
    return [name]


@dataclass(frozen=True)
class InputState:
    """What the controlling client holds right now."""

    keys: frozenset[str] = frozenset()  # KeyboardEvent.code values
    axes: tuple[float, ...] = ()  # Gamepad API axes, each in [-1, 1]


@dataclass
class _Axis:
    dim: int
    plus: set[str]
    minus: set[str]
    gamepad_axis: int | None
    sign: float
    speed: float  # action units per second


@dataclass
class ActionMapper:
    """An ActionMapping checked against a FeatureSpec; turns input into action updates."""

    mapping: ActionMapping
    features: FeatureSpec
    _axes: list[_Axis] = field(init=False)
    _fine: set[str] = field(init=False)

    def __post_init__(self) -> None:
        self._axes = [self._resolve(axis) for axis in self.mapping.axes]
        dims = [a.dim for a in self._axes]
        if len(set(dims)) != len(dims):
            raise SpecError(f"teleop mapping maps action dimensions {dims} more than once; "
                            "give each dimension one entry under 'axes'.")
        self._fine = {c for k in self.mapping.fine_keys for c in key_codes(k)}
        if self.mapping.cursor is not None:
            self._dim(self.mapping.cursor.x, "cursor.x")
            self._dim(self.mapping.cursor.y, "cursor.y")
            camera = self.mapping.cursor.camera
            if camera is not None and camera not in self.features.camera_names:
                raise SpecError(f"teleop mapping cursor.camera = {camera!r} is not a camera of the "
                                f"model; use one of {list(self.features.camera_names)}.")

    def _dim(self, dim: int | str, where: str) -> int:
        names = list(self.features.action_names or ())
        if isinstance(dim, str):
            if dim not in names:
                raise SpecError(f"teleop mapping {where} = {dim!r} is not an action name; the model's "
                                f"action names are {names or 'not set (use indices)'}.")
            return names.index(dim)
        if not 0 <= dim < self.features.action_dim:
            raise SpecError(f"teleop mapping {where} = {dim} is out of range; the model has "
                            f"action_dim {self.features.action_dim} (indices 0..{self.features.action_dim - 1}).")
        return dim

    def _resolve(self, axis: AxisMapping) -> _Axis:
        dim = self._dim(axis.dim, "axes.dim")
        speed = axis.speed
        if speed is None:
            low, high = self.features.action_low, self.features.action_high
            if low is None or high is None:
                raise SpecError(f"action dimension {dim} has no bounds in the model's FeatureSpec, so "
                                "the teleop mapping must give it an explicit 'speed' (units per second).")
            speed = self.mapping.speed * (high[dim] - low[dim])
        return _Axis(dim=dim, plus={c for k in axis.plus for c in key_codes(k)},
                     minus={c for k in axis.minus for c in key_codes(k)},
                     gamepad_axis=axis.gamepad_axis, sign=-1.0 if axis.invert else 1.0, speed=speed)

    def _stick(self, value: float) -> float:
        dead = self.mapping.deadzone
        if abs(value) <= dead:
            return 0.0
        return float(np.sign(value)) * min(1.0, (abs(value) - dead) / (1.0 - dead))

    def velocity(self, state: InputState) -> np.ndarray:
        """(A,) float32 action units per second for what is held now."""
        out = np.zeros(self.features.action_dim, dtype=np.float32)
        scale = self.mapping.fine_scale if state.keys & self._fine else 1.0
        for axis in self._axes:
            push = float(bool(state.keys & axis.plus)) - float(bool(state.keys & axis.minus))
            if axis.gamepad_axis is not None and axis.gamepad_axis < len(state.axes):
                push += axis.sign * self._stick(state.axes[axis.gamepad_axis])
            out[axis.dim] = np.clip(push, -1.0, 1.0) * axis.speed * scale
        return out

    def advance(self, action: np.ndarray, state: InputState, dt: float) -> np.ndarray:
        """The next action: (A,) integrated over one control step of `dt` seconds, then clipped."""
        return self.clip(action + self.velocity(state) * np.float32(dt))

    def clip(self, action: np.ndarray) -> np.ndarray:
        out = np.asarray(action, dtype=np.float32).copy()
        if self.features.action_low is not None:
            out = np.maximum(out, np.asarray(self.features.action_low, dtype=np.float32))
        if self.features.action_high is not None:
            out = np.minimum(out, np.asarray(self.features.action_high, dtype=np.float32))
        return out

    def legend(self) -> dict:
        """What the page shows and needs: key bindings per dimension and the cursor, JSON-ready."""
        names = self.features.action_names or tuple(str(i) for i in range(self.features.action_dim))
        cursor = None
        if self.mapping.cursor is not None:
            c = self.mapping.cursor
            cursor = {"camera": c.camera or self.features.camera_names[0],
                      "x": self._dim(c.x, "cursor.x"), "y": self._dim(c.y, "cursor.y")}
        return {
            "axes": [{"dim": a.dim, "name": names[a.dim], "plus": self.mapping.axes[i].plus,
                      "minus": self.mapping.axes[i].minus, "gamepad_axis": a.gamepad_axis,
                      "speed": a.speed} for i, a in enumerate(self._axes)],
            "fine_keys": self.mapping.fine_keys,
            "codes": sorted(set().union(*(a.plus | a.minus for a in self._axes), self._fine)),
            "cursor": cursor,
        }


# (plus keys, minus keys, gamepad axis) per action dimension. A single 2-D target (PushT) takes
# the arrows and WASD alike. With a second pair of dims (two arms: sweep's x0 y0 x1 y1) each
# hand gets its own arm: WASD + left stick drive dims 0-1, the arrows or IJKL + right stick
# dims 2-3. Beyond four dims, write a mapping file.
_ONE_PAIR_KEYS = [
    (["ArrowRight", "d"], ["ArrowLeft", "a"], 0),
    (["ArrowDown", "s"], ["ArrowUp", "w"], 1),
]
_TWO_PAIR_KEYS = [
    (["d"], ["a"], 0),
    (["s"], ["w"], 1),
    (["ArrowRight", "l"], ["ArrowLeft", "j"], 2),
    (["ArrowDown", "k"], ["ArrowUp", "i"], 3),
]


# A gripper's [x, y, z, grip] (the mug task: metres in the world, y away from the front camera):
# arrows/WASD + left stick move it over the table (up: away), R/F + right stick's y raise and
# lower it, C/O + right stick's x close and open the fingers.
GRIPPER_NAMES = ("x", "y", "z", "grip")
_GRIPPER_KEYS = [
    (["ArrowRight", "d"], ["ArrowLeft", "a"], 0, False),
    (["ArrowUp", "w"], ["ArrowDown", "s"], 1, True),
    (["r", "PageUp"], ["f", "PageDown"], 3, True),
    (["c"], ["o"], 2, False),
]


def default_mapping(features: FeatureSpec) -> ActionMapping:
    """Up to 2-D: arrows/WASD + left stick. 3-4 D (two arms): WASD + left stick on dims 0-1,
    arrows/IJKL + right stick on dims 2-3. A gripper (actions named x, y, z, grip): see
    _GRIPPER_KEYS.

    Dims 1 and 3 grow with S/ArrowDown/K, matching image coordinates (y targets point down).
    Actions named ('x', 'y') with bounds get a crosshair on the first camera (not a gripper's:
    its x, y are on the table, not in an image).
    """
    if tuple(features.action_names or ()) == GRIPPER_NAMES:
        return ActionMapping(axes=[AxisMapping(dim=i, plus=plus, minus=minus, gamepad_axis=axis, invert=invert)
                                   for i, (plus, minus, axis, invert) in enumerate(_GRIPPER_KEYS)])
    keys = _ONE_PAIR_KEYS if features.action_dim <= 2 else _TWO_PAIR_KEYS
    axes = [AxisMapping(dim=i, plus=plus, minus=minus, gamepad_axis=axis)
            for i, (plus, minus, axis) in enumerate(keys[: features.action_dim])]
    cursor = None
    if (features.action_names is not None and tuple(features.action_names[:2]) == ("x", "y")
            and features.action_low is not None and features.action_high is not None):
        cursor = CursorSpec(x=0, y=1)
    return ActionMapping(axes=axes, cursor=cursor)


def resolve_mapping(features: FeatureSpec, mapping_file: str | Path | None = None,
                    checkpoint: str | Path | None = None) -> ActionMapper:
    """The mapping to use: explicit file, else `teleop.yaml` in the checkpoint dir, else the default."""
    if mapping_file is not None:
        mapping = load_mapping(mapping_file)
    elif checkpoint is not None and (Path(checkpoint) / MAPPING_FILENAME).is_file():
        mapping = load_mapping(Path(checkpoint) / MAPPING_FILENAME)
    else:
        mapping = default_mapping(features)
    return ActionMapper(mapping, features)


def load_mapping(path: str | Path) -> ActionMapping:
    """Read a mapping YAML file; SpecError names the bad field and points at the docs."""
    try:
        return load_yaml(ActionMapping, path)
    except SpecError as error:
        raise SpecError(f"{error}\ndocs/teleop.md lists the mapping fields.") from None
