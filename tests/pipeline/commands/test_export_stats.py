"""Exact statistics (sim_model/data/formats/stats.py) against numpy over the same values."""

import numpy as np
import pytest

from sim_model.data.formats.stats import (
    QUANTILES,
    array_stats,
    image_histogram,
    image_stats,
    to_jsonable,
)


@pytest.fixture
def frames() -> np.ndarray:
    rng = np.random.default_rng(0)
    out = rng.integers(0, 256, size=(5, 9, 7, 3), dtype=np.uint8)
    out[..., 2] = 17  # a constant channel: std exactly 0, every quantile 17
    return out


def test_image_stats_match_numpy_per_channel(frames):
    stats = image_stats(image_histogram(frames), len(frames))
    pixels = frames.reshape(-1, 3).astype(np.float64)
    for key in ("min", "max", "mean", "std"):
        expected = getattr(np, key)(pixels, axis=0) / 255
        np.testing.assert_allclose(stats[key].ravel(), expected, rtol=1e-12, atol=1e-12)
        assert stats[key].shape == (3, 1, 1)
    for key, q in QUANTILES.items():
        expected = np.quantile(pixels, q, axis=0) / 255
        np.testing.assert_allclose(stats[key].ravel(), expected, rtol=1e-12, atol=1e-12)
    assert stats["count"].tolist() == [5]
    assert stats["std"][0, 0, 0] > 0.2  # the uint8-overflow bug gives ~0 here
    assert stats["std"][2, 0, 0] == 0.0


def test_histograms_merge_by_addition(frames):
    parts = image_histogram(frames[:2]) + image_histogram(frames[2:])
    np.testing.assert_array_equal(parts, image_histogram(frames))


def test_image_histogram_rejects_non_uint8():
    with pytest.raises(ValueError, match="uint8"):
        image_histogram(np.zeros((2, 4, 4, 3), np.float32))


def test_array_stats_vector_scalar_and_bool():
    rng = np.random.default_rng(1)
    values = rng.normal(size=(50, 2)).astype(np.float32)
    stats = array_stats(values)
    np.testing.assert_allclose(stats["std"], values.astype(np.float64).std(axis=0))
    np.testing.assert_allclose(stats["q90"], np.quantile(values.astype(np.float64), 0.9, axis=0))
    assert stats["min"].dtype == np.float32 and stats["count"].tolist() == [50]

    index = array_stats(np.arange(10, 20, dtype=np.int64))  # e.g. lerobot's `index` column
    assert index["min"].tolist() == [10] and index["max"].tolist() == [19]
    assert index["mean"].tolist() == [14.5]

    flags = array_stats(np.array([[True], [False], [True], [True]]))
    assert flags["min"].tolist() == [False] and flags["mean"].tolist() == [0.75]


def test_to_jsonable_gives_nested_lists(frames):
    out = to_jsonable({"img": image_stats(image_histogram(frames), 5),
                       "a": array_stats(np.ones((3, 2), np.float32))})
    assert isinstance(out["img"]["mean"], list) and len(out["img"]["mean"]) == 3
    assert out["a"]["count"] == [3]


def test_array_stats_of_a_multi_dimensional_feature_follow_lerobots_layout():
    """A (N, 80, 2) feature (the sweep task's disc centres): one stat per last-axis entry,
    pooled over the rest, as lerobot's own writer computes it; flattened (160,) stats would not
    broadcast against the (80, 2) values a trainer normalises."""
    from lerobot.datasets.compute_stats import get_feature_stats

    rng = np.random.default_rng(2)
    values = rng.uniform(0, 512, size=(30, 80, 2)).astype(np.float32)
    ours = array_stats(values)
    theirs = get_feature_stats(values, axis=0, keepdims=False)
    for key in ("min", "max", "mean", "std", "count"):
        assert ours[key].shape == theirs[key].shape == ((2,) if key != "count" else (1,)), key
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5)  # theirs: float32 sums
    pooled = values.reshape(-1, 2).astype(np.float64)
    np.testing.assert_allclose(ours["q50"], np.quantile(pooled, 0.5, axis=0))  # exact, not binned
