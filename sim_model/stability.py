"""Long-rollout stability: roll one episode for thousands of steps and record its health per step.

Recorded every step: `finite` (the predicted state has no NaN/inf; frames are uint8 and cannot
hold NaN, so a diverged latent shows up instead as a flat frame), `mean_intensity` and
`contrast` (mean and std of the frame's pixels, in [0, 1]; contrast near 0 = a collapsed, flat
frame). A task's FrameAnalyzer adds its own probes (PushT: agent visible, T rigid-shape score),
every `probe_every` steps.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from schemas import SpecError
from sim_model.evaluate import FrameAnalyzer
from sim_model.world_model import WorldModel

log = logging.getLogger(__name__)


class SeriesSummary(BaseModel):
    """One recorded quantity over the rollout (recorded steps only)."""

    model_config = ConfigDict(extra="forbid")

    mean: float
    min: float
    max: float
    first: float = Field(description="Mean over the first tenth of the recorded steps.")
    last: float = Field(description="Mean over the last tenth of the recorded steps.")

    @classmethod
    def of(cls, values: np.ndarray) -> SeriesSummary:
        tenth = max(1, len(values) // 10)
        return cls(mean=float(values.mean()), min=float(values.min()), max=float(values.max()),
                   first=float(values[:tenth].mean()), last=float(values[-tenth:].mean()))


class StabilityReport(BaseModel):
    """What `iws eval stability` writes to stability.json."""

    model_config = ConfigDict(extra="forbid")

    checkpoint_hash: str
    init: str = Field(description="Where the initial frame came from, e.g. 'data.zarr#0:0'.")
    steps: int
    seed: int
    probe_every: int
    analyzer: str | None
    all_finite: bool
    first_nonfinite_step: int | None = Field(description="1-based step of the first non-finite "
                                             "state, None if every step was finite.")
    summary: dict[str, SeriesSummary]
    series: dict[str, list[float | None]] = Field(description="Per step (index 0 = step 1); None "
                                                  "where a probe did not run.")
    snapshot_steps: list[int] = Field(description="Steps of the saved snapshot frames (0 = the real "
                                      "initial frame).")


@dataclass
class StabilityResult:
    report: StabilityReport
    snapshots: np.ndarray  # (K, V, H, W, 3) uint8 at report.snapshot_steps


def run_stability(model: WorldModel, init_frames: np.ndarray, actions: np.ndarray, *,
                  state: np.ndarray | None = None, seed: int = 0,
                  analyzer: FrameAnalyzer | None = None, probe_every: int = 1, snapshots: int = 8,
                  init_ref: str = "", progress: Callable[[int, int], None] | None = None
                  ) -> StabilityResult:
    """Roll from one real frame (V, H, W, 3) uint8 under actions (N, A); one batch row."""
    init_frames = np.asarray(init_frames)
    actions = np.asarray(actions, dtype=np.float32)
    if actions.ndim != 2 or len(actions) < 1:
        raise SpecError(f"actions must be (steps, action_dim) with steps >= 1, got {actions.shape}.")
    if probe_every < 1:
        raise SpecError(f"probe_every must be >= 1, got {probe_every}.")
    n = len(actions)
    model.reset(init_frames[None], state=None if state is None else np.asarray(state)[None],
                seeds=[seed])
    keep = sorted(set(np.linspace(0, n, max(snapshots, 2)).round().astype(int).tolist()))
    shots = {0: init_frames} if 0 in keep else {}
    series: dict[str, np.ndarray] = {key: np.full(n, np.nan) for key in
                                     ("finite", "mean_intensity", "contrast")}
    for t in range(n):
        res = model.step(actions[t:t + 1])
        frame = res.frames[0]  # (V, H, W, 3)
        series["finite"][t] = float(res.state is None or bool(np.isfinite(res.state).all()))
        pixels = frame.astype(np.float32) / 255.0
        series["mean_intensity"][t] = pixels.mean()
        series["contrast"][t] = pixels.std()
        if analyzer is not None and (t % probe_every == 0 or t == n - 1):
            for key, value in analyzer.probe(frame[0]).items():  # first camera
                series.setdefault(key, np.full(n, np.nan))[t] = value
        if t + 1 in keep:
            shots[t + 1] = frame
        if progress is not None:
            progress(t + 1, n)
    bad = np.nonzero(series["finite"] < 1)[0]
    if len(bad):
        log.warning("the rollout's state became non-finite at step %d", bad[0] + 1)
    report = StabilityReport(
        checkpoint_hash=model.checkpoint_hash, init=init_ref, steps=n, seed=seed,
        probe_every=probe_every, analyzer=None if analyzer is None else analyzer.name,
        all_finite=not len(bad), first_nonfinite_step=int(bad[0]) + 1 if len(bad) else None,
        summary={k: SeriesSummary.of(v[~np.isnan(v)]) for k, v in series.items()},
        series={k: [None if math.isnan(x) else float(x) for x in v] for k, v in series.items()},
        snapshot_steps=sorted(shots))
    return StabilityResult(report, np.stack([shots[k] for k in sorted(shots)]))
