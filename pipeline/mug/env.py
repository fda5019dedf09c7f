"""The mug-grasping table in MuJoCo: a parallel-jaw gripper above a table, a mug with a handle
under gravity and friction, and three cameras (two fixed third-person views and one on the
gripper).

Why MuJoCo rather than pymunk (rope, sweep): grasping is 3-D. A grasp holds the mug only by
friction at the fingers, so a weak or off-centre grasp lets it slip when lifted and a push of the
handle turns it about its axis; a 2-D top-down physics has neither gravity along the view nor
friction cones. MuJoCo 4 (`pip install 'iws[mug]'`) renders offscreen through OSMesa (Debian's
`libosmesa6`; `MUJOCO_GL=osmesa`, set here unless the user chose another backend).

Units are metres and seconds. The table is the plane z = 0, the workspace x, y in [-0.2, 0.2].
An action is the gripper's target `[x, y, z, grip]`: its position (the point between the finger
tips) and how closed it is (0 open, 1 closed as far as the fingers go). Position actuators drive
three slide joints of the hand and the two fingers; one control step is 0.1 s (50 physics steps
of 2 ms). The fingers squeeze with a force proportional to how far the target closure is past
the mug's surface, so a low `grip` holds weakly: the mug slides out when lifted.

**Held** means the mug is off the table (its base above HELD_HEIGHT) and both fingers touch it.
The same start and actions give the same table, bit for bit, so ground truth can replay any
action stream.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

CAMERAS = ("front", "side", "wrist")
ACTION_LOW = np.array([-0.2, -0.2, 0.015, 0.0])
ACTION_HIGH = np.array([0.2, 0.2, 0.25, 1.0])
CONTROL_DT = 0.1
PHYSICS_DT = 0.002
MUG_RADIUS = 0.035  # outer radius of the wall
MUG_HEIGHT = 0.08
HANDLE_REACH = 0.028  # how far the handle stands off the wall
FINGER_TRAVEL = 0.05  # each finger's stroke: fully open, the fingers' inner faces are 0.1 apart
FINGER_HALF = 0.006  # half a finger's thickness
HELD_HEIGHT = 0.02
HAND_REST = np.array([0.0, 0.0, 0.2])


def _mug_wall(segments: int = 12) -> str:
    """The mug's wall as `segments` boxes on a ring, so the mug is hollow with a rim to grasp."""
    half_width = MUG_RADIUS * np.tan(np.pi / segments) + 0.001
    geoms = []
    for k in range(segments):
        angle = 2 * np.pi * k / segments
        x, y = (MUG_RADIUS - 0.003) * np.cos(angle), (MUG_RADIUS - 0.003) * np.sin(angle)
        geoms.append(f'<geom type="box" size="0.003 {half_width:.5f} {MUG_HEIGHT / 2}" '
                     f'pos="{x:.5f} {y:.5f} {MUG_HEIGHT / 2}" euler="0 0 {np.degrees(angle):.4f}" '
                     'material="mug" mass="0.012" friction="1.0 0.01 0.001"/>')
    return "\n        ".join(geoms)


