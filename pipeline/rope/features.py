"""What a rope recording holds: the top camera, the effector's target and position, the rope."""

from __future__ import annotations

from pipeline.rope.env import ACTION_HIGH, ACTION_LOW, SEGMENTS
from schemas import CameraSpec, ExtraSpec, FeatureSpec


def rope_features(resolution: int = 96) -> FeatureSpec:
    """Camera `top` (R x R); action (x, y): the effector's target; state: its position, in canvas
    units. Extras: `rope` (SEGMENTS + 1, 2), the rope's points from the held end; `clip` (3,),
    the clip's centre and the angle of its gap's axis; `inserted`, the rope through the gap."""
    return FeatureSpec(
        cameras=(CameraSpec(name="top", height=resolution, width=resolution),),
        action_dim=2,
        state_dim=2,
        fps=10.0,
        action_low=(ACTION_LOW,) * 2,
        action_high=(ACTION_HIGH,) * 2,
        action_names=("x", "y"),
        state_names=("effector_x", "effector_y"),
        extras=(
            ExtraSpec(name="rope", shape=(SEGMENTS + 1, 2), dtype="float32"),
            ExtraSpec(name="clip", shape=(3,), dtype="float32"),
            ExtraSpec(name="inserted", shape=(), dtype="bool"),
        ),
    )
