"""OUT/preview.gif: the job's first episodes side by side, so a person sees what was made
before training on it (a T that warps or dissolves shows at a glance).

A grid of up to PREVIEW_EPISODES committed episodes (by index, whether or not the filter kept
them), each tile labelled with its index and score, every camera of an episode side by side.
Frames are subsampled to at most PREVIEW_FRAMES per episode and the GIF plays at the episodes'
own rate; a header names the step shown. Episodes are read from their committed stores, so the
preview works the same on a local and an s3:// output.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import numpy as np

from pipeline.generate.outputs import PREVIEW_FILE
from schemas import EpisodeRecord, FeatureSpec
from sim_model import storage
from sim_model.data.store import EpisodeStore
from workers.writer import stored_uri

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


def _read_tile(out: str, record: EpisodeRecord, cameras: Sequence[str], steps: range) -> np.ndarray:
    """(len(steps), H, V*W, 3): the episode's cameras side by side; past its end, its last frame."""
    data = EpisodeStore.open(stored_uri(out, record), "r").window(0, 0, record.length, keys=cameras)
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


def render_preview(out: str, records: Sequence[EpisodeRecord], features: FeatureSpec,
                   title: str) -> bytes:
    """The GIF's bytes for the first PREVIEW_EPISODES of `records` (committed under OUT)."""
    from PIL import Image

    shown = sorted(records, key=lambda r: r.index)[:PREVIEW_EPISODES]
    steps = preview_steps(max(r.length for r in shown))
    cameras = list(features.camera_names)
    tiles = [_read_tile(out, r, cameras, steps) for r in shown]
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


def write_preview(out: str, records: Sequence[EpisodeRecord], features: FeatureSpec,
                  title: str) -> str:
    """Write OUT/preview.gif; returns its URI."""
    uri = storage.join(out, PREVIEW_FILE)
    storage.write_atomic(uri, render_preview(out, records, features, title))
    return uri
