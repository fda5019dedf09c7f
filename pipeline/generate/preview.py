"""OUT/preview.gif: the job's first episodes side by side, so a person sees what was made
before training on it (a T that warps or dissolves shows at a glance).

A grid of the first PREVIEW_EPISODES episodes of the job's dataset (those the filter kept), each
tile labelled with its index and score, every camera of an episode side by side. Frames are
subsampled to at most PREVIEW_FRAMES per episode and the GIF plays at the episodes' own rate; a
header names the step shown. Episodes are read from the dataset's shards
(sim_model/data/shards.py), so the preview works the same on a local and an s3:// output.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import numpy as np

from pipeline.generate.outputs import PREVIEW_FILE
from sim_model import storage
from sim_model.data.shards import ShardedDataset

PREVIEW_EPISODES = 8
PREVIEW_COLUMNS = 4
PREVIEW_FRAMES = 50  # per episode at most: 8 episodes at 96x96 make a GIF of about 1 MB
MIN_TILE_PX = 192  # small cameras are scaled up by a whole factor to about this height
LABEL_PX = 12
PALETTE_COLORS = 128
GAP_PX = 4
WHITE = 255


def preview_steps(length: int) -> range:
    """The steps shown for episodes of up to `length` steps: every k-th, at most PREVIEW_FRAMES."""
    return range(0, length, math.ceil(length / PREVIEW_FRAMES))


def _label(width: int, text: str) -> np.ndarray:
    """(LABEL_PX, width, 3) white strip with black text."""
    from PIL import Image, ImageDraw

    strip = Image.new("RGB", (width, LABEL_PX), (WHITE,) * 3)
    ImageDraw.Draw(strip).text((2, 0), text, fill=(0, 0, 0))
    return np.asarray(strip)


def _read_tile(dataset: ShardedDataset, i: int, cameras: Sequence[str], steps: range) -> np.ndarray:
    """(len(steps), H, V*W, 3): episode i's cameras side by side; past its end, its last frame."""
    first, last = dataset.episode_range(i)
    data = dataset.window(i, 0, last - first, keys=cameras)
    views = np.concatenate([data[c] for c in cameras], axis=2)  # (T, H, V*W, 3)
    return views[np.minimum(np.asarray(steps), len(views) - 1)]


def _grid(tiles: list[np.ndarray], labels: list[str]) -> np.ndarray:
    """(S, H', W', 3): labelled, upscaled tiles in rows of PREVIEW_COLUMNS, white gaps."""
    scale = max(1, MIN_TILE_PX // tiles[0].shape[1])
    tiles = [t.repeat(scale, axis=1).repeat(scale, axis=2) for t in tiles]
    steps, h, w, _ = tiles[0].shape
    cells = [np.concatenate([np.broadcast_to(_label(w, text), (steps, LABEL_PX, w, 3)), tile], axis=1)
             for tile, text in zip(tiles, labels, strict=True)]
    cells += [np.full_like(cells[0], WHITE)] * (-len(cells) % PREVIEW_COLUMNS)  # fill the last row
    rows = [_join(cells[i:i + PREVIEW_COLUMNS], axis=2) for i in range(0, len(cells), PREVIEW_COLUMNS)]
    return _join(rows, axis=1)


def _join(parts: list[np.ndarray], axis: int) -> np.ndarray:
    """Concatenate (S, H, W, 3) arrays along H (axis 1) or W (axis 2) with GAP_PX white between."""
    shape = list(parts[0].shape)
    shape[axis] = GAP_PX
    gap = np.full(shape, WHITE, np.uint8)
    return np.concatenate([p for part in parts for p in (part, gap)][:-1], axis=axis)


def render_preview(dataset: ShardedDataset, title: str) -> bytes:
    """The GIF's bytes for the first PREVIEW_EPISODES episodes of `dataset` (at least one)."""
    from PIL import Image

    shown = dataset.rows[:PREVIEW_EPISODES]
    features = dataset.features
    steps = preview_steps(max(r.length for r in shown))
    cameras = list(features.camera_names)
    tiles = [_read_tile(dataset, i, cameras, steps) for i in range(len(shown))]
    labels = [f"#{r.index}" + ("" if r.score is None else f"  score {r.score:.2f}") for r in shown]
    body = _grid(tiles, labels)
    width = body.shape[2]
    # The header changes every frame, which also keeps PIL from merging identical frames.
    frames = [np.concatenate([_label(width, f"{title}  step {t}"), frame])
              for t, frame in zip(steps, body, strict=True)]
    # One palette for the whole GIF and no dithering: PIL's default per-frame dithering turns
    # flat backgrounds into noise that GIF's compression cannot shrink (3x the bytes here).
    sample = Image.fromarray(np.concatenate(frames[::max(1, len(frames) // 5)], axis=0))
    palette = sample.quantize(PALETTE_COLORS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    images = [Image.fromarray(f).quantize(palette=palette, dither=Image.Dither.NONE) for f in frames]
    buffer = io.BytesIO()
    images[0].save(buffer, format="GIF", save_all=True, append_images=images[1:], loop=0,
                   duration=round(1000 * steps.step / features.fps))
    return buffer.getvalue()


def write_preview(out: str, dataset_uri: str, title: str) -> str | None:
    """Write OUT/preview.gif of the dataset at `dataset_uri`; returns its URI (None, and no
    preview, when the dataset holds no episode)."""
    dataset = ShardedDataset(dataset_uri)
    uri = storage.join(out, PREVIEW_FILE)
    if not len(dataset):
        storage.remove_file(uri)  # an earlier run's preview would show episodes no longer there
        return None
    storage.write_atomic(uri, render_preview(dataset, title))
    return uri
