"""The shape contract between datasets and models (cf. Diffusion Policy's shape_meta)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
RESERVED_KEYS = {"action", "state", "timestamp", "episode_ends"}


class CameraSpec(BaseModel):
    """One RGB camera view."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Camera key, e.g. 'top'; stored as data/<name> in Zarr and "
                      "observation.images.<name> in LeRobot.")
    height: int = Field(gt=0, le=4096, description="Image height in pixels.")
    width: int = Field(gt=0, le=4096, description="Image width in pixels.")

    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        if not _KEY.match(name):
            raise ValueError("use letters, digits and underscores, starting with a letter")
        if name in RESERVED_KEYS:
            raise ValueError(f"'{name}' is reserved; pick another camera name")
        return name


class ExtraSpec(BaseModel):
    """A per-step array recorded beside frames and actions (e.g. block pose, coverage)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Key of the per-step array, stored as data/<name>.")
    shape: tuple[int, ...] = Field(default=(), description="Per-step shape; () for a scalar.")
    dtype: str = Field(default="float32", description="numpy dtype name, e.g. 'float32', 'bool'.")


class FeatureSpec(BaseModel):
    """What one step of an episode holds: cameras, action and state sizes, rate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cameras: tuple[CameraSpec, ...] = Field(min_length=1, description="Camera views, in model order.")
    action_dim: int = Field(gt=0, description="Size of the action vector.")
    state_dim: int = Field(default=0, ge=0, description="Size of the proprioceptive state; 0 if none.")
    fps: float = Field(default=10.0, gt=0, description="Control rate in steps per second.")
    action_low: tuple[float, ...] | None = Field(
        default=None, description="Per-dimension lower bound of valid actions (None: unbounded).")
    action_high: tuple[float, ...] | None = Field(
        default=None, description="Per-dimension upper bound of valid actions (None: unbounded).")
    action_names: tuple[str, ...] | None = Field(
        default=None, description="Optional names of the action dimensions, e.g. ('x', 'y').")
    state_names: tuple[str, ...] | None = Field(
        default=None, description="Optional names of the state dimensions.")
    extras: tuple[ExtraSpec, ...] = Field(
        default=(), description="Other per-step arrays recorded with each episode.")

    @property
    def camera_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.cameras)

    @model_validator(mode="after")
    def _consistent(self) -> FeatureSpec:
        names = [c.name for c in self.cameras] + [e.name for e in self.extras]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"keys {dupes} appear more than once among cameras and extras")
        for bound in ("action_low", "action_high", "action_names"):
            value = getattr(self, bound)
            if value is not None and len(value) != self.action_dim:
                raise ValueError(f"{bound} has {len(value)} entries but action_dim is {self.action_dim}")
        if self.state_names is not None and len(self.state_names) != self.state_dim:
            raise ValueError(f"state_names has {len(self.state_names)} entries but state_dim is {self.state_dim}")
        if self.action_low is not None and self.action_high is not None:
            if any(lo >= hi for lo, hi in zip(self.action_low, self.action_high, strict=True)):
                raise ValueError("every action_low must be below its action_high")
        return self
