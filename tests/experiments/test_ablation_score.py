"""experiments/ablation_score.py on tiny random models and a tiny synthetic PushT store."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from experiments import ablation_score as abl
from schemas import FeatureSpec
from sim_model.data.store import EpisodeStore
from sim_model.world_model import WorldModel
from tests.fixtures.store import make_pusht_episode


def test_bootstrap_of_a_constant_is_degenerate() -> None:
    interval = abl.bootstrap_interval(np.full(7, 0.25))
    assert (interval.mean, interval.low, interval.high, interval.n) == (0.25, 0.25, 0.25, 7)


def test_bootstrap_interval_matches_a_direct_percentile_bootstrap() -> None:
    values = np.array([0.0, 1.0, 2.0, 3.0, 10.0])
    interval = abl.bootstrap_interval(values, resamples=2000, seed=3)
    index = np.random.default_rng(3).integers(0, 5, size=(2000, 5))
    low, high = np.percentile(values[index].mean(axis=1), [2.5, 97.5])
    assert interval.mean == pytest.approx(3.2)
    assert (interval.low, interval.high) == (pytest.approx(low), pytest.approx(high))
    assert values.min() < interval.low < 3.2 < interval.high < values.max()


def test_paired_bootstrap_resamples_episodes_together() -> None:
    control = np.array([0.1, 0.9, 0.4, 0.7, 0.2])
    gain = abl.paired_bootstrap_interval(control + 0.05, control)
    assert gain.mean == pytest.approx(0.05)
    assert gain.low == pytest.approx(0.05) and gain.high == pytest.approx(0.05)


def test_helpers() -> None:
    assert abl.parse_arm("recency=runs/a/model") == ("recency", "runs/a/model")
    assert abl.parse_arm("pusht") == ("pusht", "pusht")
    assert float(abl.angle_difference(0.1, 2 * np.pi - 0.1)) == pytest.approx(0.2)
    looped = abl.loop_actions(np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]), 8)
    assert looped[:, 0].tolist() == [0, 1, 2, 2, 1, 0, 0, 1]


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path,
           tiny_features: FeatureSpec) -> tuple[dict, str]:
    root = tmp_path_factory.mktemp("ablation")
    store = EpisodeStore.create(root / "store.zarr", tiny_features)
    for index in range(3):
        store.append(make_pusht_episode(tiny_features, index, 52))
    other = WorldModel.random(tiny_features, preset="tiny", seed=1).save(root / "other")
    threads = torch.get_num_threads()
    try:
        code = abl.main(["--arm", f"control={tiny_checkpoint}", "--arm", f"same={tiny_checkpoint}",
                         "--arm", f"other={other}", "--data", str(root / "store.zarr"),
                         "--episodes", "3", "--horizons", "1,10,50", "--long-steps", "25",
                         "--long-seeds", "2", "--threads", "1", "--out", str(root / "abl")])
    finally:
        torch.set_num_threads(threads)
    assert code == 0
    return json.loads((root / "abl.json").read_text()), str(root)


def test_reuse_re_pairs_against_another_control_without_scoring_again(
        scored: tuple[dict, str], tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A later round names the earlier arms again: their scores come from --reuse (no rollout),
    and --control picks which arm the gains are paired against."""
    report, root = scored
    monkeypatch.setattr(abl, "score_arm", lambda *a, **k: pytest.fail("an earlier arm was scored again"))
    code = abl.main(["--arm", f"control={tiny_checkpoint}", "--arm", f"other={root}/other",
                     "--data", f"{root}/store.zarr", "--episodes", "3", "--horizons", "1,10,50",
                     "--reuse", f"{root}/abl.json", "--control", "other", "--out", f"{root}/again"])
    assert code == 0
    again = json.loads(Path(f"{root}/again.json").read_text())
    assert [a["name"] for a in again["arms"]] == ["other", "control"]
    old = {a["name"]: a for a in report["arms"]}
    new_gain = next(h for h in again["arms"][1]["horizons"] if h["horizon"] == 50)["gain_vs_control"]
    old_gain = next(h for h in old["other"]["horizons"] if h["horizon"] == 50)["gain_vs_control"]
    assert new_gain["mean"] == pytest.approx(-old_gain["mean"])  # the same pairs, the other way round


def test_an_arm_against_itself_gains_exactly_nothing(scored: tuple[dict, str]) -> None:
    report, _ = scored
    same = next(a for a in report["arms"] if a["name"] == "same")
    gain = next(h["gain_vs_control"] for h in same["horizons"] if h["horizon"] == 50)
    assert gain["mean"] == gain["low"] == gain["high"] == 0.0
    assert gain["n"] == 3
    assert same["verdict"].startswith("drop")  # a zero gain is not a gain


def test_every_interval_contains_its_mean(scored: tuple[dict, str]) -> None:
    report, _ = scored

    def intervals(node: object) -> list[dict]:
        if isinstance(node, dict):
            found = [node] if {"mean", "low", "high"} <= node.keys() else []
            return found + [x for v in node.values() for x in intervals(v)]
        return [x for v in node for x in intervals(v)] if isinstance(node, list) else []

    found = intervals(report)
    assert len(found) > 30
    for interval in found:
        assert interval["low"] - 1e-12 <= interval["mean"] <= interval["high"] + 1e-12


def test_report_covers_every_measure(scored: tuple[dict, str]) -> None:
    report, root = scored
    text = Path(f"{root}/abl.md").read_text()
    assert [a["name"] for a in report["arms"]] == ["control", "same", "other"]
    control, _, other = report["arms"]
    assert control["verdict"].startswith("control")
    assert control["horizons"][0]["gain_vs_control"] is None
    assert [h["horizon"] for h in other["horizons"]] == [1, 10, 50]
    assert [p["horizon"] for p in other["pose"]] == [10, 50]
    assert all(p["episodes"] == 3 and 0 <= p["skipped"] <= 3 for p in other["pose"])
    assert [g["horizon"] for g in other["guard"]] == [10, 50]
    assert other["long"]["probes"] == 2 * 3  # steps 1, 21 and the last, per rollout
    assert 0.0 <= other["long"]["t_visible"] <= 1.0
    for name in ("control", "same", "other"):
        assert f"| {name} |" in text
    assert "verdict" in text and "drop" in text
