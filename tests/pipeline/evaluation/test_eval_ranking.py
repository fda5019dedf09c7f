"""`iws eval ranking`: the agreement measures on hand-made cases, and the command end to end on a
tiny random world model, real gym-pusht starts at 32 x 32, scripted policies and ACT checkpoints
that lerobot-train saved along a few steps of training."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.cli import main
from pipeline.evaluation import stats
from pipeline.evaluation.policy_report import PolicyReport
from pipeline.evaluation.ranking import RankingReport, agreement, expand_policies
from pipeline.pusht.features import pusht_features
from schemas import SpecError
from sim_model.data.formats.lerobot_writer import export_lerobot
from sim_model.data.store import EpisodeStore
from tests.fixtures.store import make_pusht_episode
from tests.pipeline.evaluation.test_eval_policy import pusht_starts  # noqa: F401 (fixture)
from workers.actions import Observation

TARGETS = {"Left": (120.0, 256.0), "Centre": (256.0, 256.0), "Right": (400.0, 300.0)}


class _Target:
    """Drive the agent to a fixed point (a 'module:Class' policy for the command)."""

    target = (0.0, 0.0)

    def __init__(self, features) -> None:
        pass

    def reset(self, episodes, observation: Observation) -> None:
        pass

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        return np.tile(np.array(self.target, np.float32), (len(observation), 1))


Left = type("Left", (_Target,), {"target": TARGETS["Left"]})
Centre = type("Centre", (_Target,), {"target": TARGETS["Centre"]})
Right = type("Right", (_Target,), {"target": TARGETS["Right"]})
SCRIPTED = [f"tests.pipeline.evaluation.test_eval_ranking:{name}" for name in TARGETS]
PIXEL = "pipeline.pusht.scorer:pixel_coverage_score"


def single_centre(out: Path) -> PolicyReport:
    return PolicyReport.model_validate_json((out / "policies" / "Centre.json").read_text())


def test_mmrv_regret_and_line_on_hand_made_scores():
    real = np.array([0.1, 0.5, 0.9])
    assert stats.mmrv(real * 0.5, real) == 0.0  # order kept, scale does not matter
    # The model swaps the two best: each of them is violated by 0.4, the worst by nothing.
    assert stats.mmrv(np.array([0.1, 0.9, 0.5]), real) == pytest.approx((0 + 0.4 + 0.4) / 3)
    assert stats.selection_regret(np.array([0.1, 0.9, 0.5]), real) == pytest.approx(0.4)
    assert stats.selection_regret(np.array([0.2, 0.9, 0.9]), real) == pytest.approx(0.2)  # a tie: mean
    assert stats.linear_fit(real, 0.5 * real + 0.1) == pytest.approx((0.5, 0.1))
    assert stats.kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    assert stats.spearman([1, 2, 3], [10, 30, 20]) == pytest.approx(0.5)
    assert stats.ranks([3.0, 1.0, 3.0, 2.0]).tolist() == [3.5, 1.0, 3.5, 2.0]  # ties: their mean rank
    assert stats.spearman(real, np.zeros(3)) is None and stats.kendall_tau(real, np.zeros(3)) is None


def test_agreement_intervals_are_paired_over_starts():
    rng = np.random.default_rng(0)
    skill = np.linspace(0.1, 0.9, 6)[:, None]
    real = np.clip(skill + rng.normal(0, 0.05, (6, 40)), 0, 1)
    model = np.clip(0.5 * skill + rng.normal(0, 0.05, (6, 40)), 0, 1)
    a = agreement(model, real, seed=1, resamples=500)
    assert a.spearman.value == pytest.approx(1.0) and a.mmrv.value == 0.0 and a.regret.value == 0.0
    assert a.slope.low < 0.5 < a.slope.high and a.slope.value == pytest.approx(0.5, abs=0.05)
    assert a == agreement(model, real, seed=1, resamples=500)  # seeded
    shuffled = agreement(model[::-1], real, seed=1, resamples=500)
    assert shuffled.spearman.value == pytest.approx(-1.0) and shuffled.mmrv.value > 0.5
    assert shuffled.regret.value == pytest.approx(real.mean(axis=1).max() - real.mean(axis=1).min())


def test_policy_list_errors(tmp_path):
    with pytest.raises(SpecError, match="at least 3"):
        expand_policies(SCRIPTED[:2])
    with pytest.raises(SpecError, match="matches nothing"):
        expand_policies([*SCRIPTED, str(tmp_path / "none" / "*")])
    (tmp_path / "plain").mkdir()
    with pytest.raises(SpecError, match="without a LeRobot config.json"):
        expand_policies([*SCRIPTED, str(tmp_path / "plain")])
    with pytest.raises(SpecError, match="both named 'Left'"):
        expand_policies([*SCRIPTED, "other=" + SCRIPTED[0]])
    named = expand_policies(["baselines=" + SCRIPTED[0], *SCRIPTED[1:]])
    assert [(e.name, e.family) for e in named] == [("Left", "baselines"), ("Centre", "scripted"),
                                                   ("Right", "scripted")]


@pytest.fixture(scope="module")
def act_run(tmp_path_factory) -> Path:
    """lerobot-train's ACT on 3 tiny PushT episodes, a checkpoint saved every 2 of 4 steps."""
    features = pusht_features(resolution=32)
    store = EpisodeStore.create(tmp_path_factory.mktemp("src") / "store.zarr", features)
    for index in range(3):
        store.append(make_pusht_episode(features, index, 20))
    dataset = export_lerobot(store, tmp_path_factory.mktemp("lr") / "rank_tiny", repo_id="iws/rank_tiny")
    run = tmp_path_factory.mktemp("act") / "run"
    command = [str(Path(sys.executable).with_name("lerobot-train")), "--dataset.repo_id=iws/rank_tiny",
               f"--dataset.root={dataset}", "--policy.type=act", f"--output_dir={run}", "--steps=4",
               "--save_freq=2", "--batch_size=2", "--num_workers=0", "--log_freq=2", "--eval_freq=0",
               "--wandb.enable=false", "--policy.device=cpu", "--policy.push_to_hub=false",
               "--policy.pretrained_backbone_weights=null", "--policy.dim_model=32", "--policy.n_heads=2",
               "--policy.dim_feedforward=64", "--policy.n_encoder_layers=1", "--policy.n_decoder_layers=1",
               "--policy.chunk_size=4", "--policy.n_action_steps=4"]
    env = {"OMP_NUM_THREADS": "1", **os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "WANDB_MODE": "disabled"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return run


@pytest.mark.slow
def test_ranking_end_to_end(tiny_checkpoint, pusht_starts, act_run, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "ranking"
    act = f"{act_run}/checkpoints/0*/pretrained_model"
    argv = ["eval", "ranking", "--model", str(tiny_checkpoint), "--init", str(pusht_starts),
            "--ground-truth", "pusht", "--episodes", "4", "--horizon", "6", "--batch-size", "4",
            "--score-every", "2", "--resamples", "200", "--out", str(out), "--threads", "1",
            "--also-score", PIXEL, "--no-progress", *[a for ref in (*SCRIPTED, act) for a in ("--policy", ref)]]
    assert main(argv) == 0
    report = RankingReport.model_validate_json((out / "ranking.json").read_text())
    assert [p.name for p in report.policies] == ["Left", "Centre", "Right", "run/000002", "run/000004"]
    assert {p.family for p in report.policies} == {"scripted", "act"}
    assert sorted(report.per_family) == ["act", "scripted"]
    assert report.per_family["act"].policies == 2 and report.overall.policies == 5
    assert report.episodes == 4 and report.horizon == 6 and report.ground_truth_env == "pusht"
    # Each policy's entry is its own two-sided report, and the measures are those of the means.
    model = np.array([p.world_model.mean_score for p in report.policies])
    real = np.array([p.ground_truth.mean_score for p in report.policies])
    for policy in report.policies:
        name = policy.name.replace("/", "_")
        single = PolicyReport.model_validate_json((out / "policies" / f"{name}.json").read_text())
        assert single.world_model == policy.world_model and single.ground_truth == policy.ground_truth
        assert policy.score_gap == pytest.approx(policy.ground_truth.mean_score - policy.world_model.mean_score)
    assert report.overall.mmrv.value == pytest.approx(stats.mmrv(model, real))
    assert report.overall.regret.value == pytest.approx(stats.selection_regret(model, real))
    # A policy's sides are what `iws eval policy --ground-truth` reports for it from the same starts.
    assert main(["eval", "policy", "--model", str(tiny_checkpoint), "--init", str(pusht_starts),
                 "--policy", SCRIPTED[1], "--ground-truth", "pusht", "--episodes", "4", "--horizon", "6",
                 "--batch-size", "4", "--videos", "0", "--out", str(tmp_path / "single"), "--threads", "1",
                 "--no-progress"]) == 0
    single = PolicyReport.model_validate_json((tmp_path / "single" / "metrics.json").read_text())
    assert single.ground_truth == report.policies[1].ground_truth
    assert [e.ground_truth for e in single.episodes] == [e.ground_truth for e in single_centre(out).episodes]
    assert (out / "ranking.png").stat().st_size > 0 and "| all (score) | 5 |" in (out / "ranking.md").read_text()
    assert "MMRV" in capsys.readouterr().out
    # The second scorer ranks the same rollouts; scores.json holds every start's scores of both.
    assert list(report.also) == [PIXEL] and report.also[PIXEL].overall.policies == 5
    rows = json.loads((out / "scores.json").read_text())["policies"]
    assert [len(r["model"][PIXEL]) for r in rows] == [4] * 5
    assert report.also[PIXEL].scores["Left"] == pytest.approx(np.mean(rows[0]["model"][PIXEL]))
    assert [r["real"] for r in rows][1] == [e.ground_truth.score for e in single_centre(out).episodes]
    # A rerun with another policy rolls only that one: the others come from the cache unchanged.
    cache = sorted((out / "cache").rglob("*.json"))
    assert len(cache) == 15
    before = {p.name: p for p in report.policies}
    extra = "tests.pipeline.evaluation.test_eval_policy:constant_policy"
    assert main([*argv, "--policy", extra]) == 0
    again = RankingReport.model_validate_json((out / "ranking.json").read_text())
    assert len(again.policies) == 6 and len(sorted((out / "cache").rglob("*.json"))) == 18
    assert all(before[p.name] == p.model_copy(update={"model_rank": before[p.name].model_rank,
                                                      "real_rank": before[p.name].real_rank})
               for p in again.policies if p.name in before)


def test_bad_input_exits_2(tiny_checkpoint, pusht_starts, tmp_path, capsys):  # noqa: F811
    base = ["eval", "ranking", "--model", str(tiny_checkpoint), "--init", str(pusht_starts),
            "--ground-truth", "pusht", "--out", str(tmp_path / "r"), "--no-progress"]
    assert main([*base, "--policy", SCRIPTED[0], "--policy", SCRIPTED[1]]) == 2
    assert "at least 3 policies" in capsys.readouterr().err
    assert main([*base, *[a for r in SCRIPTED for a in ("--policy", r)], "--score-every", "0"]) == 2
    assert "--score-every must be at least 1" in capsys.readouterr().err
    assert main([*base, *[a for r in SCRIPTED for a in ("--policy", r)], "--policy",
                 str(tmp_path / "runs" / "*" / "pretrained_model")]) == 2
    assert "matches nothing" in capsys.readouterr().err
    assert not (tmp_path / "r" / "ranking.json").exists()
