"""What a mug recording holds: three cameras, the gripper's target and state, the mug's pose."""

from __future__ import annotations

from pipeline.mug.env import ACTION_HIGH, ACTION_LOW, CAMERAS
from schemas import CameraSpec, ExtraSpec, FeatureSpec


def mug_features(resolution: int = 96) -> FeatureSpec:
    """Cameras `front`, `side` and `wrist` (R x R); action (x, y, z, grip): the gripper's
    target, metres and closure in [0, 1]; state: its position and the fingers' opening (metres).
    Extras: `mug_pose` (7,), the base's centre and orientation (quaternion w x y z); `held`, the
    mug off the table between both fingers."""
    return FeatureSpec(
        cameras=tuple(CameraSpec(name=name, height=resolution, width=resolution) for name in CAMERAS),
        action_dim=4,
        state_dim=4,
        fps=10.0,
        action_low=tuple(float(v) for v in ACTION_LOW),
        action_high=tuple(float(v) for v in ACTION_HIGH),
        action_names=("x", "y", "z", "grip"),
        state_names=("hand_x", "hand_y", "hand_z", "width"),
        extras=(
            ExtraSpec(name="mug_pose", shape=(7,), dtype="float32"),
            ExtraSpec(name="held", shape=(), dtype="bool"),
        ),
    )
