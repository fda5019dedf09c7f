"""The sweep arena: deterministic for a seed, the pile's mass conserved, both pushers driven by
the 4-D action, and two cameras that differ in geometry."""

from __future__ import annotations

import numpy as np

from pipeline.sweep.env import (
    MAX_PARTICLES,
    MIN_PARTICLES,
    WALL_HIGH,
    WALL_LOW,
    SweepSim,
)
from pipeline.sweep.primitives import PRIMITIVES
from pipeline.sweep.render import render
from pipeline.sweep.vision import goal_mask, in_goal_pixel_fraction, particle_mask, pusher_positions


def _play(seed: int, steps: int = 40) -> list:
    """Every primitive in turn from the arena's own start for `seed`; the states."""
    rng = np.random.default_rng(seed)
    sim = SweepSim()
    states = [sim.reset(seed)]
    for name in PRIMITIVES:
        for target in PRIMITIVES[name](states[-1], rng)[:steps // len(PRIMITIVES)]:
            states.append(sim.step(target))
    return states


def test_the_same_seed_gives_the_same_episode_and_another_seed_another() -> None:
    a, b, c = _play(3), _play(3), _play(4)
    assert all(np.array_equal(x.particles, y.particles) and np.array_equal(x.pushers, y.pushers)
               for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0].particles[:5], c[0].particles[:5])


def test_the_pile_keeps_every_disc_inside_the_walls() -> None:
    for seed in range(3):
        states = _play(seed, steps=80)
        count = len(states[0].particles)
        assert MIN_PARTICLES <= count <= MAX_PARTICLES
        for state in states:
            assert len(state.particles) == count
            assert np.all((state.particles > WALL_LOW) & (state.particles < WALL_HIGH))
        moved = np.abs(states[-1].particles - states[0].particles).max(axis=1)
        assert (moved > 1.0).any()  # play did push discs
        # Mass seen in pixels: the pile's particle pixels stay within 25% of the start.
        areas = [particle_mask(render(s.pushers, s.particles, 96)["top"]).sum() for s in states[::10]]
        assert max(areas) / min(areas) < 1.25


def test_the_4d_action_moves_each_pusher_to_its_own_target() -> None:
    sim = SweepSim()
    start = sim.reset(0)
    targets = np.array([60.0, 60.0, 450.0, 450.0])
    for _ in range(30):
        state = sim.step(targets)
    assert np.allclose(state.pushers, targets.reshape(2, 2), atol=1.0)
    assert not np.allclose(start.pushers, state.pushers)


def test_both_views_render_and_differ_in_geometry() -> None:
    state = SweepSim().reset(1)
    views = render(state.pushers, state.particles, 96)
    for frame in views.values():
        assert frame.shape == (96, 96, 3) and frame.dtype == np.uint8
    top, side = views["top"], views["side"]
    assert np.abs(top.astype(int) - side.astype(int)).mean() > 20
    # The goal square stays a square from above and becomes a smaller slanted quad from the side.
    assert goal_mask("top", 96, 96).sum() > 2 * goal_mask("side", 96, 96).sum() > 0
    assert particle_mask(top).sum() > 0 and particle_mask(side, "side").sum() > 0
    # Pushers are found where they are, in canvas units, from the top view alone.
    assert np.allclose(pusher_positions(top), state.pushers, atol=4.0)


def test_the_side_view_draws_near_over_far() -> None:
    """A disc just behind a pusher on the side camera's line of sight is hidden there, though the
    top view shows it; the same disc in front of the pusher is seen from both."""
    from pipeline.sweep.render import SIDE

    pusher = np.array([250.0, 300.0])
    toward_camera = (SIDE.eye[:2] - pusher) / np.linalg.norm(SIDE.eye[:2] - pusher)
    other_arm = np.array([60.0, 60.0])
    seen = {}
    for where, disc in (("behind", pusher - 30.0 * toward_camera), ("front", pusher + 30.0 * toward_camera)):
        views = render(np.stack([pusher, other_arm]), disc[None], 96)
        seen[where] = (particle_mask(views["top"]).sum(), particle_mask(views["side"], "side").sum())
    assert seen["behind"][0] > 0 and seen["front"][0] > 0
    assert seen["behind"][1] == 0 < seen["front"][1]


def test_pixel_fraction_reads_the_goal() -> None:
    pushers = np.array([[60.0, 60.0], [100.0, 60.0]])
    inside = np.array([[400.0, 250.0], [430.0, 250.0]])
    outside = np.array([[100.0, 300.0], [150.0, 300.0]])
    assert in_goal_pixel_fraction(render(pushers, inside, 96)["top"])[0] == 1.0
    assert in_goal_pixel_fraction(render(pushers, outside, 96)["top"])[0] == 0.0
    half = in_goal_pixel_fraction(render(pushers, np.concatenate([inside, outside]), 96)["top"])[0]
    assert abs(half - 0.5) < 0.08  # discs drawn at their rims, whole pixels
