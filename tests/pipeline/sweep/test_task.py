"""The sweep task end to end: `iws collect sweep`, the pixel scorer against the simulator, the
demonstrator in the arena, and `iws eval policy --ground-truth sweep`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.cli import main
from pipeline.evaluation.stats import pearson
from pipeline.sweep.env import SweepSim
from pipeline.sweep.features import sweep_features
from pipeline.sweep.scorer import frame_in_goal, score_episode
from pipeline.sweep.truth import roll_sweep
from pipeline.tasks.registry import TASKS, resolve_scorer
from schemas import EpisodeSpec
from sim_model.data.store import EpisodeStore

STEPS = 30


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep") / "play.zarr"
    assert main(["collect", "sweep", "--episodes", "3", "--steps", str(STEPS), "--resolution", "32",
                 "--workers", "1", "--seed", "5", "--out", str(out), "--no-progress"]) == 0
    return out


def test_collect_writes_both_cameras_and_the_pile(store: Path, tmp_path: Path) -> None:
    episodes = EpisodeStore.open(store)
    assert episodes.features == sweep_features(32) and len(episodes) == 3
    episode = episodes.episode(1)
    assert set(episode.frames) == {"top", "side"}
    assert episode.frames["top"].shape == episode.frames["side"].shape == (STEPS, 32, 32, 3)
    assert episode.action.shape == (STEPS, 4) and episode.state.shape == (STEPS, 4)
    count = int(episode.extras["particle_count"][0])
    assert 40 <= count <= 80 and not episode.extras["particles"][:, count:].any()
    # The stores are the same whatever the number of worker processes.
    again = tmp_path / "again.zarr"
    assert main(["collect", "sweep", "--episodes", "2", "--steps", str(STEPS), "--resolution", "32",
                 "--workers", "2", "--seed", "5", "--out", str(again), "--no-progress"]) == 0
    other = EpisodeStore.open(again)
    assert [other.episode(i).checksum() for i in range(2)] == \
        [episodes.episode(i).checksum() for i in range(2)]


def test_the_scorer_agrees_with_the_simulator(store: Path) -> None:
    """Pile layouts with a known share of discs in the goal, at the task's 96 x 96."""
    from pipeline.sweep.render import render

    rng = np.random.default_rng(0)
    sim = SweepSim()
    true, seen = [], []
    for seed in range(12):
        state = sim.reset(seed)
        # Slide the pile part way into the goal, keeping it off the wall.
        shift = np.array([rng.uniform(0.0, 490.0 - state.particles[:, 0].max()), 0.0])
        state = sim.reset_to(state.pushers, state.particles + shift)
        true.append(state.in_goal)
        seen.append(frame_in_goal(render(state.pushers, state.particles, 96)["top"]))
    assert np.ptp(true) > 0.5
    assert pearson(seen, true) > 0.95
    assert np.max(np.abs(np.subtract(seen, true))) < 0.1
    assert resolve_scorer("sweep_in_goal") is score_episode is TASKS["sweep"].scorer()
    score, success = score_episode(EpisodeStore.open(store).episode(0))
    assert 0.0 <= score <= 1.0 and isinstance(success, bool)


def _spec(index: int, seed: int, ref: str = "arena") -> EpisodeSpec:
    return EpisodeSpec(job_id="t", index=index, episode_id=f"t-{index}", seed=seed, init_ref=ref,
                       action_source="demo", horizon=201)


def test_the_demonstrator_sweeps_discs_into_the_goal() -> None:
    from pipeline.sweep.demonstrator import SweepDemonstrator

    sim = SweepSim()
    starts = [sim.reset(s) for s in (100, 102)]
    in_goal, frames = roll_sweep(SweepDemonstrator(sweep_features()), [_spec(0, 1), _spec(1, 2)],
                                 starts, ("top", "side"), 96, 200)
    assert frames.shape == (2, 201, 96, 96, 3)
    # From none in the goal to a share of the pile (0.2-0.5 in 200 steps on these starts).
    assert np.all(in_goal[:, 0] == 0.0) and np.all(in_goal[:, -1] >= 0.1)


