"""Rank statistics of the ranking experiment, and the experiment end to end on a tiny model."""

import json
import sys

import numpy as np
import pytest

from experiments import ranking
from experiments.ranking import kendall_tau, ranks, spearman


def test_ranks_average_ties():
    assert ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [3.5, 1.0, 3.5, 2.0]


def test_rank_correlations_on_known_series():
    a = np.array([0.1, 0.4, 0.2, 0.9])
    assert spearman(a, a ** 3) == pytest.approx(1.0)
    assert kendall_tau(a, -a) == pytest.approx(-1.0)
    # one swapped pair among 4 values: 5 concordant, 1 discordant pair
    assert kendall_tau(np.array([1, 2, 3, 4]), np.array([1, 3, 2, 4])) == pytest.approx(4 / 6)
    assert spearman(a, np.zeros(4)) is None and kendall_tau(a, np.zeros(4)) is None


def test_ranking_end_to_end_on_a_tiny_model(tiny_checkpoint, tiny_pusht_store, tmp_path, monkeypatch):
    results = tmp_path / "results"
    argv = ["ranking", "--model", str(tiny_checkpoint), "--init", tiny_pusht_store.path,
            "--episodes", "2", "--horizon", "3", "--batch-size", "2", "--score-stride", "2",
            "--policies", "experiments.policy_zoo:Still,experiments.policy_zoo:Random",
            "--work", str(tmp_path / "work"), "--results", str(results)]
    monkeypatch.setattr(sys, "argv", argv)
    ranking.main()
    data = json.loads((results / "ranking.json").read_text())
    assert sorted(data["policies"]) == ["Random", "Still"]
    for side in ("world_model", "ground_truth"):
        for scores in data["policies"].values():
            assert 0.0 <= scores[side]["mean_score"] <= 1.0
    assert (results / "ranking.png").stat().st_size > 0
    assert "Spearman" in (results / "ranking.md").read_text()
    # Each side of each policy is cached; a rerun reuses them instead of rolling again.
    cached = {p: p.stat().st_mtime_ns for p in (tmp_path / "work").rglob("*.json")}
    assert len(cached) == 4 and sum(p.parent.name == "gym-pusht" for p in cached) == 2
    ranking.main()
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "work").rglob("*.json")} == cached
