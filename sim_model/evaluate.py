"""Fidelity of a world model against recorded episodes, per horizon, beside a trivial baseline.

Convention: each episode is rolled from its recorded frame `start` (plus the `context_frames - 1`
frames before it, with the actions between them, when the model's window is seeded with more
than one real frame; default one). The action recorded at step t is applied to produce frame
t + 1, so the model's frame after h steps is compared with recorded frame `start + h`. The
baseline repeats the last real frame (frame `start`). Metrics at horizon h use the single frame
at h; an episode counts at h only if it has `start + h` frames after its first.

Task-specific object checks (PushT's T mask IoU and rigid-shape score) come in through a
`FrameAnalyzer`, so this module stays free of any environment; an analyzer that also has
`view_metrics` (see `ViewMetrics`) adds its own per-horizon numbers over all cameras (the sweep
task's in-goal error, mass conservation and cross-view consistency). With several cameras, PSNR
and SSIM are also reported per camera.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from schemas import SpecError
from schemas.errors import UserError
from sim_model.data.store import EpisodeStore
from sim_model.metrics import psnr, ssim
from sim_model.world_model import WorldModel

log = logging.getLogger(__name__)

CONVENTION = ("rolled from recorded frame `start` (context: `context_frames` real frames ending "
              "there); action t produces frame t+1; horizon h compares the model's h-th frame with "
              "recorded frame start+h; baseline = frame `start` repeated.")


class FrameAnalyzer(Protocol):
    """Task-specific analysis of one RGB frame (H, W, 3) uint8, e.g. pipeline.pusht.vision."""

    name: str

    def object_mask(self, frame: np.ndarray) -> np.ndarray:
        """(H, W) bool mask of the manipulated object."""
        ...

    def shape_score(self, frame: np.ndarray) -> float:
        """How much the object still looks like itself, in [0, 1] (1: a rigid, exact copy)."""
        ...

    def probe(self, frame: np.ndarray) -> dict[str, float]:
        """Named per-frame health values for long rollouts."""
        ...


class ViewMetrics(Protocol):
    """An analyzer's own per-horizon metrics (optional beside FrameAnalyzer's methods)."""

    def view_metrics(self, model: np.ndarray, truth: np.ndarray, first: np.ndarray) -> dict[str, float]:
        """model, truth, first: (V, H, W, 3) frames of one episode at horizon h (first: the start
        frame). Keys are 'metric/who', who being 'model' and a reference ('baseline': the start
        frame repeated, or 'truth': the recorded frame), e.g. {'mass/model': .., 'mass/truth': ..}."""
        ...


class Stat(BaseModel):
    """Mean and population std over episodes, with the per-episode values."""

    model_config = ConfigDict(extra="forbid")

    mean: float
    std: float
    n: int
    values: list[float] = Field(description="One value per episode, in report episode order.")

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        arr = np.asarray(values, dtype=np.float64)
        return cls(mean=float(arr.mean()), std=float(arr.std()), n=len(arr), values=arr.tolist())


class HorizonMetrics(BaseModel):
    """All metrics at one horizon. Keys of each dict: 'model', 'baseline' (or 'truth')."""

    model_config = ConfigDict(extra="forbid")

    horizon: int
    episodes: list[int] = Field(description="Store indices of the episodes long enough for it.")
    psnr: dict[str, Stat]
    ssim: dict[str, Stat]
    object_iou: dict[str, Stat] | None = Field(default=None, description="Object-mask IoU with the "
                                               "recorded frame: model vs truth, baseline vs truth.")
    shape_score: dict[str, Stat] | None = Field(default=None, description="Object shape score of "
                                                "the model's frame and, for reference, the recorded one.")
    extra: dict[str, dict[str, Stat]] | None = Field(
        default=None, description="PSNR and SSIM per camera ('psnr[top]', 'ssim[side]', ...) when the "
        "model has several, and the analyzer's own view metrics, each for 'model' and a reference.")


class FidelityReport(BaseModel):
    """What `iws eval fidelity` writes to metrics.json."""

    model_config = ConfigDict(extra="forbid")

    checkpoint_hash: str
    data: str
    start: int
    context_frames: int
    seed: int
    episodes: list[int]
    analyzer: str | None
    convention: str = CONVENTION
    horizons: list[HorizonMetrics]
    skipped_horizons: list[int] = Field(default_factory=list,
                                        description="Requested horizons longer than every episode.")


@dataclass
class EpisodeVideo:
    """Truth and model frames of one episode, both (T+1, V, H, W, 3) uint8 from frame `start`."""

    episode: int
    truth: np.ndarray
    model: np.ndarray


@dataclass
class FidelityResult:
    report: FidelityReport
    videos: list[EpisodeVideo] = field(default_factory=list)


def check_compatible(model: WorldModel, store: EpisodeStore) -> None:
    """SpecError unless the store's cameras and action size are what the model expects."""
    mf, sf = model.features, store.features
    want = [(c.name, c.height, c.width) for c in mf.cameras]
    have = [(c.name, c.height, c.width) for c in sf.cameras]
    if want != have:
        raise SpecError(f"the data's cameras {have} (name, H, W) differ from the model's {want}; "
                        "evaluate on episodes recorded like the model's training data.")
    if mf.action_dim != sf.action_dim:
        raise SpecError(f"the data's actions have {sf.action_dim} dimensions but the model takes "
                        f"{mf.action_dim}.")


