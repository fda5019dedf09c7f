"""Where does the world model lose the PushT T? A diagnosis on held-out episodes.

Per episode (means over its frames), with episode-bootstrap 95 % intervals:
  1. autoencoder ceiling: encode + decode real frames (PSNR, T-mask IoU, rigid-shape score);
  2. teacher-forced one step: reset on the real history (as many frames as the model's context),
     one step, against the real next frame, beside repeating frame t. Its targets are the frames
     of section 1, so the two are paired;
  3. open loop from each episode's first frame at several horizons, beside repeating that frame;
  4. sample spread: `spread_seeds` seeds of the same step from the same context, in latent and in
     pixels, beside the decoder's own pixel spread on real latents and the real one-step change;
  5. the context-noise label (`context_noise_infer`) swept, open-loop T-IoU at `noise_horizon`;
  6. decoded frames snapped to the PushT palette before the T mask is taken;
  7. a conclusion computed from 1-3: is the T lost in each step or by accumulation?

Convention as sim_model.evaluate: action t produces frame t+1. T masks and rigid-shape scores are
pipeline.pusht.vision's, on the first camera; PSNR is the mean over cameras.

    .venv/bin/python -m experiments.fidelity_diagnosis --model pusht --data data/pusht_heldout.zarr \
        --episodes 12 --out experiments/results/fidelity_diagnosis
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from experiments.fidelity_diagnosis_report import (
    AE,
    NOISE,
    ONE_STEP,
    OPEN_LOOP,
    SNAP,
    SPREAD,
    DiagnosisReport,
    Row,
    bootstrap,
    conclude,
    episode_mean,
    render_markdown,
)
from pipeline.pusht.vision import PALETTE, block_mask, rigid_shape_score
from schemas import SpecError
from sim_model.data.store import EpisodeStore
from sim_model.evaluate import check_compatible
from sim_model.metrics import psnr
from sim_model.storage.atomic import write_text
from sim_model.world_model import WorldModel

log = logging.getLogger(__name__)


class Settings(BaseModel):
    """What the diagnosis measures, and how much of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    horizons: tuple[int, ...] = Field(default=(1, 10, 25, 50), description="Open-loop horizons.")
    one_step_frames: int = Field(default=64, ge=1, description="Teacher-forced frames per episode.")
    spread_frames: int = Field(default=4, ge=1, description="Contexts per episode for the spread.")
    spread_seeds: int = Field(default=8, ge=2, description="Seeds per context for the spread.")
    noise_levels: tuple[float, ...] = Field(default=(0.0, 0.02, 0.05, 0.1, 0.2),
                                            description="context_noise_infer values swept.")
    noise_horizon: int = Field(default=25, ge=1, description="Open-loop horizon of the sweep.")
    resamples: int = Field(default=1000, ge=1, description="Episode-bootstrap resamples.")
    seed: int = Field(default=0, description="Base of every row's noise seed and the bootstrap's.")


@dataclass
class HeldOut:
    """Held-out episodes in memory, each cut to the shortest one's length L."""

    episodes: list[int]  # store indices
    frames: np.ndarray  # (E, L, V, H, W, 3) uint8
    actions: np.ndarray  # (E, L, A) float32; action t produces frame t+1


def load_heldout(store: EpisodeStore, count: int, min_length: int) -> HeldOut:
    """The first `count` episodes of the store that have at least `min_length` frames."""
    cams = list(store.features.camera_names)
    lengths = {i: stop - first for i in range(len(store)) for first, stop in [store.episode_range(i)]}
    chosen = [i for i, n in lengths.items() if n >= min_length][:count]
    if not chosen:
        raise SpecError(f"no episode in {store.path} has {min_length} frames (the longest has "
                        f"{max(lengths.values(), default=0)}); use shorter --horizons.")
    if len(chosen) < count:
        log.warning("only %d episodes have >= %d frames; using those", len(chosen), min_length)
    length = min(lengths[i] for i in chosen)
    data = [store.window(i, 0, length, cams + ["action"]) for i in chosen]
    frames = np.stack([np.stack([d[c] for c in cams], axis=1) for d in data])
    actions = np.stack([d["action"] for d in data]).astype(np.float32)
    return HeldOut(chosen, frames, actions)


# ---- per-frame analysis: arrays (..., V, H, W, 3) -> (...) --------------------------------------
def t_masks(frames: np.ndarray) -> np.ndarray:
    """T masks of the first camera: (..., V, H, W, 3) -> (..., H, W) bool."""
    first = frames[..., 0, :, :, :]
    flat = first.reshape(-1, *first.shape[-3:])
    return np.stack([block_mask(f) for f in flat]).reshape(first.shape[:-1])


