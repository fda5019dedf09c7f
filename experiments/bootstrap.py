"""The one episode-bootstrap the experiments share: a percentile interval of the mean."""

from __future__ import annotations

import numpy as np


def percentile_interval(data: np.ndarray, resamples: int, seed: int, level: float = 0.95) -> tuple[float, float]:
    """(low, high) of the mean of 1-D `data`, resampling its units with replacement."""
    index = np.random.default_rng(seed).integers(0, data.size, size=(resamples, data.size))
    tail = 50 * (1 - level)
    low, high = np.percentile(data[index].mean(axis=1), [tail, 100 - tail])
    return float(low), float(high)
