"""Check a freshly written LeRobot v3.0 dataset against its source and fix what lerobot gets wrong.

Checked (raises ExportCheckError on any mismatch, never ships a wrong dataset):
  - info.json totals; per-episode lengths and `dataset_from_index`/`dataset_to_index` ranges;
  - the data columns `index` (0..N-1), `episode_index`, `frame_index`, and `timestamp`, which
    must equal float32(frame_index / fps) exactly;
  - every video holds exactly the frames of its episodes (no drops), at 1/fps spacing.
Rewritten (atomically, through sim_model.storage.atomic.write_file):
  - each episode's `videos/<key>/from_timestamp`/`to_timestamp`, taken from the packet
    timestamps of the video itself (aggregation derives them from container durations,
    which drift);
  - meta/stats.json and every per-episode `stats/...` column, recomputed exactly (stats.py):
    lerobot 0.4.4's image std is ~0 (uint8 overflow) and a merge keeps the slices' index stats.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sim_model.data.formats.lerobot_reader import column_numpy
from sim_model.data.formats.stats import Stats, array_stats, image_stats, to_jsonable
from sim_model.storage import atomic

log = logging.getLogger(__name__)
PTS_TOLERANCE_S = 1e-5  # well inside lerobot's 1e-4 s decode tolerance


@dataclass
class EpisodeSummary:
    """What the repair step needs to know about one exported episode, taken from the source."""

    length: int
    histograms: dict[str, np.ndarray]  # LeRobot camera key -> (3, 256) pixel counts


class ExportCheckError(RuntimeError):
    """The written dataset disagrees with its source; the export is not published."""


def repair_and_verify(root: Path, summaries: list[EpisodeSummary], fps: int) -> None:
    info = json.loads((root / "meta/info.json").read_text())
    lengths = np.array([s.length for s in summaries], dtype=np.int64)
    _expect(info["total_episodes"] == len(lengths) and info["total_frames"] == lengths.sum(),
            f"info.json counts {info['total_episodes']} episodes / {info['total_frames']} frames, "
            f"the source {len(lengths)} / {lengths.sum()}")
    episode_files = sorted(root.glob("meta/episodes/*/*.parquet"))
    tables = [pq.read_table(f) for f in episode_files]
    episodes = pa.concat_tables(tables).to_pandas()
    ends = np.cumsum(lengths)
    _expect(np.array_equal(episodes["episode_index"], np.arange(len(lengths))),
            "episode metadata is not in episode order 0..E-1")
    _expect(np.array_equal(episodes["length"], lengths), "episode lengths differ from the source")
    _expect(np.array_equal(episodes["dataset_from_index"], ends - lengths)
            and np.array_equal(episodes["dataset_to_index"], ends),
            "dataset_from_index/dataset_to_index are not the cumulative episode ranges")

    features = info["features"]
    numeric = [k for k, ft in features.items() if ft["dtype"] not in ("video", "image", "string")]
    columns = _data_columns(root, numeric)
    _check_columns(columns, lengths, fps)

    for key in (k for k, ft in features.items() if ft["dtype"] == "video"):
        _fix_video_timestamps(root, info["video_path"], key, episodes, fps)

    per_episode, total = _stats(features, columns, summaries, ends)
    _rewrite_episode_tables(episode_files, tables, episodes, per_episode)
    _write_json_atomic(root / "meta/stats.json", to_jsonable(total))


def _expect(condition: Any, message: str) -> None:
    if not condition:
        raise ExportCheckError(f"LeRobot export check failed: {message}")


def _data_columns(root: Path, keys: list[str]) -> dict[str, np.ndarray]:
    parts: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for path in sorted(root.glob("data/*/*.parquet")):
        table = pq.read_table(path, columns=keys)
        for key in keys:
            parts[key].append(column_numpy(table.column(key)))
    columns = {k: np.concatenate(v) for k, v in parts.items()}
    order = np.argsort(columns["index"], kind="stable")
    return {k: v[order] for k, v in columns.items()}


def _check_columns(columns: dict[str, np.ndarray], lengths: np.ndarray, fps: int) -> None:
    n = int(lengths.sum())
    frame_index = np.concatenate([np.arange(length) for length in lengths])
    _expect(np.array_equal(columns["index"], np.arange(n)), "global 'index' is not 0..N-1")
    _expect(np.array_equal(columns["episode_index"], np.repeat(np.arange(len(lengths)), lengths)),
            "'episode_index' does not follow the episode ranges")
    _expect(np.array_equal(columns["frame_index"], frame_index), "'frame_index' is not 0..T-1")
    # lerobot computes frame_index / fps in float64 and stores float32
    expected = (frame_index / fps).astype(np.float32)
    _expect(np.array_equal(columns["timestamp"].astype(np.float32), expected),
            "'timestamp' differs from frame_index / fps")


def _packet_times(path: Path) -> np.ndarray:
    """Presentation times (s) of every frame in a video, from its packets (no decoding)."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        base = stream.time_base or Fraction(1, 1)
        pts = sorted(p.pts for p in container.demux(stream) if p.pts is not None and p.size)
    return np.array([float(Fraction(p) * base) for p in pts], dtype=np.float64)


