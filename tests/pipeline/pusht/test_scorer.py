"""The PushT coverage scorer against gym-pusht's own coverage, and the job-filter hook."""

import numpy as np
import pytest

from pipeline.pusht.env import PushTSim
from pipeline.pusht.scorer import (
    GOAL_POSE,
    MIN_SHAPE,
    coverage_of_pose,
    coverage_trace,
    frame_coverage,
    loose_shape_score,
    pixel_coverage,
    pixel_coverage_score,
    score_episode,
)
from pipeline.tasks.registry import resolve_scorer
from schemas import EpisodeMeta, SpecError
from sim_model.data.episode import Episode
from workers.scoring import TaskScore
from workers.scoring import score_episode as run_scorer

FAR_AGENT = np.array([60.0, 460.0])  # well clear of the goal region


@pytest.fixture(scope="module")
def sim():
    sim = PushTSim(resolution=96)
    yield sim
    sim.close()


# Poses about the goal (offsets x, y, angle) spanning full to zero coverage.
OFFSETS = [(0.0, 0.0, 0.0), (3.0, -2.0, 0.02), (-8.0, 6.0, -0.06), (20.0, 10.0, 0.15),
           (-35.0, 25.0, -0.4), (60.0, -50.0, 1.2), (150.0, 150.0, 2.5)]


@pytest.mark.parametrize("offset", OFFSETS)
def test_pose_coverage_is_gym_pushts_own(sim, offset):
    pose = GOAL_POSE + np.array(offset)
    obs = sim.reset_to(FAR_AGENT, pose)
    assert np.allclose(obs.block_pose, pose)
    assert coverage_of_pose(obs.block_pose) == pytest.approx(obs.coverage, abs=1e-9)


def test_frames_agree_with_gym_coverage(sim):
    """From pixels alone, within 0.03 of gym-pusht's coverage at 96 x 96 (agent clear or touching)."""
    errors = []
    for offset in OFFSETS:
        obs = sim.reset_to(FAR_AGENT, GOAL_POSE + np.array(offset))
        errors.append(abs(frame_coverage(obs.frame) - obs.coverage))
    touching = sim.reset_to(np.array([256.0, 235.0]), GOAL_POSE + np.array([4.0, 3.0, 0.03]))
    errors.append(abs(frame_coverage(touching.frame) - touching.coverage))
    assert max(errors) < 0.03, errors


def test_t_on_the_goal_succeeds(sim):
    obs = sim.reset_to(FAR_AGENT, GOAL_POSE)
    assert obs.coverage == pytest.approx(1.0)
    frames = np.stack([sim.reset_to(FAR_AGENT, GOAL_POSE + [80.0, 0.0, 0.5]).frame, obs.frame])
    episode = Episode(frames={"top": frames}, action=np.zeros((2, 2), np.float32),
                      meta=EpisodeMeta(episode_id="on-goal", length=2))
    score, success = score_episode(episode)
    assert success and score > 0.97
    # gym-pusht's threshold: coverage > 0.95; a T well off the goal fails.
    off = Episode(frames={"top": frames[:1]}, action=np.zeros((1, 2), np.float32),
                  meta=EpisodeMeta(episode_id="off-goal", length=1))
    assert score_episode(off).success is False


def test_no_t_in_sight_scores_zero():
    assert frame_coverage(np.full((32, 32, 3), 255, np.uint8)) == 0.0
    noise = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    assert 0.0 <= frame_coverage(noise) <= 1.0
    assert coverage_of_pose(None) == 0.0


