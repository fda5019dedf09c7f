"""What a PushT recording holds: the task's FeatureSpec (schemas.FeatureSpec), gym-pusht's own
observation at any square resolution."""

from __future__ import annotations

from schemas import CameraSpec, ExtraSpec, FeatureSpec


def pusht_features(resolution: int = 96) -> FeatureSpec:
    """Features of gym-pusht recordings: one top camera, 2-D agent target, 2-D agent position."""
    return FeatureSpec(
        cameras=(CameraSpec(name="top", height=resolution, width=resolution),),
        action_dim=2,
        state_dim=2,
        fps=10.0,
        action_low=(0.0, 0.0),
        action_high=(512.0, 512.0),
        action_names=("x", "y"),
        state_names=("agent_x", "agent_y"),
        extras=(
            ExtraSpec(name="block_pose", shape=(3,), dtype="float32"),
            ExtraSpec(name="coverage", shape=(), dtype="float32"),
            ExtraSpec(name="success", shape=(), dtype="bool"),
        ),
    )