def mask_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of masks (..., H, W); 1 where both are empty (they agree there is nothing)."""
    inter = np.logical_and(a, b).sum(axis=(-2, -1))
    union = np.logical_or(a, b).sum(axis=(-2, -1))
    return np.where(union == 0, 1.0, inter / np.maximum(union, 1))


def t_iou(frames: np.ndarray, truth: np.ndarray) -> np.ndarray:
    return mask_iou(t_masks(frames), t_masks(truth))


def shape_scores(frames: np.ndarray) -> np.ndarray:
    """Rigid-shape score of the first camera's T (0: no recognisable T)."""
    first = frames[..., 0, :, :, :]
    flat = first.reshape(-1, *first.shape[-3:])
    return np.array([rigid_shape_score(f) for f in flat]).reshape(first.shape[:-3])


def frame_psnr(frames: np.ndarray, truth: np.ndarray) -> np.ndarray:
    return psnr(frames, truth).mean(axis=-1)  # mean over cameras


def snap_to_palette(frames: np.ndarray) -> np.ndarray:
    """Each pixel replaced by the nearest (RGB distance) of PushT's reference colours."""
    flat = frames.reshape(-1, 3).astype(np.float32)
    nearest = ((flat[:, None, :] - PALETTE[None]) ** 2).sum(-1).argmin(axis=1)
    return PALETTE[nearest].astype(np.uint8).reshape(frames.shape)


# ---- model runs ----------------------------------------------------------------------------------
def pick_targets(length: int, context: int, count: int) -> np.ndarray:
    """Frames t to predict t+1 from, evenly spaced, each with a full context of real frames."""
    first, last = min(context - 1, length - 2), length - 2
    if last < 0:
        raise SpecError(f"episodes of {length} frames have no next frame to predict.")
    return np.unique(np.linspace(first, last, count).round().astype(int))


def autoencode(wm: WorldModel, frames: np.ndarray, seed: int) -> np.ndarray:
    """Encode + decode (E, n, V, H, W, 3); one episode's frames per decode call."""
    out = np.empty_like(frames)
    for e, ep_frames in enumerate(frames):
        seeds = [seed + 1000 * e + j for j in range(len(ep_frames))]
        out[e] = wm.decode(wm.encode(ep_frames), seeds=seeds)
    return out


def reset_on_history(wm: WorldModel, data: HeldOut, t: int, seeds: Sequence[int]) -> None:
    """Reset on the real frames t-k+1..t (k = the model's context) and the actions between."""
    first = max(0, t - wm.config.model.dynamics.context + 1)
    wm.reset(data.frames[:, first:t + 1], actions=data.actions[:, first:t], seeds=seeds)


def one_step(wm: WorldModel, data: HeldOut, targets: np.ndarray, seed: int) -> np.ndarray:
    """Teacher-forced predictions of frames t+1 for t in targets: (E, n, V, H, W, 3)."""
    out = []
    for j, t in enumerate(targets):
        reset_on_history(wm, data, int(t), [seed + 1000 * e + j for e in range(len(data.episodes))])
        out.append(wm.step(data.actions[:, t]).frames)
    return np.stack(out, axis=1)


def open_loop(wm: WorldModel, data: HeldOut, horizons: Sequence[int], seed: int) -> dict[int, np.ndarray]:
    """Roll from each episode's first frame under its actions: frames (E, V, H, W, 3) at each h."""
    wm.reset(data.frames[:, 0], seeds=[seed + e for e in range(len(data.episodes))])
    out = {}
    for t in range(max(horizons)):
        frames = wm.step(data.actions[:, t]).frames
        if t + 1 in horizons:
            out[t + 1] = frames
    return out


def with_context_noise(wm: WorldModel, level: float) -> WorldModel:
    """The same weights, with context latents tagged with noise level `level` at inference."""
    cfg = wm.config
    dynamics = cfg.model.dynamics.model_copy(update={"context_noise_infer": level})
    model = cfg.model.model_copy(update={"dynamics": dynamics})
    return WorldModel(wm.net, cfg.model_copy(update={"model": model}), device=wm.device,
                      precision="bf16" if wm.bf16 else "fp32")


