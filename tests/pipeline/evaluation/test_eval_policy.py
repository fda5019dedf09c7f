"""`iws eval policy` end to end: tiny random world model, real gym-pusht starts at 32 x 32."""

import json

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from pipeline.cli import main
from pipeline.evaluation.policy_report import PolicyReport
from pipeline.evaluation.stats import bootstrap_mean_interval, pearson, wilson_interval
from pipeline.pusht.env import PushTSim, wrapped_pose
from pipeline.pusht.features import pusht_features
from schemas import CameraSpec, EpisodeMeta, FeatureSpec
from sim_model.data.episode import Episode
from sim_model.data.store import EpisodeStore
from workers.actions import Observation

TARGET = np.array([256.0, 300.0], np.float32)


def constant_policy(step: int, observation: Observation) -> np.ndarray:
    """Always drive the agent to TARGET (a 'module:function' policy for the CLI)."""
    return np.tile(TARGET, (len(observation), 1))


@pytest.fixture(autouse=True)
def restore_torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def pusht_starts(tmp_path_factory):
    """A store of 3 short gym-pusht episodes at 32 x 32 (seeds 0-2, agent nudged right), with
    the state and block_pose that the ground-truth side starts from."""
    path = tmp_path_factory.mktemp("starts") / "starts.zarr"
    store = EpisodeStore.create(path, pusht_features(32))
    sim = PushTSim(32)
    for seed in range(3):
        obs = [sim.reset(seed)]
        actions = [(obs[0].agent + [8.0, 0.0]).astype(np.float32) for _ in range(3)]
        obs += [sim.step(a) for a in actions[:-1]]
        store.append(Episode(
            frames={"top": np.stack([o.frame for o in obs])}, action=np.stack(actions),
            meta=EpisodeMeta(episode_id=f"start-{seed}", length=3),
            state=np.stack([o.agent for o in obs]).astype(np.float32),
            extras={"block_pose": np.stack([wrapped_pose(o.block_pose) for o in obs]),
                    "coverage": np.array([o.coverage for o in obs], np.float32),
                    "success": np.array([o.success for o in obs])}))
    sim.close()
    return path


FAST = ["--threads", "1", "--no-progress"]


def _eval(model, init, out, *extra):
    return main(["eval", "policy", "--model", str(model), "--init", str(init), "--out", str(out),
                 "--policy", "tests.pipeline.evaluation.test_eval_policy:constant_policy", *FAST, *extra])


def test_world_model_and_ground_truth_side_by_side(tiny_checkpoint, pusht_starts, tmp_path, capsys):
    out = tmp_path / "eval"
    code = _eval(tiny_checkpoint, pusht_starts, out, "--episodes", "4", "--horizon", "5",
                 "--batch-size", "3", "--ground-truth", "pusht", "--videos", "2", "--init-frame", "1")
    assert code == 0
    report = PolicyReport.model_validate_json((out / "metrics.json").read_text())
    assert report.world_model.episodes == 4 and report.ground_truth.episodes == 4
    assert len(report.episodes) == 4 and report.horizon == 5 and report.ground_truth_env == "pusht"
    assert [e.init.rsplit("#", 1)[1] for e in report.episodes] == ["0:1", "1:1", "2:1", "0:1"]
    assert len({e.seed for e in report.episodes}) == 4  # the repeated start gets its own seed
    for side in (report.world_model, report.ground_truth):
        assert 0 <= side.successes <= 4 and side.success_rate == side.successes / 4
        assert side.success_rate_ci95.low <= side.success_rate <= side.success_rate_ci95.high
        assert side.mean_score_ci95.low <= side.mean_score <= side.mean_score_ci95.high
    assert report.agreement is not None and 0 <= report.agreement.success_agreement <= 1
    # The ground truth is gym-pusht itself: replaying the constant policy there gives the same
    # best coverage as the report, episode by episode.
    store = EpisodeStore.open(pusht_starts, "r")
    sim = PushTSim(32)
    for result in report.episodes:
        start = store.window(int(result.init.rsplit("#")[1].split(":")[0]), 1, 2, keys=["state", "block_pose"])
        coverage = [sim.reset_to(start["state"][0], start["block_pose"][0]).coverage]
        coverage += [sim.step(TARGET).coverage for _ in range(5)]
        assert result.ground_truth.score == pytest.approx(max(coverage))
        assert result.ground_truth.final == pytest.approx(coverage[-1])
    video = iio.imread(out / "rollouts.gif", index=None)
    assert video.shape[0] == 6 and report.videos == ["rollouts.gif"]  # horizon + 1 frames
    assert "ground truth (pusht)" in capsys.readouterr().out


def test_world_model_only(tiny_checkpoint, pusht_starts, tmp_path):
    out = tmp_path / "eval"
    assert _eval(tiny_checkpoint, pusht_starts, out, "--episodes", "2", "--horizon", "3", "--videos", "0") == 0
    data = json.loads((out / "metrics.json").read_text())
    assert data["ground_truth"] is None and data["agreement"] is None and data["videos"] == []
    assert [e["ground_truth"] for e in data["episodes"]] == [None, None]
    assert not (out / "rollouts.gif").exists()


@pytest.fixture
def store_without_pose(tmp_path):
    """Frames and actions the tiny model accepts, but no state or block_pose to start gym-pusht."""
    features = FeatureSpec(cameras=(CameraSpec(name="top", height=32, width=32),), action_dim=2)
    store = EpisodeStore.create(tmp_path / "bare.zarr", features)
    store.append(Episode(frames={"top": np.zeros((2, 32, 32, 3), np.uint8)}, action=np.zeros((2, 2), np.float32),
                         meta=EpisodeMeta(episode_id="bare", length=2)))
    return tmp_path / "bare.zarr"


@pytest.mark.parametrize(("argv", "message"), [
    (["--episodes", "0"], "--episodes must be at least 1"),
    (["--scorer", "nope"], "built-in scorers: pusht_coverage"),
    (["--policy", "tests.workers.policies:wrong_shape_policy"], "expected (2, 2)"),
    (["--policy", "no_such_module:f"], "cannot import module"),
    (["--init-frame", "9"], "past the end"),
])
def test_user_errors_are_one_line(argv, message, tiny_checkpoint, pusht_starts, tmp_path, capsys):
    assert _eval(tiny_checkpoint, pusht_starts, tmp_path / "x", "--episodes", "2", "--horizon", "2", *argv) == 2
    assert message in capsys.readouterr().err


def test_ground_truth_needs_recorded_states(tiny_checkpoint, store_without_pose, tmp_path, capsys):
    code = _eval(tiny_checkpoint, store_without_pose, tmp_path / "x", "--episodes", "1", "--horizon", "2",
                 "--ground-truth", "pusht")
    assert code == 2 and "block_pose" in capsys.readouterr().err


def test_intervals():
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    low, high = wilson_interval(0, 20)
    assert low == 0.0 and high == pytest.approx(0.1611, abs=1e-4)
    assert wilson_interval(20, 20)[1] == 1.0
    values = np.random.default_rng(0).uniform(size=40)
    interval = bootstrap_mean_interval(values, seed=3)
    assert interval == bootstrap_mean_interval(values, seed=3)
    assert interval[0] < values.mean() < interval[1] and interval[1] - interval[0] < 0.25
    assert pearson([0, 1, 2], [0, 2, 4]) == pytest.approx(1.0) and pearson([1, 1], [0, 2]) is None