def scene_xml() -> str:
    """The MJCF of the table, gripper, mug and cameras."""
    travel = FINGER_TRAVEL
    return f"""
<mujoco model="mug">
  <option timestep="{PHYSICS_DT}" gravity="0 0 -9.81" cone="elliptic" impratio="10"/>
  <visual><global offwidth="256" offheight="256"/><quality shadowsize="0"/></visual>
  <asset>
    <material name="table" rgba="0.78 0.74 0.66 1"/>
    <material name="mug" rgba="0.85 0.2 0.15 1"/>
    <material name="finger" rgba="0.2 0.3 0.8 1"/>
    <material name="hand" rgba="0.25 0.25 0.28 1"/>
  </asset>
  <default><geom condim="4" solref="0.004 1"/></default>
  <worldbody>
    <light pos="0 -0.3 1.2" dir="0 0.25 -1" diffuse="0.8 0.8 0.8"/>
    <light pos="0.4 0.4 1.0" dir="-0.3 -0.3 -1" diffuse="0.3 0.3 0.3"/>
    <geom name="table" type="plane" size="0.3 0.3 0.01" material="table" friction="0.6 0.01 0.001"/>
    <body name="origin" pos="0 0 0.03"/>
    <camera name="front" pos="0 -0.46 0.34" mode="targetbody" target="origin" fovy="55"/>
    <camera name="side" pos="0.46 0.1 0.30" mode="targetbody" target="origin" fovy="55"/>
    <body name="hand" pos="0 0 0" gravcomp="1">
      <joint name="hand_x" type="slide" axis="1 0 0" range="-0.25 0.25" damping="40"/>
      <joint name="hand_y" type="slide" axis="0 1 0" range="-0.25 0.25" damping="40"/>
      <joint name="hand_z" type="slide" axis="0 0 1" range="0 0.3" damping="40"/>
      <geom type="box" size="0.06 0.015 0.01" pos="0 0 0.065" material="hand" mass="0.5"/>
      <camera name="wrist" pos="0 -0.03 0.06" euler="20 0 0" fovy="75"/>
      <body name="finger_left" pos="{-(travel + FINGER_HALF)} 0 0" gravcomp="1">
        <joint name="finger_left" type="slide" axis="1 0 0" range="0 {travel}" damping="5"/>
        <geom name="finger_left" type="box" size="{FINGER_HALF} 0.012 0.03" pos="0 0 0.03"
              material="finger" mass="0.05" friction="1.5 0.02 0.002"/>
      </body>
      <body name="finger_right" pos="{travel + FINGER_HALF} 0 0" gravcomp="1">
        <joint name="finger_right" type="slide" axis="-1 0 0" range="0 {travel}" damping="5"/>
        <geom name="finger_right" type="box" size="{FINGER_HALF} 0.012 0.03" pos="0 0 0.03"
              material="finger" mass="0.05" friction="1.5 0.02 0.002"/>
      </body>
    </body>
    <body name="mug" pos="0.05 0 0">
      <freejoint name="mug"/>
      <geom name="mug_base" type="cylinder" size="{MUG_RADIUS} 0.004" pos="0 0 0.004"
            material="mug" mass="0.08" friction="0.6 0.01 0.001"/>
        {_mug_wall()}
      <geom name="handle" type="box" size="{HANDLE_REACH / 2} 0.005 0.022"
            pos="{MUG_RADIUS + HANDLE_REACH / 2} 0 {MUG_HEIGHT / 2}" material="mug" mass="0.02"/>
    </body>
  </worldbody>
  <actuator>
    <position name="x" joint="hand_x" kp="2000" ctrlrange="-0.25 0.25"/>
    <position name="y" joint="hand_y" kp="2000" ctrlrange="-0.25 0.25"/>
    <position name="z" joint="hand_z" kp="2000" ctrlrange="0 0.3"/>
    <position name="left" joint="finger_left" kp="300" ctrlrange="0 {travel}"/>
    <position name="right" joint="finger_right" kp="300" ctrlrange="0 {travel}"/>
  </actuator>
</mujoco>
"""


@dataclass
class State:
    """The table at one instant: the gripper's position (3,) and opening (the tips' distance,
    metres), the mug's position (3,: its base's centre) and orientation (4,: quaternion w x y z)."""

    hand: np.ndarray
    width: float
    mug_pos: np.ndarray
    mug_quat: np.ndarray

    @property
    def mug_yaw(self) -> float:
        """The mug's turn about the vertical (radians; 0: the handle toward +x)."""
        w, x, y, z = self.mug_quat
        return float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))

    @property
    def mug_tilt(self) -> float:
        """The angle between the mug's axis and the vertical (radians)."""
        w, x, y, _ = self.mug_quat
        return float(np.arccos(np.clip(1 - 2 * (x * x + y * y), -1.0, 1.0)))


def draw_start(rng: np.random.Generator) -> State:
    """A random start: the mug upright somewhere on the table's middle, its handle at a random
    angle, the gripper open at rest above the table."""
    yaw = rng.uniform(-np.pi, np.pi)
    mug = np.array([rng.uniform(-0.1, 0.1), rng.uniform(-0.08, 0.08), 0.0])
    quat = np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])
    hand = HAND_REST + np.array([rng.uniform(-0.05, 0.05), rng.uniform(-0.05, 0.05), 0.0])
    return State(hand=hand, width=2 * FINGER_TRAVEL, mug_pos=mug, mug_quat=quat)


