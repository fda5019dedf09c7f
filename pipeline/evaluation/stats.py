"""Confidence intervals and agreement measures for policy scores over a few dozen episodes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Values = Sequence[float] | np.ndarray  # a series of scores

Z95 = 1.959963984540054  # two-sided 95% normal quantile


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a success rate: sound at 0/n and n/n, unlike the normal one."""
    if n <= 0:
        raise ValueError("a success rate needs at least one episode")
    if not 0 <= successes <= n:
        raise ValueError(f"{successes} successes out of {n} episodes")
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, float(centre - half)), min(1.0, float(centre + half))


def bootstrap_mean_interval(values: Values, seed: int = 0, resamples: int = 4000,
                            level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (seeded: the same values give the same answer)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        raise ValueError("a mean needs at least one value")
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def pearson(a: Values, b: Values) -> float | None:
    """Pearson correlation, or None when either side is constant (it is undefined there)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"pearson needs two equal-length series of 2+ values, got {x.size} and {y.size}")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])
