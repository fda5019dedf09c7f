"""The pixel mug scorer (pipeline.mug.scorer): the triangulated centre matches the simulator's, a
firm grasp's last frame succeeds and a weak one's does not."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.mug.env import CAMERAS, MugSim
from pipeline.mug.primitives import PRIMITIVES
from pipeline.mug.scorer import STANDING, score_episode
from pipeline.mug.vision import locate
from schemas import EpisodeMeta
from sim_model.data.episode import Episode


def _first_and_last(kind: str, seed: int) -> tuple[Episode, list]:
    """One primitive played to its end: an episode of its first and last frames, and the states."""
    with MugSim(resolution=64) as sim:
        state = sim.reset(seed)
        states, frames = [state], [sim.render()]
        for action in PRIMITIVES[kind](state, np.random.default_rng(seed)):
            state = sim.step(action)
            states.append(state)
        frames.append(sim.render())
        held = sim.held()
    meta = EpisodeMeta(episode_id=f"{kind}-{seed}", length=2, task="t", source=kind, fps=10.0)
    episode = Episode(frames={name: np.stack([f[name] for f in frames]) for name in CAMERAS},
                      action=np.zeros((2, 4), np.float32), meta=meta, state=np.zeros((2, 4), np.float32),
                      extras={"held": np.array([False, held])})
    return episode, [states[0], states[-1]]


@pytest.mark.parametrize(("kind", "success"), [("grasp", True), ("weak", False)])
def test_the_pixel_verdict_follows_the_grasp(kind: str, success: bool) -> None:
    episode, states = _first_and_last(kind, 1)
    assert bool(episode.extras["held"][-1]) is success  # the simulator agrees with the premise
    assert score_episode(episode).success is success
    for k, state in enumerate(states):
        centre, apart = locate(episode.frames["front"][k], episode.frames["side"][k])
        truth = state.mug_pos + np.array([0.0, 0.0, STANDING])
        assert np.abs(centre - truth).max() < 0.025 and apart < 0.015  # fingers hide some of a held mug


def test_the_scorer_names_the_cameras_it_needs() -> None:
    episode, _ = _first_and_last("roam", 2)
    only_wrist = Episode(frames={"wrist": episode.frames["wrist"]}, action=episode.action, meta=episode.meta,
                         state=episode.state, extras=episode.extras)
    with pytest.raises(ValueError, match="'front' and 'side'"):
        score_episode(only_wrist)


def test_plausibility_is_high_on_real_frames_and_low_when_the_views_disagree() -> None:
    from pipeline.mug.scorer import plausibility

    episode, _ = _first_and_last("grasp", 3)
    real = plausibility(episode)
    assert real["plausibility"] > 0.5 and real["mug_visible"] == 1.0
    side = episode.frames["side"].copy()
    side[-1] = np.roll(side[-1], 12, axis=1)  # the side view's mug moved, the front's did not
    moved = plausibility(Episode(frames={**episode.frames, "side": side}, action=episode.action,
                                 meta=episode.meta, state=episode.state, extras=episode.extras))
    assert moved["plausibility"] < real["plausibility"] - 0.3
    front = episode.frames["front"].copy()
    front[-1] = 128  # a grey frame: no mug in the front view
    lost = plausibility(Episode(frames={**episode.frames, "front": front}, action=episode.action,
                                meta=episode.meta, state=episode.state, extras=episode.extras))
    assert lost["plausibility"] == 0.0 and lost["mug_visible"] < 1.0


def test_the_analyzer_sees_one_solid_mug_and_none_in_a_grey_frame() -> None:
    from pipeline.mug.vision import MugAnalyzer

    episode, _ = _first_and_last("nudge", 4)
    analyzer = MugAnalyzer()
    front = episode.frames["front"][0]
    assert analyzer.object_mask(front).sum() > 20 and analyzer.shape_score(front) > 0.9
    assert analyzer.probe(front)["mug_pixels"] == analyzer.object_mask(front).sum()
    grey = np.full_like(front, 128)
    assert analyzer.shape_score(grey) == 0.0 and analyzer.probe(grey)["mug_row"] == -1.0
