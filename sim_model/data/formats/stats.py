"""Exact dataset statistics in LeRobot's stats layout, computed from the source arrays.

lerobot 0.4.4 gets image statistics wrong: it squares uint8 pixels in place (overflow), so the
image `std` comes out ~0, and its quantiles come from a 5000-bin histogram over a sample of
frames. Here images are summarised by a per-channel 256-bin histogram, which is exact for uint8
and merges across episodes by addition; numeric features keep their values (small) and get
exact `np.quantile`s. Layout follows lerobot: per feature `min, max, mean, std, count` and
`q01 q10 q50 q90 q99`; images per channel as (3, 1, 1) scaled to [0, 1], `count` = frames.
"""

from __future__ import annotations

import numpy as np

QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
Stats = dict[str, np.ndarray]


def image_histogram(frames: np.ndarray) -> np.ndarray:
    """Per-channel pixel histogram of uint8 frames (T, H, W, 3) -> (3, 256) int64."""
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"expected uint8 frames (T, H, W, 3), got {frames.dtype} {frames.shape}")
    flat = frames.reshape(-1, 3)
    return np.stack([np.bincount(flat[:, c], minlength=256) for c in range(3)]).astype(np.int64)


def _hist_quantile(hist: np.ndarray, q: float) -> float:
    """np.quantile(values, q) (linear interpolation) of the values a 256-bin histogram counts."""
    total = int(hist.sum())
    position = q * (total - 1)
    lower, upper = int(np.floor(position)), int(np.ceil(position))
    cumulative = np.cumsum(hist)
    # value of the k-th smallest sample (0-based) = first bin whose cumulative count exceeds k
    v_lo = int(np.searchsorted(cumulative, lower, side="right"))
    v_hi = int(np.searchsorted(cumulative, upper, side="right"))
    return v_lo + (v_hi - v_lo) * (position - lower)


def image_stats(hist: np.ndarray, frames: int) -> Stats:
    """Stats of one camera from its (3, 256) histogram, scaled to [0, 1], each shaped (3, 1, 1)."""
    values = np.arange(256, dtype=np.float64)
    totals = hist.sum(axis=1).astype(np.float64)  # (3,) pixels per channel
    if frames < 1 or (totals == 0).any():
        raise ValueError("image statistics need at least one frame")
    mean = (hist * values).sum(axis=1) / totals
    var = (hist * (values[None, :] - mean[:, None]) ** 2).sum(axis=1) / totals
    present = hist > 0
    stats: Stats = {
        "min": np.array([np.flatnonzero(p)[0] for p in present], dtype=np.float64),
        "max": np.array([np.flatnonzero(p)[-1] for p in present], dtype=np.float64),
        "mean": mean,
        "std": np.sqrt(var),
    }
    for key, q in QUANTILES.items():
        stats[key] = np.array([_hist_quantile(h, q) for h in hist], dtype=np.float64)
    out: Stats = {key: (value / 255.0).reshape(3, 1, 1) for key, value in stats.items()}
    out["count"] = np.array([frames], dtype=np.int64)
    return out


def array_stats(values: np.ndarray) -> Stats:
    """Stats of a numeric feature per entry of its last axis, pooled over every other axis, as
    lerobot lays them out: values (N,) -> each stat (1,); (N, D) -> (D,); (N, K, D) -> (D,)
    (e.g. K disc centres (x, y): one stat per coordinate, which broadcasts against the values)."""
    values = np.asarray(values)
    if len(values) == 0:
        raise ValueError("statistics need at least one value")
    flat = values.reshape(-1, values.shape[-1] if values.ndim > 1 else 1)
    as_float = flat.astype(np.float64)
    stats: Stats = {
        # min/max keep the feature's dtype (lerobot stores int/bool min/max as such)
        "min": flat.min(axis=0),
        "max": flat.max(axis=0),
        "mean": as_float.mean(axis=0),
        "std": as_float.std(axis=0),
        "count": np.array([len(values)], dtype=np.int64),
    }
    quantiles = np.quantile(as_float, list(QUANTILES.values()), axis=0)  # (5, D)
    for key, row in zip(QUANTILES, quantiles, strict=True):
        stats[key] = row
    return stats


def to_jsonable(stats: dict[str, Stats]) -> dict[str, dict[str, list]]:
    """Stats as nested lists (the form of lerobot's meta/stats.json)."""
    return {feature: {key: np.asarray(value).tolist() for key, value in feature_stats.items()}
            for feature, feature_stats in stats.items()}


