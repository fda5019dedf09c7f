"""Keyboard/gamepad -> action mapping: defaults, files, clipping, errors."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.pusht.features import pusht_features
from pipeline.teleop.mapping import (
    ActionMapper,
    InputState,
    default_mapping,
    key_codes,
    load_mapping,
    resolve_mapping,
)
from schemas import FeatureSpec, SpecError

DT = 0.1  # one control step at 10 Hz


@pytest.fixture
def pusht() -> FeatureSpec:
    return pusht_features(resolution=96)


def held(*keys: str, axes: tuple[float, ...] = ()) -> InputState:
    return InputState(frozenset(keys), axes)


def test_key_codes_normalise_names_to_browser_codes() -> None:
    assert key_codes("d") == ["KeyD"]
    assert key_codes("D") == ["KeyD"]
    assert key_codes("7") == ["Digit7"]
    assert key_codes("Shift") == ["ShiftLeft", "ShiftRight"]
    assert key_codes("ArrowUp") == ["ArrowUp"]


def test_default_pusht_mapping_moves_target_in_image_coordinates(pusht: FeatureSpec) -> None:
    mapper = resolve_mapping(pusht)
    start = np.array([256.0, 256.0], np.float32)
    step = 0.4 * 512 * DT  # default speed: 40% of the range per second
    np.testing.assert_allclose(mapper.advance(start, held("ArrowRight"), DT), [256 + step, 256])
    np.testing.assert_allclose(mapper.advance(start, held("KeyA"), DT), [256 - step, 256])
    np.testing.assert_allclose(mapper.advance(start, held("ArrowDown"), DT), [256, 256 + step])
    np.testing.assert_allclose(mapper.advance(start, held("KeyW"), DT), [256, 256 - step])
    # Opposite keys cancel; fine control scales; nothing held keeps the target still.
    np.testing.assert_allclose(mapper.advance(start, held("ArrowRight", "ArrowLeft"), DT), start)
    np.testing.assert_allclose(mapper.advance(start, held("ArrowRight", "ShiftLeft"), DT),
                               [256 + step * 0.25, 256])
    np.testing.assert_allclose(mapper.advance(start, held(), DT), start)
    assert mapper.legend()["cursor"] == {"camera": "top", "x": 0, "y": 1}


def test_target_is_clipped_to_action_bounds(pusht: FeatureSpec) -> None:
    mapper = resolve_mapping(pusht)
    action = np.array([500.0, 5.0], np.float32)
    for _ in range(5):
        action = mapper.advance(action, held("ArrowRight", "ArrowUp"), DT)
    np.testing.assert_allclose(action, [512.0, 0.0])


def test_gamepad_stick_has_deadzone_and_full_scale(pusht: FeatureSpec) -> None:
    mapper = resolve_mapping(pusht)
    speed = 0.4 * 512
    assert mapper.velocity(held(axes=(0.1, -0.1))).tolist() == [0.0, 0.0]
    np.testing.assert_allclose(mapper.velocity(held(axes=(1.0, -1.0))), [speed, -speed])
    half = (0.575 - 0.15) / 0.85  # halfway through the live range
    np.testing.assert_allclose(mapper.velocity(held(axes=(0.575, 0.0))), [speed * half, 0], rtol=1e-5)
    # Stick and keys add, but never beyond full speed.
    np.testing.assert_allclose(mapper.velocity(held("ArrowRight", axes=(1.0, 0.0))), [speed, 0])


def test_mapping_file_with_names_and_speeds(tmp_path, pusht: FeatureSpec) -> None:
    path = tmp_path / "map.yaml"
    path.write_text("axes:\n"
                    "  - {dim: y, plus: [i], minus: [k], gamepad_axis: 3, invert: true, speed: 100}\n"
                    "  - {dim: x, plus: [l], minus: [j]}\n"
                    "speed: 0.5\n"
                    "cursor: {x: x, y: y}\n")
    mapper = resolve_mapping(pusht, path)
    np.testing.assert_allclose(mapper.velocity(held("KeyI")), [0, 100])
    np.testing.assert_allclose(mapper.velocity(held("KeyL")), [256, 0])
    np.testing.assert_allclose(mapper.velocity(held(axes=(0, 0, 0, 1.0))), [0, -100])  # inverted
    assert mapper.velocity(held("ArrowRight")).tolist() == [0, 0]  # arrows not mapped here


def test_mapping_beside_checkpoint_is_used(tmp_path, pusht: FeatureSpec) -> None:
    (tmp_path / "teleop.yaml").write_text("axes: [{dim: 0, plus: [e], minus: [q], speed: 10}]\n")
    mapper = resolve_mapping(pusht, checkpoint=tmp_path)
    np.testing.assert_allclose(mapper.velocity(held("KeyE")), [10, 0])


@pytest.mark.parametrize(("text", "needle"), [
    ("axes: [{dim: 0, plus: [d], keyz: [a]}]\n", "keyz"),
    ("axes: []\n", "axes"),
    ("speed: -1\naxes: [{dim: 0}]\n", "speed"),
    ("- just a list\n", "mapping of fields"),
])
def test_bad_mapping_file_names_the_field(tmp_path, text: str, needle: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=needle) as info:
        load_mapping(path)
    assert "iws schema" not in str(info.value)


@pytest.mark.parametrize(("axes", "needle"), [
    ("[{dim: z}]", "'z' is not an action name"),
    ("[{dim: 5}]", "out of range"),
    ("[{dim: 0}, {dim: x}]", "more than once"),
])
def test_mapping_that_does_not_fit_the_model(tmp_path, pusht: FeatureSpec, axes: str, needle: str) -> None:
    path = tmp_path / "map.yaml"
    path.write_text(f"axes: {axes}\n")
    with pytest.raises(SpecError, match=needle):
        resolve_mapping(pusht, path)


def test_unbounded_action_needs_explicit_speed() -> None:
    features = FeatureSpec(cameras=pusht_features(32).cameras, action_dim=3)
    with pytest.raises(SpecError, match="explicit 'speed'"):
        resolve_mapping(features)
    mapping = default_mapping(features).model_copy(deep=True)
    for axis in mapping.axes:
        axis.speed = 0.5
    mapper = ActionMapper(mapping, features)
    np.testing.assert_allclose(mapper.advance(np.zeros(3), held("KeyL"), 1.0), [0, 0, 0.5])
    assert mapper.legend()["cursor"] is None


def test_default_two_arm_mapping_gives_each_hand_an_arm() -> None:
    """4-D sweep actions (x0, y0, x1, y1): WASD + left stick move the first pusher's target,
    the arrows or IJKL + right stick the second's; both at once move both."""
    from pipeline.sweep.features import sweep_features

    features = sweep_features(resolution=96)
    mapper = resolve_mapping(features)
    step = 0.4 * (features.action_high[0] - features.action_low[0]) * DT
    start = np.full(4, 256.0, np.float32)
    moves = {("KeyD",): [1, 0, 0, 0], ("KeyS",): [0, 1, 0, 0], ("KeyW",): [0, -1, 0, 0],
             ("ArrowRight",): [0, 0, 1, 0], ("KeyL",): [0, 0, 1, 0], ("ArrowLeft",): [0, 0, -1, 0],
             ("ArrowDown",): [0, 0, 0, 1], ("KeyI",): [0, 0, 0, -1],
             ("KeyA", "ArrowUp"): [-1, 0, 0, -1]}
    for keys, direction in moves.items():
        np.testing.assert_allclose(mapper.advance(start, held(*keys), DT),
                                   start + step * np.array(direction), rtol=1e-6, err_msg=str(keys))
    speed = step / DT
    np.testing.assert_allclose(mapper.velocity(held(axes=(1.0, 0, 0, -1.0))), [speed, 0, 0, -speed],
                               rtol=1e-6)  # left stick right, right stick up
    legend = mapper.legend()
    assert [(a["name"], a["plus"], a["minus"]) for a in legend["axes"]] == [
        ("x0", ["d"], ["a"]), ("y0", ["s"], ["w"]),
        ("x1", ["ArrowRight", "l"], ["ArrowLeft", "j"]), ("y1", ["ArrowDown", "k"], ["ArrowUp", "i"])]
    assert legend["cursor"] is None  # no x/y target: the pushers' targets are not drawn


