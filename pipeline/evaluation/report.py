"""What `iws eval` leaves behind: JSON reports, plots, side-by-side videos and terminal tables.

Every file is written through sim_model.storage.atomic.write_file (a temporary sibling, fsynced, renamed
into place), so an interrupted run leaves the previous file or the new one, never half of one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel
from rich.markup import escape
from rich.table import Table

from sim_model.evaluate import EpisodeVideo, FidelityReport, Stat
from sim_model.stability import StabilityReport
from sim_model.storage import atomic

METRIC_TITLES = {"psnr": "PSNR (dB)", "ssim": "SSIM", "object_iou": "object-mask IoU",
                 "shape_score": "rigid-shape score"}
LINE_LABELS = {"model": "model", "baseline": "repeat start frame", "truth": "recorded frames"}


def write_json(path: str | os.PathLike[str], report: BaseModel) -> None:
    atomic.write_text(path, report.model_dump_json(indent=2))


def _figure(rows: int, cols: int, size: tuple[float, float]):  # noqa: ANN202 (matplotlib types)
    import matplotlib

    matplotlib.use("Agg")  # files only; never opens a window
    import matplotlib.pyplot as plt

    return plt, *plt.subplots(rows, cols, figsize=size, squeeze=False)


def plot_fidelity(report: FidelityReport, path: str | os.PathLike[str]) -> None:
    """One panel per metric: mean +- std over episodes vs horizon, model and reference."""
    metrics = [m for m in METRIC_TITLES if getattr(report.horizons[0], m) is not None]
    plt, fig, axes = _figure(1, len(metrics), (4.2 * len(metrics), 3.6))
    horizons = [h.horizon for h in report.horizons]
    for ax, metric in zip(axes[0], metrics, strict=True):
        for who in getattr(report.horizons[0], metric):
            stats: list[Stat] = [getattr(h, metric)[who] for h in report.horizons]
            ax.errorbar(horizons, [s.mean for s in stats], yerr=[s.std for s in stats], capsize=3,
                        marker="o", label=LINE_LABELS.get(who, who), linestyle="-" if who == "model" else "--")
        ax.set_xscale("log")
        ax.set_xlabel("horizon (steps)")
        ax.set_title(METRIC_TITLES[metric])
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"fidelity of {report.checkpoint_hash} on {Path(report.data).name}")
    fig.tight_layout()
    atomic.write_file(path, lambda tmp: fig.savefig(tmp, dpi=110))
    plt.close(fig)


def plot_stability(report: StabilityReport, path: str | os.PathLike[str]) -> None:
    """One panel per recorded series over the steps (probes: the steps where they ran)."""
    keys = list(report.series)
    plt, fig, axes = _figure(len(keys), 1, (9.0, 1.9 * len(keys)))
    for ax, key in zip(axes[:, 0], keys, strict=True):
        values = np.array([np.nan if v is None else v for v in report.series[key]])
        steps = np.arange(1, len(values) + 1)
        ok = ~np.isnan(values)
        ax.plot(steps[ok], values[ok], linewidth=0.8)
        ax.set_ylabel(key, fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    fig.suptitle(f"{report.steps}-step rollout of {report.checkpoint_hash} from {report.init}")
    fig.tight_layout()
    atomic.write_file(path, lambda tmp: fig.savefig(tmp, dpi=110))
    plt.close(fig)


def _upscale(frames: np.ndarray, min_size: int = 96) -> np.ndarray:
    """Nearest-neighbour upscale (..., H, W, 3) so small test-size frames stay visible."""
    factor = max(1, -(-min_size // frames.shape[-2]))
    return frames.repeat(factor, axis=-3).repeat(factor, axis=-2)


def _tile(frames: np.ndarray, gap: int = 2) -> np.ndarray:
    """(N, H, W, 3) -> (H, N*W + gaps, 3) with white separators."""
    h = frames.shape[1]
    sep = np.full((h, gap, 3), 255, np.uint8)
    parts = [p for f in frames for p in (f, sep)][:-1]
    return np.concatenate(parts, axis=1)


def label_strip(width: int, labels: Sequence[tuple[int, str]], height: int = 12) -> np.ndarray:
    """(height, width, 3) white strip with text at the given x offsets."""
    from PIL import Image, ImageDraw

    strip = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(strip)
    for x, text in labels:
        draw.text((x + 2, 0), text, fill=(0, 0, 0))
    return np.asarray(strip)


def side_by_side(videos: Sequence[EpisodeVideo]) -> np.ndarray:
    """(T, H', W', 3): one row per episode, truth views | model views (labelled on top); short
    episodes hold their last frame."""
    length = max(len(v.truth) for v in videos)
    rows = []
    for v in videos:
        pad = length - len(v.truth)
        truth = np.concatenate([v.truth, np.repeat(v.truth[-1:], pad, 0)])  # (T, V, H, W, 3)
        model = np.concatenate([v.model, np.repeat(v.model[-1:], pad, 0)])
        pair = _upscale(np.concatenate([truth, model], axis=1))  # (T, 2V, H, W, 3)
        rows.append(np.stack([_tile(step, gap=4) for step in pair]))
    gap = np.full((length, 4, rows[0].shape[2], 3), 255, np.uint8)
    body = np.concatenate([p for r in rows for p in (r, gap)][:-1], axis=1)
    half = (rows[0].shape[2] + 4) // 2  # the model's views start after the truth's and the gap
    header = label_strip(body.shape[2], [(0, "truth"), (half, "model")])
    return np.concatenate([np.broadcast_to(header, (length, *header.shape)), body], axis=1)


def write_video(frames: np.ndarray, path: str | os.PathLike[str], fps: float) -> None:
    """GIF (or MP4 by suffix) of (T, H, W, 3) uint8 frames."""
    import imageio.v3 as iio

    if Path(path).suffix == ".gif":
        atomic.write_file(path, lambda tmp: iio.imwrite(tmp, frames, duration=1000 / fps, loop=0))
        return
    h, w = frames.shape[1:3]  # H.264 wants even sizes: pad a white row/column where needed
    even = np.pad(frames, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)), constant_values=255)
    atomic.write_file(path, lambda tmp: iio.imwrite(tmp, even, fps=fps, codec="libx264", plugin="pyav"))


def write_filmstrip(snapshots: np.ndarray, path: str | os.PathLike[str]) -> None:
    """PNG of snapshot frames (K, V, H, W, 3) side by side (first camera)."""
    from PIL import Image

    strip = Image.fromarray(_tile(_upscale(snapshots[:, 0])))
    atomic.write_file(path, strip.save)


def _cell(stats: dict[str, Stat] | None, who: str, digits: int) -> str:
    if stats is None or who not in stats:
        return "-"
    s = stats[who]
    return f"{s.mean:.{digits}f} ± {s.std:.{digits}f}"


def fidelity_table(report: FidelityReport) -> Table:
    table = Table(title=f"fidelity: {len(report.episodes)} episodes from frame {report.start} "
                  "(mean ± std over episodes)")
    columns = [("PSNR model", "psnr", "model", 2), ("PSNR repeat", "psnr", "baseline", 2),
               ("SSIM model", "ssim", "model", 3), ("SSIM repeat", "ssim", "baseline", 3)]
    if report.horizons[0].object_iou is not None:
        columns += [("IoU model", "object_iou", "model", 3), ("IoU repeat", "object_iou", "baseline", 3),
                    ("shape model", "shape_score", "model", 3), ("shape truth", "shape_score", "truth", 3)]
    for name in ["h", "n"] + [c[0] for c in columns]:
        table.add_column(name, justify="right")
    for h in report.horizons:
        cells = [str(h.horizon), str(len(h.episodes))]
        cells += [_cell(getattr(h, metric), who, d) for _, metric, who, d in columns]
        table.add_row(*cells)
    return table


def extra_table(report: FidelityReport) -> Table | None:
    """Per-camera PSNR/SSIM and the task's own metrics (FidelityReport's `extra`), when any."""
    names = list(dict.fromkeys(k for h in report.horizons for k in (h.extra or {})))
    if not names:
        return None
    table = Table(title="per camera and task metrics (mean ± std over episodes; reference in brackets)")
    for name in ["h", *names]:
        table.add_column(escape(name), justify="right")  # 'psnr[top]' is not rich markup
    for h in report.horizons:
        cells = [str(h.horizon)]
        for name in names:
            stats = (h.extra or {}).get(name, {})
            model = stats.get("model")
            reference = next((s for who, s in stats.items() if who != "model"), None)
            digits = 2 if name.startswith("psnr") else 3
            cell = "" if model is None else f"{model.mean:.{digits}f} ± {model.std:.{digits}f}"
            if reference is not None:
                cell += f" [{reference.mean:.{digits}f}]"
            cells.append(cell)
        table.add_row(*cells)
    return table


def stability_table(report: StabilityReport) -> Table:
    table = Table(title=f"stability: {report.steps} steps from {report.init} "
                  f"(all finite: {report.all_finite})")
    for name in ("series", "mean", "min", "max", "first 10%", "last 10%"):
        table.add_column(name, justify="right" if name != "series" else "left")
    for key, s in report.summary.items():
        table.add_row(key, *(f"{v:.3f}" for v in (s.mean, s.min, s.max, s.first, s.last)))
    return table
