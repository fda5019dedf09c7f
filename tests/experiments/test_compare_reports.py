"""experiments.compare_reports: paired deltas of two fidelity reports on the same episodes."""

from __future__ import annotations

import pytest

from experiments.compare_reports import compare


def _report(values: list[float], episodes: list[int] | None = None) -> dict:
    return {"data": "held.zarr", "episodes": episodes or [0, 1, 2, 3],
            "horizons": [{"horizon": 50, "object_iou": {"model": {"values": values}}}]}


def test_paired_delta_with_its_interval() -> None:
    table = compare(_report([0.6, 0.7, 0.8, 0.9]), _report([0.5, 0.6, 0.7, 0.8]), ("new", "old"))
    assert "| 50 | object_iou | 0.750 | 0.650 | +0.100 [+0.100, +0.100] |" in table  # same gain on every episode


def test_reports_on_other_episodes_are_refused() -> None:
    with pytest.raises(SystemExit, match="different episodes"):
        compare(_report([0.5] * 4), _report([0.5] * 4, [4, 5, 6, 7]), ("a", "b"))