def test_a_gripper_moves_over_the_table_rises_and_grips() -> None:
    """The mug task's [x, y, z, grip]: arrows/WASD on the table (up: away from the front camera),
    R/F up and down, C/O close and open; no image crosshair for world coordinates."""
    from pipeline.mug.features import mug_features

    mapper = resolve_mapping(mug_features(resolution=32))
    start = np.array([0.0, 0.0, 0.1, 0.5], np.float32)
    moved = mapper.advance(start, held("ArrowUp", "KeyR", "KeyC"), DT)
    assert moved[0] == 0.0 and moved[1] > 0 and moved[2] > 0.1 and moved[3] > 0.5
    moved = mapper.advance(start, held("KeyA", "KeyF", "KeyO"), DT)
    assert moved[0] < 0 and moved[1] == 0.0 and moved[2] < 0.1 and moved[3] < 0.5
    closed = start
    for _ in range(40):
        closed = mapper.advance(closed, held("KeyC"), DT)
    assert closed[3] == 1.0  # clipped at fully closed
    stick = mapper.advance(start, held(axes=(0.0, 0.0, 1.0, -1.0)), DT)
    assert stick[3] > 0.5 and stick[2] > 0.1  # right stick: x closes, up raises
    legend = mapper.legend()
    assert legend["cursor"] is None and [a["name"] for a in legend["axes"]] == ["x", "y", "z", "grip"]