def _fix_video_timestamps(root: Path, template: str, key: str, episodes: Any, fps: int) -> None:
    chunk, file = f"videos/{key}/chunk_index", f"videos/{key}/file_index"
    start_col, stop_col = f"videos/{key}/from_timestamp", f"videos/{key}/to_timestamp"
    for (c, f), group in episodes.groupby([chunk, file], sort=True):
        path = root / template.format(video_key=key, chunk_index=c, file_index=f)
        times = _packet_times(path)
        group = group.sort_values("episode_index")
        _expect(len(times) == group["length"].sum(),
                f"{path.name} of {key} holds {len(times)} frames, its episodes "
                f"{group['length'].sum()} (frames were dropped)")
        offset = 0
        for row, length in zip(group.index, group["length"], strict=True):
            own = times[offset:offset + length]
            spacing = own - own[0] - np.arange(length) / fps
            _expect(np.abs(spacing).max() < PTS_TOLERANCE_S,
                    f"frames of episode {episodes.at[row, 'episode_index']} in {path.name} are not "
                    f"1/{fps} s apart")
            if abs(episodes.at[row, start_col] - own[0]) > PTS_TOLERANCE_S:
                log.warning("corrected %s of episode %d: %.6f -> %.6f s", start_col,
                            episodes.at[row, "episode_index"], episodes.at[row, start_col], own[0])
            episodes.at[row, start_col] = own[0]
            episodes.at[row, stop_col] = own[0] + length / fps
            offset += length


def _stats(features: dict[str, Any], columns: dict[str, np.ndarray],
           summaries: list[EpisodeSummary], ends: np.ndarray
           ) -> tuple[list[dict[str, Stats]], dict[str, Stats]]:
    """Exact per-episode and whole-dataset stats for every non-string feature."""
    starts = ends - np.array([s.length for s in summaries])
    per_episode: list[dict[str, Stats]] = []
    for summary, start, stop in zip(summaries, starts, ends, strict=True):
        stats = {k: array_stats(v[start:stop]) for k, v in columns.items()}
        stats.update({k: image_stats(h, summary.length) for k, h in summary.histograms.items()})
        per_episode.append(stats)
    total = {k: array_stats(v) for k, v in columns.items()}
    for key in summaries[0].histograms:
        hist = np.sum([s.histograms[key] for s in summaries], axis=0)
        total[key] = image_stats(hist, int(ends[-1]))
    missing = {k for k, ft in features.items() if ft["dtype"] != "string"} - set(total)
    _expect(not missing, f"no statistics for features {sorted(missing)}")
    return per_episode, total


def _rewrite_episode_tables(files: list[Path], tables: list[pa.Table], episodes: Any,
                            per_episode: list[dict[str, Stats]]) -> None:
    row = 0
    for path, table in zip(files, tables, strict=True):
        rows = range(row, row + table.num_rows)
        for name in table.column_names:
            if name.startswith("videos/") and name.endswith("_timestamp"):
                values = episodes[name].to_numpy()[row:row + table.num_rows].tolist()
            elif name.startswith("stats/"):
                _, feature, stat = name.split("/", 2)
                values = [np.asarray(per_episode[r][feature][stat]).tolist() for r in rows]
            else:
                continue
            column = pa.array(values, type=table.schema.field(name).type)
            table = table.set_column(table.column_names.index(name), name, column)
        atomic.write_file(path, partial(pq.write_table, table, compression="snappy"))
        row += table.num_rows


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    atomic.write_text(path, json.dumps(data, indent=4))