def merge_stats(stacked: Stats) -> Stats:
    """Stats of the union of several parts' values from the parts' stats alone, each stat of every
    part stacked along a new first axis (`count` (P, 1)): `count`, `min`, `max`, `mean` and `std`
    exactly (pooled moments); quantiles are estimated (`mixture_quantiles`), since the values
    themselves are not read again."""
    counts = np.asarray(stacked["count"], dtype=np.float64).reshape(-1)
    if len(counts) == 0 or counts.sum() <= 0:
        raise ValueError("merging statistics needs at least one value")
    means = np.asarray(stacked["mean"], dtype=np.float64)
    weights = (counts / counts.sum()).reshape(-1, *([1] * (means.ndim - 1)))
    mean = (weights * means).sum(0)
    spread = np.asarray(stacked["std"], dtype=np.float64) ** 2 + (means - mean) ** 2
    merged: Stats = {
        "min": np.asarray(stacked["min"]).min(axis=0),
        "max": np.asarray(stacked["max"]).max(axis=0),
        "mean": mean,
        "std": np.sqrt(np.maximum((weights * spread).sum(0), 0.0)),
        "count": np.array([int(counts.sum())], dtype=np.int64),
    }
    if all(key in stacked for key in QUANTILES):
        binary = np.asarray(stacked["min"]).dtype == np.bool_
        merged.update(_binary_quantiles(mean, int(counts.sum())) if binary
                      else mixture_quantiles(stacked, counts))
    return merged


def _binary_quantiles(mean: np.ndarray, count: int) -> Stats:
    """Exact np.quantile of boolean values from their count and share of True: sorted, they are
    the Falses then the Trues."""
    falses = np.rint((1 - mean) * count)
    out: Stats = {}
    for key, q in QUANTILES.items():
        position = q * (count - 1)
        # value at `position` (0-based) interpolated between its neighbours, 0 below `falses`
        out[key] = np.clip(position - (falses - 1), 0.0, 1.0)
    return out


def mixture_quantiles(stacked: Stats, counts: np.ndarray) -> Stats:
    """Quantiles of the union of parts, each part's distribution taken as the piecewise-linear
    CDF through its min, quantiles and max, mixed in proportion to its count; per element of the
    stats' trailing shape. Much closer than averaging the parts' quantiles (lerobot's merge) when
    parts differ, e.g. episodes that cover different regions; exact only for one part."""
    knots = np.stack([np.asarray(stacked[k], dtype=np.float64)
                      for k in ("min", *QUANTILES, "max")], axis=1)  # (P, K, ...)
    shape = knots.shape[2:]
    knots = knots.reshape(*knots.shape[:2], -1)
    levels = np.array([0.0, *QUANTILES.values(), 1.0])
    weights = counts / counts.sum()
    out = np.empty((len(QUANTILES), knots.shape[2]))
    for e in range(knots.shape[2]):
        out[:, e] = _invert_mixture(np.sort(knots[:, :, e], axis=1), levels, weights,
                                    np.array(list(QUANTILES.values())))
    return {key: out[i].reshape(shape) for i, key in enumerate(QUANTILES)}


def _invert_mixture(knots: np.ndarray, levels: np.ndarray, weights: np.ndarray,
                    targets: np.ndarray) -> np.ndarray:
    """knots (P, K): each part's values at CDF `levels` (K,); the mixture's quantiles at `targets`."""
    start, stop = knots[:, :-1].ravel(), knots[:, 1:].ravel()
    mass = (weights[:, None] * np.diff(levels)[None, :]).ravel()
    spread = stop > start
    # Mass on a segment of positive width is spread evenly over it; on a point, a jump there.
    xs = np.unique(np.concatenate([start, stop]))
    change = np.zeros(len(xs))
    np.add.at(change, np.searchsorted(xs, start[spread]), mass[spread] / (stop - start)[spread])
    np.add.at(change, np.searchsorted(xs, stop[spread]), -mass[spread] / (stop - start)[spread])
    density = np.cumsum(change)  # on [xs[j], xs[j+1])
    jumps = np.zeros(len(xs))
    np.add.at(jumps, np.searchsorted(xs, start[~spread]), mass[~spread])
    before = np.zeros(len(xs))  # mass below xs[j] (left limit)
    before[1:] = np.cumsum(jumps[:-1] + density[:-1] * np.diff(xs))
    at = before + jumps  # mass up to and including xs[j]
    result = np.empty(len(targets))
    for i, q in enumerate(targets):
        j = min(int(np.searchsorted(at, q - 1e-12)), len(xs) - 1)  # first knot with mass >= q
        if j > 0 and before[j] >= q and density[j - 1] > 0:  # reached inside the segment below
            result[i] = xs[j - 1] + (q - at[j - 1]) / density[j - 1]
        else:
            result[i] = xs[j]
    return result