def test_eval_policy_with_the_sweep_ground_truth(store: Path, tmp_path: Path) -> None:
    import torch

    from sim_model.world_model import WorldModel

    threads = torch.get_num_threads()
    model = WorldModel.random(sweep_features(32), preset="tiny", seed=0).save(tmp_path / "model")
    out = tmp_path / "eval"
    try:
        assert main(["eval", "policy", "--model", str(model), "--policy", TASKS["sweep"].demonstrator,
                     "--init", str(store), "--episodes", "2", "--horizon", "8", "--batch-size", "2",
                     "--ground-truth", "sweep", "--scorer", "sweep", "--videos", "1",
                     "--threads", "1", "--out", str(out), "--no-progress"]) == 0
    finally:
        torch.set_num_threads(threads)
    report = json.loads((out / "metrics.json").read_text())
    assert report["ground_truth_env"] == "sweep" and report["scorer"] == "sweep"
    for episode in report["episodes"]:
        truth = episode["ground_truth"]
        assert 0.0 <= truth["score"] == truth["final"] <= 1.0
        assert 0.0 <= episode["world_model"]["score"] <= 1.0


def test_sweep_fidelity_reports_views_mass_and_cross_view_consistency(store: Path, tmp_path: Path) -> None:
    import torch

    from pipeline.sweep.vision import SweepAnalyzer
    from sim_model.world_model import WorldModel

    episode = EpisodeStore.open(store).episode(0)
    frames = np.stack([episode.frames["top"], episode.frames["side"]], axis=1)  # (T, V, H, W, 3)
    # The recorded frames against themselves: no error, mass 1 at the start, and the two views'
    # in-goal readings agree as closely as the real cameras do.
    same = SweepAnalyzer().view_metrics(frames[0], frames[0], frames[0])
    assert same["in_goal_error/model"] == same["in_goal_error/baseline"] == 0.0
    assert same["mass/model"] == same["mass/truth"] == 1.0
    assert same["cross_view_gap/model"] == same["cross_view_gap/truth"]
    # A frame with no discs at all has lost all its mass.
    empty = frames[-1].copy()
    empty[...] = np.asarray((236, 236, 232), np.uint8)
    assert SweepAnalyzer().view_metrics(empty, frames[-1], frames[0])["mass/model"] == 0.0

    threads = torch.get_num_threads()
    model = WorldModel.random(sweep_features(32), preset="tiny", seed=0).save(tmp_path / "model")
    out = tmp_path / "fidelity"
    try:
        assert main(["eval", "fidelity", "--model", str(model), "--data", str(store), "--episodes", "2",
                     "--horizons", "1,5", "--object-mask", "sweep", "--videos", "0", "--threads", "1",
                     "--out", str(out), "--no-progress"]) == 0
    finally:
        torch.set_num_threads(threads)
    report = json.loads((out / "metrics.json").read_text())
    for horizon in report["horizons"]:
        extra = horizon["extra"]
        assert {"psnr[top]", "psnr[side]", "ssim[top]", "ssim[side]", "in_goal_error", "mass",
                "cross_view_gap"} <= set(extra)
        assert set(extra["mass"]) == {"model", "truth"} and extra["mass"]["model"]["n"] == 2
        assert set(extra["in_goal_error"]) == {"model", "baseline"}
        # The per-camera PSNRs average to the reported all-camera PSNR.
        views = [extra[f"psnr[{c}]"]["model"]["mean"] for c in ("top", "side")]
        assert np.isclose(np.mean(views), horizon["psnr"]["model"]["mean"], atol=1e-6)


def test_plausibility_is_the_pile_keeping_its_mass(store: Path) -> None:
    from pipeline.sweep.scorer import plausibility

    episode = EpisodeStore.open(store).episode(0)
    real = plausibility(episode)
    assert real["plausibility"] > 0.6 and real["mass"] > 0.8
    lost = episode.frames["top"].copy()
    lost[len(lost) // 2:] = lost[0, 0, 0]  # the pile vanishes half way
    episode.frames["top"] = lost
    assert plausibility(episode)["plausibility"] == 0.0 and plausibility(episode)["mass"] < 0.6
