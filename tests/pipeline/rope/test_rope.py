"""The rope table: its primitives reach the outcomes they are named for, collection is
byte-identical for any number of workers and resumes to the same store."""

import numpy as np
import pytest

from pipeline.rope.collect import CollectConfig, collect, open_output
from pipeline.rope.env import SEGMENT_LENGTH, RopeSim, draw_start, in_clip, posts
from pipeline.rope.primitives import PRIMITIVES
from pipeline.rope.render import render_top
from schemas import SpecError


def _outcome(name: str, seed: int) -> bool:
    rng = np.random.default_rng(seed)
    sim = RopeSim()
    state = sim.reset_to(draw_start(rng))
    for target in PRIMITIVES[name](state, rng):
        state = sim.step(target)
    links = np.linalg.norm(np.diff(state.rope, axis=0), axis=1)
    assert np.allclose(links, SEGMENT_LENGTH, atol=0.5)  # the joints hold under the pull
    return state.inserted


def test_route_threads_the_clip_and_swing_passes_it():
    assert all(_outcome("route", seed) for seed in range(6))
    assert not any(_outcome("swing", seed) for seed in range(6))


def test_in_clip_is_crossing_the_gap_between_the_posts():
    clip = np.array([256.0, 256.0])
    a, b = posts(clip, 0.0)
    assert in_clip(np.array([[256.0, 200.0], [256.0, 300.0]]), clip, 0.0)
    assert not in_clip(np.array([[b[0] + 30, 200.0], [b[0] + 30, 300.0]]), clip, 0.0)  # beside a post
    assert not in_clip(np.array([[200.0, 256.0], [300.0, 256.0]]), clip, 0.0)  # along the axis


def test_the_camera_shows_rope_posts_and_effector():
    state = draw_start(np.random.default_rng(0))
    frame = render_top(state, 96)
    colours = {tuple(c) for c in frame.reshape(-1, 3)}
    assert frame.shape == (96, 96, 3) and {(200, 90, 30), (40, 150, 90), (60, 100, 220)} <= colours


def test_collection_is_the_same_for_any_workers_and_resumes(tmp_path):
    config = CollectConfig(episodes=3, steps=12, seed=4, resolution=32)
    one = open_output(config, str(tmp_path / "one.zarr"))
    collect(config, one, workers=1)
    two = open_output(config, str(tmp_path / "two.zarr"))
    collect(config, two, workers=2)
    part = open_output(CollectConfig(episodes=2, steps=12, seed=4, resolution=32), str(tmp_path / "part.zarr"))
    collect(CollectConfig(episodes=2, steps=12, seed=4, resolution=32), part)
    resumed = open_output(config, str(tmp_path / "part.zarr"), resume=True)
    stats = collect(config, resumed)
    assert stats.episodes == 1
    for i in range(3):
        a, b, c = one.episode(i), two.episode(i), resumed.episode(i)
        for key in ("top",):
            assert np.array_equal(a.frames[key], b.frames[key]) and np.array_equal(a.frames[key], c.frames[key])
        for key in ("rope", "clip", "inserted"):
            assert np.array_equal(a.extras[key], b.extras[key]) and np.array_equal(a.extras[key], c.extras[key])
        assert np.array_equal(a.action, c.action) and a.state.shape == (12, 2)
    with pytest.raises(SpecError, match="cannot resume"):
        open_output(CollectConfig(episodes=3, steps=12, seed=5, resolution=32), str(tmp_path / "one.zarr"),
                    resume=True)


def test_the_pixel_scorer_reads_the_outcome_of_route_and_swing():
    from pipeline.rope.scorer import score_episode, truth_score
    from pipeline.rope.vision import frame_score
    from schemas import EpisodeMeta
    from sim_model.data.episode import Episode

    for name, through in (("route", True), ("swing", False)):
        rng = np.random.default_rng(11)
        sim = RopeSim()
        state = sim.reset_to(draw_start(rng))
        frames = [render_top(state, 96)]
        for target in PRIMITIVES[name](state, rng):
            state = sim.step(target)
        for _ in range(15):  # let go: the effector moves off the clip
            state = sim.step(state.effector + np.array([0.0, 8.0 if state.effector[1] < 256 else -8.0]))
        frames.append(render_top(state, 96))
        assert state.inserted is through and (truth_score(state) == 1.0) is through
        assert (frame_score(frames[-1]) == 1.0) is through and frame_score(frames[0]) < 0.5
        episode = Episode(frames={"top": np.stack(frames)}, action=np.zeros((2, 2), np.float32),
                          meta=EpisodeMeta(episode_id="e", length=2, task="t", source="s"))
        assert score_episode(episode).success is through


def test_ground_truth_from_a_collected_store_and_the_demonstrator_threads_it(tmp_path):
    from pipeline.cli import main
    from pipeline.rope.demonstrator import RopeDemonstrator
    from pipeline.rope.features import rope_features
    from pipeline.rope.truth import evaluate_in_rope
    from schemas import EpisodeSpec

    out = tmp_path / "starts.zarr"
    assert main(["collect", "rope", "--episodes", "2", "--steps", "2", "--seed", "20000", "--workers", "1",
                 "--out", str(out), "--no-progress"]) == 0
    specs = [EpisodeSpec(job_id="e", index=i, episode_id=f"e-{i}", seed=i, init_ref=f"{out}#{i}:0",
                         action_source="demo", horizon=121) for i in range(2)]
    features = rope_features()
    scores, videos = evaluate_in_rope(RopeDemonstrator(features), specs, features, 120, 2, 1)
    assert [s.success for s in scores] == [True, True] and [s.score for s in scores] == [1.0, 1.0]
    assert len(videos) == 1 and videos[0].shape == (121, 96, 96, 3)


def test_plausibility_is_the_rope_keeping_its_length_and_the_clip_in_view():
    from pipeline.rope.scorer import plausibility
    from schemas import EpisodeMeta
    from sim_model.data.episode import Episode

    rng = np.random.default_rng(3)
    sim = RopeSim()
    state = sim.reset_to(draw_start(rng))
    frames = [render_top(state, 96)]
    for target in PRIMITIVES["route"](state, rng)[:20]:
        state = sim.step(target)
        frames.append(render_top(state, 96))
    frames = np.stack(frames)

    def check(frames: np.ndarray) -> dict[str, float]:
        return plausibility(Episode(frames={"top": frames}, action=np.zeros((len(frames), 2), np.float32),
                                    meta=EpisodeMeta(episode_id="e", length=len(frames))))

    real = check(frames)
    assert real["plausibility"] > 0.8 and real["clip_visible"] == 1.0
    gone = frames.copy()
    gone[11:] = frames[0, 0, 0]  # rope, clip and effector vanish
    assert check(gone)["plausibility"] == 0.0 and check(gone)["rope"] < 0.6
