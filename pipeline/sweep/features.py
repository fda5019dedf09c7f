"""What a sweep recording holds: two cameras, both arms' targets and positions, the pile."""

from __future__ import annotations

from pipeline.sweep.env import ACTION_HIGH, ACTION_LOW, MAX_PARTICLES
from schemas import CameraSpec, ExtraSpec, FeatureSpec


def sweep_features(resolution: int = 96) -> FeatureSpec:
    """Cameras `top` and `side` (R x R); action (x0, y0, x1, y1): both pushers' targets; state:
    both pushers' positions, in canvas units. Extras: `particles` (80, 2), the disc centres,
    rows past `particle_count` zero (the count varies per episode, the array shape cannot);
    `in_goal`, the share of disc centres in the goal; `success`, in_goal >= 0.9."""
    return FeatureSpec(
        cameras=(CameraSpec(name="top", height=resolution, width=resolution),
                 CameraSpec(name="side", height=resolution, width=resolution)),
        action_dim=4,
        state_dim=4,
        fps=10.0,
        action_low=(ACTION_LOW,) * 4,
        action_high=(ACTION_HIGH,) * 4,
        action_names=("x0", "y0", "x1", "y1"),
        state_names=("pusher0_x", "pusher0_y", "pusher1_x", "pusher1_y"),
        extras=(
            ExtraSpec(name="particles", shape=(MAX_PARTICLES, 2), dtype="float32"),
            ExtraSpec(name="particle_count", shape=(), dtype="int32"),
            ExtraSpec(name="in_goal", shape=(), dtype="float32"),
            ExtraSpec(name="success", shape=(), dtype="bool"),
        ),
    )
