"""The fidelity diagnosis' numbers: episode-bootstrap estimates, the computed conclusion, and the
markdown table (experiments/fidelity_diagnosis.py measures; this file only summarises)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from pipeline.evaluation.stats import bootstrap_mean_interval

AE = "1. Autoencoder ceiling"
ONE_STEP = "2. Teacher-forced one step"
OPEN_LOOP = "3. Open loop from the first frame"
SPREAD = "4. Sample spread (same context, different seeds)"
NOISE = "5. Context-noise label sweep"
SNAP = "6. Decoded frames snapped to the palette"
CONCLUSION = "7. Conclusion"
SECTIONS = (AE, ONE_STEP, OPEN_LOOP, SPREAD, NOISE, SNAP)
NOTES = {
    AE: "encode + decode of the real frames t+1 that section 2 predicts; T-IoU against the real frame.",
    ONE_STEP: "reset on the real frames t-k+1..t (k = the model's context) and their actions, one "
              "step with action t, compared with real frame t+1; 'T moving' rows keep only frames "
              "whose real T mask changes from t to t+1.",
    OPEN_LOOP: "reset on each episode's first frame only, recorded actions, frame h vs real frame h.",
    SPREAD: "mean over pixels (0-255) and latent elements of the std across seeds; the decoder-only "
            "row decodes the real latent of frame t+1 with the same seeds; the last row is the "
            "scale of one real step in latent space.",
    NOISE: "the same weights with `context_noise_infer` set to each level, open loop from frame 0.",
    SNAP: "each decoded pixel replaced by the nearest PushT reference colour before the T mask.",
}
TOLERANCE = 0.05  # a T-IoU gap smaller than this is not called a loss
DETERMINISTIC = 0.1  # latent sample spread under this share of one real step: a regressor


class Estimate(BaseModel):
    """Mean over episodes with an episode-bootstrap percentile interval."""

    model_config = ConfigDict(extra="forbid")

    mean: float
    low: float
    high: float
    n: int = Field(description="Episodes with a value.")
    values: list[float] = Field(description="Per-episode values in episode order (NaN: no frame "
                                "of that kind in the episode).")


class Row(BaseModel):
    model_config = ConfigDict(extra="forbid")

    section: str
    quantity: str
    estimate: Estimate


class DiagnosisReport(BaseModel):
    """What experiments/fidelity_diagnosis.py writes to OUT.json."""

    model_config = ConfigDict(extra="forbid")

    setup: dict[str, Any]
    rows: list[Row]
    conclusion: list[str] = Field(description="Computed from the rows: the verdict first.")

    def get(self, section: str, quantity: str) -> Estimate:
        return _lookup(self.rows)[(section, quantity)]


def episode_mean(values: np.ndarray, where: np.ndarray | None = None) -> np.ndarray:
    """(E, n) per-frame values -> (E,) per-episode means over the frames `where` is True
    (NaN for an episode with none); (E,) values are already per episode."""
    if values.ndim == 1:
        values = values[:, None]
        where = None if where is None else where[:, None]
    keep = np.ones(values.shape, bool) if where is None else where
    count = keep.sum(axis=1)
    total = np.where(keep, values, 0.0).sum(axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def bootstrap(values: Sequence[float] | np.ndarray, resamples: int = 1000, seed: int = 0,
              level: float = 0.95) -> Estimate:
    """Mean of the finite per-episode values, with a percentile interval over `resamples`
    resamples of the episodes (with replacement)."""
    arr = np.asarray(values, dtype=np.float64)
    kept = arr[np.isfinite(arr)]
    if kept.size == 0:
        return Estimate(mean=math.nan, low=math.nan, high=math.nan, n=0, values=arr.tolist())
    low, high = bootstrap_mean_interval(kept, seed=seed, resamples=resamples, level=level)
    mean = float(kept.mean())
    # A constant sample's resample means can differ from its mean in the last bit.
    return Estimate(mean=mean, low=min(low, mean), high=max(high, mean),
                    n=int(kept.size), values=arr.tolist())


def paired(a: Estimate, b: Estimate, resamples: int, seed: int) -> Estimate:
    """Per-episode a - b, bootstrapped (the same episodes in the same order on both sides)."""
    return bootstrap(np.subtract(a.values, b.values), resamples, seed)


def _lookup(rows: Sequence[Row]) -> dict[tuple[str, str], Estimate]:
    return {(r.section, r.quantity): r.estimate for r in rows}


def fmt(x: float) -> str:
    if not math.isfinite(x):
        return "–"
    if x != 0 and abs(x) < 0.01:
        return f"{x:.2e}"
    return f"{x:.2f}" if abs(x) >= 10 else f"{x:.3f}"


def _interval(e: Estimate) -> str:
    return f"{fmt(e.mean)} [{fmt(e.low)}, {fmt(e.high)}]"


def verdict(per_step: Estimate, accumulated: Estimate) -> str:
    """'per-step', 'accumulated', 'both' or 'neither', from the paired T-IoU gaps."""
    lost = [e.mean >= TOLERANCE and e.low > 0 for e in (per_step, accumulated)]
    return {(True, False): "per-step", (False, True): "accumulated",
            (True, True): "both"}.get((lost[0], lost[1]), "neither")


def _verdict_line(get: dict[tuple[str, str], Estimate], horizon: int, resamples: int, seed: int) -> str:
    ceiling, step = get[(AE, "T-IoU")], get[(ONE_STEP, "T-IoU model")]
    final = get[(OPEN_LOOP, f"@{horizon} T-IoU model")]
    per_step, accumulated = paired(ceiling, step, resamples, seed), paired(step, final, resamples, seed)
    kind = verdict(per_step, accumulated)
    lead = {"per-step": "The T is lost PER STEP: one teacher-forced step already falls well below "
                        "the autoencoder ceiling",
            "accumulated": "The T is lost by ACCUMULATION: one teacher-forced step stays near the "
                           "autoencoder ceiling, the open loop decays",
            "both": "The T is lost BOTH per step and by accumulation",
            "neither": f"No T loss beyond {TOLERANCE} T-IoU is detected past the autoencoder"}[kind]
    total = ceiling.mean - final.mean
    share = (f"; the per-step gap is {100 * per_step.mean / total:.0f} % of the ceiling-to-@{horizon} "
             "loss" if total >= TOLERANCE else "")
    return (f"{lead}. T-IoU: autoencoder ceiling {_interval(ceiling)}, teacher-forced one step "
            f"{_interval(step)} (repeat frame t {fmt(get[(ONE_STEP, 'T-IoU repeat frame t')].mean)}), "
            f"open loop @{horizon} {_interval(final)}. Per-step gap (ceiling - one step) "
            f"{_interval(per_step)}; accumulated gap (one step - open loop @{horizon}) "
            f"{_interval(accumulated)}{share}. Threshold: a gap >= {TOLERANCE} whose interval "
            "excludes 0.")


def _moving_line(get: dict[tuple[str, str], Estimate], resamples: int, seed: int) -> str:
    step = get[(ONE_STEP, "T moving: T-IoU model")]
    ceiling = get[(ONE_STEP, "T moving: T-IoU autoencoder ceiling")]
    gap = paired(ceiling, step, resamples, seed)
    return (f"Where the T moves ({fmt(get[(ONE_STEP, 'share of frames with the T moving')].mean)} of "
            f"the frames) the one-step T-IoU is {_interval(step)} vs ceiling {_interval(ceiling)} "
            f"(gap {_interval(gap)}) vs repeat frame t "
            f"{fmt(get[(ONE_STEP, 'T moving: T-IoU repeat frame t')].mean)}.")


def _shape_line(get: dict[tuple[str, str], Estimate], horizons: Sequence[int]) -> str:
    """The rigid-shape score ignores where the T is, so it separates shape loss from pose error."""
    rolled = ", ".join(f"@{h} {fmt(get[(OPEN_LOOP, f'@{h} rigid shape model')].mean)}" for h in horizons)
    return (f"Rigid shape (pose-free): real frames {fmt(get[(AE, 'rigid shape, real frame')].mean)}, "
            f"reconstructions {fmt(get[(AE, 'rigid shape, reconstruction')].mean)}, teacher-forced "
            f"one step {fmt(get[(ONE_STEP, 'rigid shape model')].mean)}, open loop {rolled}.")


def _spread_line(get: dict[tuple[str, str], Estimate]) -> str:
    latent = get[(SPREAD, "model latent std")].mean
    change = get[(SPREAD, "real latent one-step change (mean abs z(t+1)-z(t))")].mean
    ratio = latent / change if change > 0 else math.inf
    kind = ("acts as a near-deterministic regressor" if ratio < DETERMINISTIC
            else "does sample: its seeds give different next latents")
    frames = get[(SPREAD, "model frame std")].mean
    decoder = get[(SPREAD, "decoder-only frame std (real latent)")].mean
    return (f"Sample spread: latent std across seeds {fmt(latent)} = {ratio:.2f} x a real step's "
            f"latent change ({fmt(change)}), so the flow head {kind} (threshold {DETERMINISTIC}); in "
            f"pixels the std is {fmt(frames)} grey levels (0-255), vs {fmt(decoder)} from the decoder's "
            "own noise on real latents.")


def _noise_line(rows: Sequence[Row], resamples: int, seed: int) -> str:
    """Rows are named 'T-IoU @h, context_noise_infer=x', the model's own setting first."""
    noise = [r for r in rows if r.section == NOISE]
    metric, base = noise[0].quantity.split(", ")
    line = f"Context-noise label sweep, {metric}: " + ", ".join(
        f"{fmt(r.estimate.mean)} ({r.quantity.split(', ')[1]})" for r in noise)
    diffs = [(r, paired(r.estimate, noise[0].estimate, resamples, seed)) for r in noise[1:]]
    if diffs:
        far, d = max(diffs, key=lambda x: abs(x[1].mean))
        line += f"; the largest change from {base} is {_interval(d)} ({far.quantity.split(', ')[1]})"
    return line + "."