def parse_horizons(text: str) -> list[int]:
    """The horizons of `--horizons 1,10,50`: positive step counts; UserError saying the form otherwise."""
    try:
        horizons = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UserError(f"--horizons {text!r} is not a comma-separated list of integers, "
                        "e.g. 1,10,50,200.") from None
    if not horizons or min(horizons) < 1:
        raise UserError(f"--horizons {text!r}: give positive step counts, e.g. 1,10,50,200.")
    return horizons


def plan_horizons(lengths: dict[int, int], horizons: Sequence[int], start: int,
                  context_frames: int) -> tuple[list[int], list[int], dict[int, int]]:
    """-> (kept horizons, skipped horizons, steps to roll per usable episode)."""
    if not horizons or min(horizons) < 1:
        raise SpecError(f"horizons must be positive step counts, got {list(horizons)}.")
    if start < context_frames - 1:
        raise SpecError(f"start={start} leaves no room for {context_frames} context frames; "
                        f"use start >= {context_frames - 1}.")
    available = {i: n - 1 - start for i, n in lengths.items() if n - 1 - start >= 1}
    if not available:
        raise SpecError(f"no episode has a frame after frame {start}; lower --start.")
    for i in sorted(set(lengths) - set(available)):
        log.warning("episode %d has %d frames, none after start=%d; left out", i, lengths[i], start)
    longest = max(available.values())
    kept = sorted({h for h in horizons if h <= longest})
    skipped = sorted({h for h in horizons if h > longest})
    if skipped:
        log.warning("horizons %s are longer than every episode (at most %d steps after frame %d); "
                    "skipped", skipped, longest, start)
    if not kept:
        raise SpecError(f"every horizon {sorted(set(horizons))} exceeds the longest episode's "
                        f"{longest} steps after frame {start}; choose shorter horizons.")
    steps = {i: min(n, kept[-1]) for i, n in available.items()}
    return kept, skipped, steps


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two boolean masks; 1.0 when both are empty (they agree there is nothing)."""
    union = np.logical_or(a, b).sum()
    return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)


@dataclass
class _Batch:
    episodes: list[int]
    steps: np.ndarray  # (B,) steps each row is evaluated for
    context: np.ndarray  # (B, K, V, H, W, 3) real frames ending at `start`
    history: np.ndarray  # (B, K-1, A) actions between the context frames
    actions: np.ndarray  # (B, T, A), rows shorter than T padded with their last action
    truth: np.ndarray  # (B, T+1, V, H, W, 3) recorded frames from `start`, padded likewise
    state: np.ndarray | None  # (B, S) recorded state at `start`


def _pad(x: np.ndarray, length: int) -> np.ndarray:
    return x if len(x) >= length else np.concatenate([x, np.repeat(x[-1:], length - len(x), axis=0)])


def _load_batch(store: EpisodeStore, episodes: list[int], steps: dict[int, int], start: int,
                context_frames: int, use_state: bool) -> _Batch:
    cams = list(store.features.camera_names)
    keys = cams + ["action"] + (["state"] if use_state else [])
    horizon = max(steps[i] for i in episodes)
    ctx, hist, acts, truth, state = [], [], [], [], []
    for i in episodes:
        first = start - context_frames + 1
        data = store.window(i, first, start + steps[i] + 1, keys)
        frames = np.stack([data[c] for c in cams], axis=1)  # (K-1+n+1, V, H, W, 3)
        k = context_frames - 1
        ctx.append(frames[: k + 1])
        hist.append(data["action"][:k])
        acts.append(_pad(data["action"][k:k + steps[i]], horizon))
        truth.append(_pad(frames[k:], horizon + 1))
        if use_state:
            state.append(data["state"][k])
    return _Batch(episodes, np.array([steps[i] for i in episodes]), np.stack(ctx), np.stack(hist),
                  np.stack(acts).astype(np.float32), np.stack(truth),
                  np.stack(state).astype(np.float32) if use_state else None)


class _Accumulator:
    """Per-horizon lists of per-episode values, in the order episodes are added."""

    def __init__(self, horizons: list[int], analyzer: FrameAnalyzer | None,
                 cameras: Sequence[str] = ()) -> None:
        self.analyzer, self.cameras = analyzer, list(cameras)
        self.values: dict[int, dict[str, list[float]]] = {h: {} for h in horizons}
        self.episodes: dict[int, list[int]] = {h: [] for h in horizons}

    def _put(self, h: int, key: str, values: Sequence[float] | np.ndarray) -> None:
        self.values[h].setdefault(key, []).extend(float(v) for v in values)

    def add(self, h: int, episodes: list[int], model: np.ndarray, truth: np.ndarray,
            first: np.ndarray) -> None:
        """model, truth, first: (R, V, H, W, 3) frames at horizon h (first: the start frame)."""
        self.episodes[h].extend(episodes)
        for metric, fn in (("psnr", psnr), ("ssim", ssim)):
            for who, frames in (("model", model), ("baseline", first)):
                values = fn(frames, truth)  # (R, V)
                self._put(h, f"{metric}/{who}", values.mean(axis=1))  # mean over views
                if len(self.cameras) > 1:
                    for v, camera in enumerate(self.cameras):
                        self._put(h, f"extra:{metric}[{camera}]/{who}", values[:, v])
        if self.analyzer is None:
            return
        view_metrics = getattr(self.analyzer, "view_metrics", None)
        if callable(view_metrics):
            for row in range(len(model)):
                for key, value in view_metrics(model[row], truth[row], first[row]).items():
                    self._put(h, f"extra:{key}", [value])
        an = self.analyzer  # object checks on the first camera
        true_masks = [an.object_mask(f) for f in truth[:, 0]]
        self._put(h, "object_iou/model", [mask_iou(an.object_mask(f), m)
                                          for f, m in zip(model[:, 0], true_masks, strict=True)])
        self._put(h, "object_iou/baseline", [mask_iou(an.object_mask(f), m)
                                             for f, m in zip(first[:, 0], true_masks, strict=True)])
        self._put(h, "shape_score/model", [an.shape_score(f) for f in model[:, 0]])
        self._put(h, "shape_score/truth", [an.shape_score(f) for f in truth[:, 0]])

    def metrics(self) -> list[HorizonMetrics]:
        out = []
        for h, values in self.values.items():
            grouped: dict[str, dict[str, Stat]] = {}
            extra: dict[str, dict[str, Stat]] = {}
            for key, vals in values.items():
                metric, who = key.rsplit("/", 1)
                if metric.startswith("extra:"):
                    extra.setdefault(metric.removeprefix("extra:"), {})[who] = Stat.of(vals)
                else:
                    grouped.setdefault(metric, {})[who] = Stat.of(vals)
            out.append(HorizonMetrics(horizon=h, episodes=self.episodes[h], extra=extra or None,
                                      **grouped))
        return out


def evaluate_fidelity(model: WorldModel, store: EpisodeStore, *,
                      horizons: Sequence[int] = (1, 10, 50, 200), episodes: Sequence[int] | None = None,
                      start: int = 0, context_frames: int = 1, batch_size: int = 8, seed: int = 0,
                      analyzer: FrameAnalyzer | None = None, video_episodes: int = 2,
                      progress: Callable[[int, int], None] | None = None) -> FidelityResult:
    """Roll `model` from recorded frames under recorded actions and score it per horizon.

    episodes: store indices (default all); seeds: row noise seed is `seed + episode index`, so
    results do not depend on batching. progress(done, total) is called after every step.
    """
    check_compatible(model, store)
    if batch_size < 1 or context_frames < 1:
        raise SpecError(f"batch_size and context_frames must be >= 1, got {batch_size}, {context_frames}.")
    episodes = list(range(len(store))) if episodes is None else list(episodes)
    bad = [i for i in episodes if not 0 <= i < len(store)]
    if bad or not episodes:
        raise SpecError(f"episodes {bad or '[]'} are not in the store, which has {len(store)} "
                        f"episodes (0..{len(store) - 1}).")
    ranges = {i: store.episode_range(i) for i in episodes}
    lengths = {i: stop - first for i, (first, stop) in ranges.items()}
    kept, skipped, steps = plan_horizons(lengths, horizons, start, context_frames)
    order = [i for i in episodes if i in steps]
    chunks = [order[j:j + batch_size] for j in range(0, len(order), batch_size)]
    total = sum(max(steps[i] for i in c) for c in chunks)
    use_state = model.features.state_dim > 0 and store.features.state_dim == model.features.state_dim
    acc, counter = _Accumulator(kept, analyzer, model.features.camera_names), [0]
    videos: list[EpisodeVideo] = []

    def tick() -> None:
        counter[0] += 1
        if progress is not None:
            progress(counter[0], total)

    for chunk in chunks:
        batch = _load_batch(store, chunk, steps, start, context_frames, use_state)
        n_video = max(0, min(video_episodes - len(videos), len(chunk)))
        rolled = _roll(model, batch, kept, [seed + i for i in chunk], acc, n_video, tick)
        for r in range(n_video):
            n = int(batch.steps[r]) + 1
            videos.append(EpisodeVideo(chunk[r], batch.truth[r, :n], rolled[r, :n]))
    report = FidelityReport(checkpoint_hash=model.checkpoint_hash, data=str(store.path), start=start,
                            context_frames=context_frames, seed=seed, episodes=order,
                            analyzer=None if analyzer is None else analyzer.name,
                            horizons=acc.metrics(), skipped_horizons=skipped)
    return FidelityResult(report, videos)


def _roll(model: WorldModel, batch: _Batch, horizons: list[int], seeds: list[int],
          acc: _Accumulator, n_video: int, tick: Callable[[], None]) -> np.ndarray:
    """Step one batch, scoring at each horizon; returns the first n_video rows' frames
    (n_video, T+1, V, H, W, 3), starting with the real start frame."""
    k = batch.context.shape[1]
    frames = batch.context[:, 0] if k == 1 else batch.context
    model.reset(frames, actions=batch.history if k > 1 else None, state=batch.state, seeds=seeds)
    video = [batch.truth[:n_video, 0]]
    wanted = set(horizons)
    for t in range(batch.actions.shape[1]):
        out = model.step(batch.actions[:, t]).frames  # (B, V, H, W, 3)
        h = t + 1
        if h in wanted:
            rows = np.nonzero(batch.steps >= h)[0]
            acc.add(h, [batch.episodes[r] for r in rows], out[rows], batch.truth[rows, h],
                    batch.truth[rows, 0])
        video.append(out[:n_video])
        tick()
    return np.stack(video, axis=1)