def _ensure_backend() -> None:
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])


class MugSim:
    """The physics and cameras of one table: `reset(seed)` or `reset_to(state)`, then `step`
    4-D actions; `render()` gives every camera's frame. Call `close()` (or use `with`) to free
    the offscreen context."""

    def __init__(self, resolution: int = 96) -> None:
        _ensure_backend()
        from pipeline.tasks.extras import require

        self._mj: Any = require("mujoco", "mug")
        self.model = self._mj.MjModel.from_xml_string(scene_xml())
        self.data = self._mj.MjData(self.model)
        self.resolution = resolution
        self._renderer: Any = None
        self._mug_joint = self.model.joint("mug").qposadr[0]
        self._fingers = [self.model.joint(f"finger_{side}").qposadr[0] for side in ("left", "right")]
        self._hand = [self.model.joint(f"hand_{a}").qposadr[0] for a in "xyz"]
        self._mug_geoms = {g for g in range(self.model.ngeom) if self.model.geom_bodyid[g] == self.model.body("mug").id}
        self._finger_geoms = [self.model.geom(f"finger_{side}").id for side in ("left", "right")]

    def __enter__(self) -> MugSim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    # -- state --------------------------------------------------------------------------------

    def reset(self, seed: int) -> State:
        return self.reset_to(draw_start(np.random.default_rng(int(seed))))

    def reset_to(self, state: State) -> State:
        """Start from a given state, at rest; the controls hold the gripper where it is."""
        mj = self._mj
        mj.mj_resetData(self.model, self.data)
        qpos = self.data.qpos
        for adr, value in zip(self._hand, state.hand, strict=True):
            qpos[adr] = value
        travel = np.clip((2 * FINGER_TRAVEL - state.width) / 2, 0.0, FINGER_TRAVEL)
        for adr in self._fingers:
            qpos[adr] = travel
        qpos[self._mug_joint:self._mug_joint + 3] = state.mug_pos
        qpos[self._mug_joint + 3:self._mug_joint + 7] = state.mug_quat
        self.data.ctrl[:] = np.concatenate([state.hand, [travel, travel]])
        mj.mj_forward(self.model, self.data)
        return self.state()

    def state(self) -> State:
        qpos = self.data.qpos
        closure = qpos[self._fingers[0]] + qpos[self._fingers[1]]
        return State(hand=np.array([qpos[a] for a in self._hand]),
                     width=float(2 * FINGER_TRAVEL - closure),
                     mug_pos=qpos[self._mug_joint:self._mug_joint + 3].copy(),
                     mug_quat=qpos[self._mug_joint + 3:self._mug_joint + 7].copy())

    def held(self) -> bool:
        """Whether the mug is off the table and both fingers touch it."""
        if self.data.qpos[self._mug_joint + 2] < HELD_HEIGHT:
            return False
        touching = set()
        for contact in self.data.contact[:self.data.ncon]:
            pair = {int(contact.geom1), int(contact.geom2)}
            for finger in self._finger_geoms:
                if finger in pair and pair & self._mug_geoms:
                    touching.add(finger)
        return len(touching) == 2

    # -- control ------------------------------------------------------------------------------

    def step(self, action: np.ndarray) -> State:
        """One 0.1 s control step toward `action` ([x, y, z, grip], clipped to the ranges)."""
        target = np.clip(np.asarray(action, dtype=np.float64), ACTION_LOW, ACTION_HIGH)
        travel = target[3] * FINGER_TRAVEL
        self.data.ctrl[:] = [target[0], target[1], target[2], travel, travel]
        self._mj.mj_step(self.model, self.data, nstep=int(round(CONTROL_DT / PHYSICS_DT)))
        return self.state()

    # -- cameras ------------------------------------------------------------------------------

    def render(self) -> dict[str, np.ndarray]:
        """Every camera's frame now, (resolution, resolution, 3) uint8, by name (CAMERAS)."""
        if self._renderer is None:
            self._renderer = self._mj.Renderer(self.model, self.resolution, self.resolution)
        frames = {}
        for name in CAMERAS:
            self._renderer.update_scene(self.data, camera=name)
            frames[name] = self._renderer.render().copy()
        return frames