def _snap_line(get: dict[tuple[str, str], Estimate], horizons: Sequence[int], resamples: int,
               seed: int) -> str:
    snaps = [paired(get[(SNAP, f"@{h} T-IoU snapped")], get[(SNAP, f"@{h} T-IoU decoded")],
                    resamples, seed) for h in horizons]
    return ("Palette snapping changes open-loop T-IoU by "
            + ", ".join(f"{_interval(d)} @{h}" for d, h in zip(snaps, horizons, strict=True))
            + f" (snapping a real frame keeps T-IoU {fmt(get[(SNAP, f'@{horizons[-1]} T-IoU real frame snapped (reference)')].mean)}).")


def conclude(rows: Sequence[Row], horizon: int, resamples: int = 1000, seed: int = 0) -> list[str]:
    """The verdict (per-step vs accumulated) and one line per other finding, from the rows."""
    get = _lookup(rows)
    horizons = sorted({int(q.split()[0][1:]) for s, q in get if s == OPEN_LOOP})
    lines = [_verdict_line(get, horizon, resamples, seed), _moving_line(get, resamples, seed),
             _shape_line(get, horizons)]
    if (SPREAD, "model latent std") in get:
        lines.append(_spread_line(get))
    if any(r.section == NOISE for r in rows):
        lines.append(_noise_line(rows, resamples, seed))
    if any(s == SNAP for s, _ in get):
        lines.append(_snap_line(get, horizons, resamples, seed))
    return lines


