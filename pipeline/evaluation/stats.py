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


def ranks(values: Values) -> np.ndarray:
    """Ranks 1..n, ties given their average rank."""
    data = np.asarray(values, dtype=np.float64)
    order = np.argsort(data, kind="stable")
    out = np.empty(len(data))
    out[order] = np.arange(1, len(data) + 1)
    for value in np.unique(data):
        tied = data == value
        out[tied] = out[tied].mean()
    return out


def spearman(a: Values, b: Values) -> float | None:
    """Spearman's rho (Pearson r of the ranks); None when either side is constant."""
    return pearson(ranks(a), ranks(b))


def kendall_tau(a: Values, b: Values) -> float | None:
    """Kendall's tau-b; None when either side is constant."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    i, j = np.triu_indices(len(x), k=1)
    sx, sy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
    denominator = np.sqrt(np.count_nonzero(sx) * np.count_nonzero(sy))
    return None if denominator == 0 else float((sx * sy).sum() / denominator)


def mmrv(predicted: Values, real: Values) -> float:
    """Mean maximum rank violation (SIMPLER, Li et al. 2024): for each policy i, the largest real
    score gap |R_i - R_j| over the policies j that the prediction orders the other way round
    ((P_i < P_j) != (R_i < R_j)), averaged over i. 0 when the prediction keeps every order; a
    violation between two policies of nearly equal real score costs little."""
    p, r = np.asarray(predicted, dtype=np.float64), np.asarray(real, dtype=np.float64)
    violated = (p[:, None] < p[None, :]) != (r[:, None] < r[None, :])
    cost = np.abs(r[:, None] - r[None, :]) * violated
    return float(cost.max(axis=1).mean())


def selection_regret(predicted: Values, real: Values) -> float:
    """The real score given up by picking the policy the prediction ranks first: the best real
    score minus the real score of the predicted best (ties for first: their mean, the expected
    regret of picking one of them at random)."""
    p, r = np.asarray(predicted, dtype=np.float64), np.asarray(real, dtype=np.float64)
    return float(r.max() - r[p == p.max()].mean())


def linear_fit(x: Values, y: Values) -> tuple[float, float] | None:
    """Least-squares slope and intercept of y on x; None when x is constant."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.size < 2 or np.ptp(a) == 0:
        return None
    slope, intercept = np.polyfit(a, b, 1)
    return float(slope), float(intercept)
