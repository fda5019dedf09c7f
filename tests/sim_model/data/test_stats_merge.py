"""Statistics merged from parts' statistics (stats.merge_stats), against those of all values."""

from __future__ import annotations

import numpy as np
import pytest

from sim_model.data.formats.stats import QUANTILES, array_stats, merge_stats


def _merged(parts: list[np.ndarray]) -> tuple[dict, dict]:
    stats = [array_stats(p) for p in parts]
    stacked = {k: np.stack([s[k] for s in stats]) for k in stats[0]}
    return merge_stats(stacked), array_stats(np.concatenate(parts))


@pytest.mark.parametrize("seed", range(3))
def test_moments_are_exact_and_quantiles_close(seed: int) -> None:
    """Episodes that cover different regions (each its own offset), one of them constant:
    count, min, max, mean and std exactly; quantiles within 2.5 % of the range, where
    averaging the parts' quantiles (lerobot's merge) is off by up to half the range."""
    rng = np.random.default_rng(seed)
    parts = [rng.normal(rng.uniform(-5, 5), 1, size=(n, 2)) for n in rng.integers(50, 200, size=20)]
    parts.append(np.ones((60, 2)))
    merged, exact = _merged(parts)
    for key in ("count", "min", "max", "mean", "std"):
        np.testing.assert_allclose(merged[key], exact[key], rtol=1e-9, err_msg=key)
    span = exact["max"] - exact["min"]
    for key in QUANTILES:
        assert (np.abs(merged[key] - exact[key]) <= 0.025 * span).all(), key


def test_boolean_quantiles_are_exact() -> None:
    rng = np.random.default_rng(0)
    parts = [rng.random((n, 1)) < p for n, p in ((7, 0.2), (30, 0.9), (13, 0.5), (1, 0.0))]
    merged, exact = _merged(parts)
    for key in (*QUANTILES, "min", "max", "mean", "std", "count"):
        np.testing.assert_allclose(np.asarray(merged[key], float), np.asarray(exact[key], float),
                                   err_msg=key)


def test_one_part_keeps_its_quantiles_and_empty_input_is_refused() -> None:
    values = np.random.default_rng(1).normal(size=(100, 3))
    merged, exact = _merged([values])
    for key in QUANTILES:
        np.testing.assert_allclose(merged[key], exact[key], atol=1e-12)
    with pytest.raises(ValueError):
        merge_stats({"count": np.zeros((0, 1)), "mean": np.zeros((0, 1)), "std": np.zeros((0, 1)),
                     "min": np.zeros((0, 1)), "max": np.zeros((0, 1))})