def render_markdown(report: DiagnosisReport, title: str) -> str:
    setup = report.setup
    out = [f"# {title}", "",
           f"Checkpoint `{setup.get('checkpoint_hash')}`, episodes {setup.get('episodes')} "
           f"({setup.get('frames_per_episode')} frames each), context {setup.get('context')}, "
           f"context_noise_infer {setup.get('context_noise_infer')}. Episode means with "
           f"episode-bootstrap 95 % intervals ({setup.get('resamples')} resamples); "
           f"{setup.get('wall_time_s')} s on {setup.get('threads')} thread(s).", "",
           "T-IoU: IoU of the T-block masks (pipeline.pusht.vision.block_mask, first camera) with "
           "the real frame's. Rigid shape: best IoU of a rigidly moved real T with the frame's T "
           "mask, wherever the T is (pose-free; 0 when no T is recognisable).", "",
           f"`{setup.get('command')}`", ""]
    for section in SECTIONS:
        rows = [r for r in report.rows if r.section == section]
        if not rows:
            continue
        out += [f"## {section}", "", f"_{NOTES[section]}_", "",
                "| quantity | mean | 95 % interval | episodes |", "|---|---:|---:|---:|"]
        out += [f"| {r.quantity} | {fmt(r.estimate.mean)} | [{fmt(r.estimate.low)}, "
                f"{fmt(r.estimate.high)}] | {r.estimate.n} |" for r in rows]
        out.append("")
    out += [f"## {CONCLUSION}", ""] + [f"- {line}" for line in report.conclusion]
    return "\n".join(out) + "\n"