def spread_at(wm: WorldModel, data: HeldOut, t: int, seeds: int, seed: int) -> dict[str, np.ndarray]:
    """Per-episode spread over `seeds` samples of the step after frame t, and references."""
    frames, latents = [], []
    for s in range(seeds):
        reset_on_history(wm, data, t, [seed + s] * len(data.episodes))
        frames.append(wm.step(data.actions[:, t]).frames.astype(np.float32))
        assert wm._z is not None
        latents.append(wm._z.float().cpu().numpy())
    real = wm.encode(data.frames[:, t:t + 2]).float()  # (E, 2, V, C, h, w)
    decoded = np.stack([wm.decode(real[:, 1], seeds=[seed + s] * len(data.episodes))
                        for s in range(seeds)]).astype(np.float32)
    axes = tuple(range(1, frames[0].ndim))
    return {"model frame std": np.stack(frames).std(axis=0).mean(axis=axes),
            "decoder-only frame std (real latent)": decoded.std(axis=0).mean(axis=axes),
            "model latent std": np.stack(latents).std(axis=0).mean(axis=axes),
            "real latent one-step change (mean abs z(t+1)-z(t))":
                (real[:, 1] - real[:, 0]).abs().mean(dim=axes).cpu().numpy()}


# ---- sections: each returns per-episode rows -------------------------------------------------
def _rows(section: str, values: dict[str, np.ndarray], st: Settings,
          where: np.ndarray | None = None) -> list[Row]:
    return [Row(section=section, quantity=name,
                estimate=bootstrap(episode_mean(x, where), st.resamples, st.seed))
            for name, x in values.items()]


def autoencoder_and_one_step(wm: WorldModel, data: HeldOut, st: Settings) -> list[Row]:
    """Sections 1 and 2, on the same target frames t+1."""
    targets = pick_targets(data.frames.shape[1], wm.config.model.dynamics.context, st.one_step_frames)
    real_next, real_now = data.frames[:, targets + 1], data.frames[:, targets]
    recon = autoencode(wm, real_next, st.seed)
    pred = one_step(wm, data, targets, st.seed)
    masks_next = t_masks(real_next)
    iou_recon, iou_pred = mask_iou(t_masks(recon), masks_next), mask_iou(t_masks(pred), masks_next)
    iou_repeat = mask_iou(t_masks(real_now), masks_next)
    moving = iou_repeat < 1.0  # the T's mask changes between t and t+1
    log.info("sections 1-2: %d target frames per episode, %.0f %% with the T moving",
             len(targets), 100 * moving.mean())
    rows = _rows(AE, {"PSNR (dB)": frame_psnr(recon, real_next), "T-IoU": iou_recon,
                      "rigid shape, reconstruction": shape_scores(recon),
                      "rigid shape, real frame": shape_scores(real_next)}, st)
    rows += _rows(ONE_STEP, {"T-IoU model": iou_pred, "T-IoU repeat frame t": iou_repeat,
                             "PSNR model (dB)": frame_psnr(pred, real_next),
                             "PSNR repeat frame t (dB)": frame_psnr(real_now, real_next),
                             "rigid shape model": shape_scores(pred),
                             "share of frames with the T moving": moving.astype(float)}, st)
    rows += _rows(ONE_STEP, {"T moving: T-IoU model": iou_pred,
                             "T moving: T-IoU repeat frame t": iou_repeat,
                             "T moving: T-IoU autoencoder ceiling": iou_recon}, st, where=moving)
    return rows


def open_loop_and_snapping(wm: WorldModel, data: HeldOut, st: Settings) -> list[Row]:
    """Sections 3 and 6 from one rollout."""
    rolled = open_loop(wm, data, st.horizons, st.seed)
    first = data.frames[:, 0]
    rows, snap_rows = [], []
    for h, frames in rolled.items():
        truth = data.frames[:, h]
        true_masks = t_masks(truth)
        iou_model = mask_iou(t_masks(frames), true_masks)
        rows += _rows(OPEN_LOOP, {f"@{h} T-IoU model": iou_model,
                                  f"@{h} T-IoU repeat first frame": mask_iou(t_masks(first), true_masks),
                                  f"@{h} PSNR model (dB)": frame_psnr(frames, truth),
                                  f"@{h} PSNR repeat first frame (dB)": frame_psnr(first, truth),
                                  f"@{h} rigid shape model": shape_scores(frames)}, st)
        snap_rows += _rows(SNAP, {
            f"@{h} T-IoU decoded": iou_model,
            f"@{h} T-IoU snapped": mask_iou(t_masks(snap_to_palette(frames)), true_masks),
            f"@{h} T-IoU real frame snapped (reference)":
                mask_iou(t_masks(snap_to_palette(truth)), true_masks)}, st)
    return rows + snap_rows