def test_a_melted_t_on_the_goal_earns_nothing(sim):
    """A generated frame whose T has smeared over the goal is not credited with coverage: the T
    must still be rigid (shape score >= MIN_SHAPE) for its coverage to count."""
    from pipeline.pusht.vision import rigid_shape_score

    on_goal = sim.reset_to(FAR_AGENT, GOAL_POSE).frame
    assert rigid_shape_score(on_goal) >= MIN_SHAPE and frame_coverage(on_goal) > 0.95
    # Smear the T sideways across the goal, as a drifting rollout does: a box blur along x.
    def smear(width: int) -> np.ndarray:
        padded = np.pad(on_goal.astype(np.float64), ((0, 0), (width // 2, width // 2), (0, 0)), mode="edge")
        rows = [np.apply_along_axis(np.convolve, 1, padded[..., c], np.ones(width) / width, mode="valid")
                for c in range(3)]
        return np.stack(rows, -1).round().astype(np.uint8)

    assert frame_coverage(smear(5)) > 0.9  # a slightly soft T still counts
    melted = smear(21)
    assert rigid_shape_score(melted) < MIN_SHAPE
    assert frame_coverage(melted) == 0.0


def test_trace_stride_keeps_the_last_frame(sim):
    frames = np.stack([sim.reset_to(FAR_AGENT, GOAL_POSE + [d, 0.0, 0.0]).frame for d in (40, 20, 10, 5, 0)])
    trace = coverage_trace(frames, stride=3)
    assert trace.steps.tolist() == [0, 3, 4]
    assert trace.final == pytest.approx(trace.best) and trace.success and trace.first_success == 4
    with pytest.raises(ValueError, match="stride"):
        coverage_trace(frames, stride=0)


def test_builtin_scorer_serves_the_job_filter(sim):
    scorer = resolve_scorer("pusht_coverage")
    assert scorer is score_episode and resolve_scorer("pusht") is score_episode  # or by task name
    frames = sim.reset_to(FAR_AGENT, GOAL_POSE).frame[None]  # (1, H, W, 3)
    episode = Episode(frames={"top": frames}, action=np.zeros((1, 2), np.float32),
                      meta=EpisodeMeta(episode_id="e", length=1))
    result = run_scorer(scorer, episode)
    assert isinstance(result, TaskScore) and result.success and result.score > 0.97


def test_scorer_errors_name_the_problem():
    with pytest.raises(SpecError, match="pusht_coverage"):
        resolve_scorer("coverage", "--scorer")
    two_cams = Episode(frames={"left": np.zeros((1, 8, 8, 3), np.uint8), "right": np.zeros((1, 8, 8, 3), np.uint8)},
                       action=np.zeros((1, 2), np.float32), meta=EpisodeMeta(episode_id="two", length=1))
    with pytest.raises(SpecError, match="camera 'top'"):
        run_scorer(resolve_scorer("pusht_coverage"), two_cams)


def test_generation_job_labels_episodes_with_coverage(tmp_path, tiny_checkpoint, tiny_pusht_store):
    """A job driven by the demonstrator with the pusht_coverage filter, rolled in-process by a
    replica (no Ray) that preflight hands the scorer to: each record carries the score the
    scorer gives the written episode."""
    import torch

    from pipeline.generate.expand import groups
    from pipeline.generate.preflight import preflight
    from schemas import JobSpec
    from sim_model.data.store import EpisodeStore
    from tests.workers.jobs import job_dict
    from workers.replica import WorldModelReplica

    out = tmp_path / "out"  # 'label': every episode in its group's shard, scored
    job = job_dict(tiny_checkpoint, {"dataset": tiny_pusht_store.path}, out, episodes=2,
                   output={"path": str(out)},
                   filter={"scorer": "pusht_coverage", "mode": "label"},
                   action_sources={"demo": {"kind": "policy",
                                            "policy": "pipeline.pusht.demonstrator:PushTDemonstrator"}})
    plan = preflight(JobSpec.model_validate(job))
    assert plan.scorer is score_episode
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        replica = WorldModelReplica(plan.spec.model_dump_json(), str(tmp_path / "out"), scorer=plan.scorer)
        assert replica.error == ""
        batch = groups(plan.episodes, plan.spec.batch_size)[0]
        records = replica.roll_group(batch)
    finally:
        torch.set_num_threads(threads)
    shard = EpisodeStore.open(out / "dataset" / "shards" / "00000000.zarr")
    for row, record in enumerate(records):
        episode = shard.episode(row)
        assert episode.meta.source == "policy:pipeline.pusht.demonstrator:PushTDemonstrator"
        assert (record.score, record.success) == tuple(score_episode(episode))


def test_looser_scorers_track_gym_coverage_and_credit_a_bent_t(sim):
    """pixel_coverage reads the T-coloured share of the goal (no shape fit): close to gym-pusht's
    coverage on rigid T's, and it still credits a T that a model has bent, which the rigid-shape
    gate of `frame_coverage` refuses; a frame without a T scores 0."""
    for offset in OFFSETS:
        obs = sim.reset_to(FAR_AGENT, GOAL_POSE + np.array(offset))
        assert abs(pixel_coverage(obs.frame) - obs.coverage) < 0.12, offset
    obs = sim.reset_to(FAR_AGENT, GOAL_POSE + np.array([3.0, -2.0, 0.02]))
    bent = obs.frame.copy()
    bent[:, 48:] = np.roll(obs.frame[:, 48:], 6, axis=0)  # the right half of the T slides down
    assert frame_coverage(bent) == 0.0 and pixel_coverage(bent) > 0.6
    empty = np.full_like(obs.frame, 255)
    assert pixel_coverage(empty) == 0.0
    episode = Episode(frames={"top": np.stack([empty, obs.frame])}, action=np.zeros((2, 2), np.float32),
                      meta=EpisodeMeta(episode_id="loose", length=2))
    assert pixel_coverage_score(episode).score == pytest.approx(pixel_coverage(obs.frame))
    assert loose_shape_score(episode).score == pytest.approx(score_episode(episode).score, abs=1e-9)


def test_plausibility_is_a_rigid_t_in_view(sim):
    """The task's plausibility check: ~1 for simulator frames of a T pushed along, lower when the
    T melts, 0 at probes where the T is gone (and the registry hands the check to a job)."""
    from pipeline.pusht.scorer import plausibility
    from pipeline.tasks.registry import resolve_plausibility
    from schemas.job import FilterSpec

    frames = np.stack([sim.reset_to(np.array([100.0 + 5 * t, 400.0]), GOAL_POSE + [3.0 * t, -2.0 * t, 0.02 * t]).frame
                       for t in range(21)])

    def check(frames: np.ndarray) -> dict[str, float]:
        return plausibility(Episode(frames={"top": frames}, action=np.zeros((len(frames), 2), np.float32),
                                    meta=EpisodeMeta(episode_id="e", length=len(frames))))

    real = check(frames)
    assert real["plausibility"] > 0.9 and real["visible"] == 1.0 and real["rigid_shape"] > 0.9
    gone = frames.copy()
    gone[11:] = 255  # the second half shows neither T nor agent
    assert check(gone)["visible"] == 0.5 and check(gone)["plausibility"] == 0.0
    blurred = frames.copy()
    blurred[1:] = np.stack([np.roll(frames[1:], s, axis=2) for s in range(-10, 11)]).mean(axis=0).astype(np.uint8)
    assert check(blurred)["plausibility"] < real["plausibility"] - 0.1
    assert resolve_plausibility(FilterSpec(scorer="pusht_coverage")) is plausibility
    with pytest.raises(SpecError, match="filter.plausibility.task"):
        resolve_plausibility(FilterSpec(scorer="tests.workers.policies:even_seed_scorer", plausibility={"min": 0.5}))
    assert resolve_plausibility(FilterSpec(scorer="tests.workers.policies:even_seed_scorer")) is None