def spread_rows(wm: WorldModel, data: HeldOut, st: Settings) -> list[Row]:
    """Section 4: the spread at `spread_frames` contexts per episode, averaged per episode."""
    targets = pick_targets(data.frames.shape[1], wm.config.model.dynamics.context, st.spread_frames)
    per_t = [spread_at(wm, data, int(t), st.spread_seeds, st.seed) for t in targets]
    values = {name: np.stack([p[name] for p in per_t], axis=1) for name in per_t[0]}
    return _rows(SPREAD, values, st)


def noise_sweep_rows(wm: WorldModel, data: HeldOut, st: Settings) -> list[Row]:
    """Section 5: open-loop T-IoU at noise_horizon for each context-noise label (the
    model's own setting first, also when it is not among `noise_levels`)."""
    h, truth = st.noise_horizon, data.frames[:, st.noise_horizon]
    own = wm.config.model.dynamics.context_noise_infer
    levels = [own] + [x for x in st.noise_levels if x != own]  # the model's own setting first
    values = {f"T-IoU @{h}, context_noise_infer={level:g}":
              t_iou(open_loop(with_context_noise(wm, level), data, [h], st.seed)[h], truth)
              for level in levels}
    return _rows(NOISE, values, st)


def diagnose(wm: WorldModel, data: HeldOut, st: Settings) -> DiagnosisReport:
    """Every section on the held-out episodes, and the conclusion."""
    if max(*st.horizons, st.noise_horizon) >= data.frames.shape[1]:
        raise SpecError(f"horizons up to {max(*st.horizons, st.noise_horizon)} need episodes of "
                        f"more than {data.frames.shape[1]} frames.")
    rows: list[Row] = []
    for part in (autoencoder_and_one_step, open_loop_and_snapping, spread_rows, noise_sweep_rows):
        started = time.perf_counter()
        rows += part(wm, data, st)
        log.info("%s: %.1f s", part.__name__, time.perf_counter() - started)
    setup: dict[str, Any] = {"checkpoint_hash": wm.checkpoint_hash, "episodes": data.episodes,
                             "frames_per_episode": int(data.frames.shape[1]),
                             "context": wm.config.model.dynamics.context,
                             "context_noise_infer": wm.config.model.dynamics.context_noise_infer,
                             **st.model_dump(mode="json")}
    return DiagnosisReport(setup=setup, rows=rows,
                           conclusion=conclude(rows, max(st.horizons), st.resamples, st.seed))


# ---- CLI -----------------------------------------------------------------------------------------
def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in text.split(",") if x)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="pusht", help="checkpoint directory or bundled name")
    p.add_argument("--data", required=True, help="held-out episode store (Zarr)")
    p.add_argument("--episodes", type=int, default=12)
    p.add_argument("--out", type=Path, required=True, help="writes OUT.md and OUT.json")
    d = Settings()
    p.add_argument("--horizons", type=lambda s: tuple(int(x) for x in _floats(s)), default=d.horizons)
    p.add_argument("--one-step-frames", type=int, default=d.one_step_frames)
    p.add_argument("--spread-frames", type=int, default=d.spread_frames)
    p.add_argument("--spread-seeds", type=int, default=d.spread_seeds)
    p.add_argument("--noise-levels", type=_floats, default=d.noise_levels)
    p.add_argument("--noise-horizon", type=int, default=d.noise_horizon)
    p.add_argument("--resamples", type=int, default=d.resamples)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    st = Settings(horizons=args.horizons, one_step_frames=args.one_step_frames,
                  spread_frames=args.spread_frames, spread_seeds=args.spread_seeds,
                  noise_levels=args.noise_levels, noise_horizon=args.noise_horizon,
                  resamples=args.resamples, seed=args.seed)
    started = time.perf_counter()
    wm = WorldModel.load(args.model, device=args.device)
    store = EpisodeStore.open(args.data, mode="r")
    check_compatible(wm, store)
    longest = max(*st.horizons, st.noise_horizon, wm.config.model.dynamics.context)
    report = diagnose(wm, load_heldout(store, args.episodes, longest + 1), st)
    command = " ".join(["python -m experiments.fidelity_diagnosis",
                        *(sys.argv[1:] if argv is None else argv)])
    report.setup.update(model=str(args.model), data=str(args.data), threads=args.threads, command=command,
                        wall_time_s=round(time.perf_counter() - started, 1))
    text = render_markdown(report, title=f"Fidelity diagnosis: {args.model} on {Path(args.data).name}")
    write_text(args.out.with_suffix(".md"), text)
    write_text(args.out.with_suffix(".json"), report.model_dump_json(indent=1))
    print(text)
    return 0 if all(math.isfinite(r.estimate.mean) or r.estimate.n == 0 for r in report.rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
