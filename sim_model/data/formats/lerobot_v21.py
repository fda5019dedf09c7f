"""Write any iws-readable dataset as a LeRobot v2.1 dataset, the layout openpi (pi0, pi0.5) and
GR00T N1.x fine-tune from (reading v2.1: lerobot_convert.py).

lerobot 0.4.4 writes only v3.0 and converts only v2.1 -> v3.0, so the v2.1 files are written
here, as lerobot 0.3.x (the last v2.1 release) lays them out:

    meta/info.json                 codebase_version "v2.1", chunks_size, data_path and
                                   video_path templates, features (each video's encoding info)
    meta/episodes.jsonl            {"episode_index", "tasks": [text], "length"} per episode
    meta/tasks.jsonl               {"task_index", "task"} per distinct task text
    meta/episodes_stats.jsonl      {"episode_index", "stats": {feature: min/max/mean/std/count}}
    meta/stats.json                the whole dataset's, with quantiles (GR00T reads q01/q99)
    meta/openpi/norm_stats.json    openpi's normalisation statistics of state and actions
    meta/modality.json             with `groot=True`: GR00T's state / action / video / annotation
                                   groups (groot.py)
    data/chunk-CCC/episode_EEEEEE.parquet          one per episode, CCC = episode // chunks_size
    videos/chunk-CCC/<key>/episode_EEEEEE.mp4      one per episode and camera

Parquet columns are the features (observation.state, action, extras) plus timestamp,
frame_index, episode_index, index (over the dataset) and task_index, typed as lerobot types
them (`get_hf_features_from_features`). Videos are H.264 by default: the readers these datasets
go to do not all decode AV1. Statistics are exact (stats.py; images per channel in [0, 1]).
Episodes stream one at a time, so memory is bounded by one episode; `workers` processes write
contiguous slices of episodes in parallel (every file is an episode's own, so nothing is
merged), and the dataset appears at its destination only when complete and checked.
"""

from __future__ import annotations

import json
import logging
import math
import multiprocessing
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from schemas import FeatureSpec, SpecError
from sim_model import storage
from sim_model.data.formats.dataset import check_apart, open_dataset
from sim_model.data.formats.groot import NORM_STATS_FILE, openpi_norm_stats, write_modality
from sim_model.data.formats.lerobot_features import camera_key_map, key_map, to_lerobot_features
from sim_model.data.formats.source import EpisodeSource
from sim_model.data.formats.stats import (
    Stats,
    array_stats,
    image_histogram,
    image_stats,
    to_jsonable,
)
from sim_model.storage import atomic

log = logging.getLogger(__name__)
V21 = "v2.1"
CHUNKS_SIZE = 1000
DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
VIDEO_PATH = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
V21_VCODECS = ("h264", "hevc", "libsvtav1")
STAT_KEYS = ("min", "max", "mean", "std", "count")  # what v2.1's episodes_stats holds
DEFAULT_FEATURES = {  # lerobot's columns of every dataset
    "timestamp": {"dtype": "float32", "shape": (1,), "names": None},
    "frame_index": {"dtype": "int64", "shape": (1,), "names": None},
    "episode_index": {"dtype": "int64", "shape": (1,), "names": None},
    "index": {"dtype": "int64", "shape": (1,), "names": None},
    "task_index": {"dtype": "int64", "shape": (1,), "names": None},
}


@dataclass(frozen=True)
class _Plan:
    """What every writer needs to know: the same for all of them."""

    features: dict[str, dict[str, Any]]  # LeRobot features (no video info yet)
    mapping: dict[str, str]  # iws key -> LeRobot key
    cameras: tuple[str, ...]
    fps: int
    vcodec: str
    task_index: tuple[int, ...]  # per episode


@dataclass
class _Written:
    """One episode as written: what the metadata needs (its numeric columns, a few kB, and each
    camera's pixel histogram, so that the whole dataset's statistics come out exact)."""

    episode: int
    length: int
    columns: dict[str, np.ndarray]
    histograms: dict[str, np.ndarray]

    def stats(self) -> dict[str, Stats]:
        """Its statistics as v2.1's episodes_stats holds them."""
        stats = {key: array_stats(value) for key, value in self.columns.items()}
        stats.update({key: image_stats(h, self.length) for key, h in self.histograms.items()})
        return {key: {k: v[k] for k in STAT_KEYS} for key, v in stats.items()}


def export_lerobot_v21(src: str | os.PathLike[str] | EpisodeSource, dest: str | os.PathLike[str], *,
                       task: str | None = None, vcodec: str = "h264", workers: int = 1,
                       overwrite: bool = False, camera_keys: dict[str, str] | None = None,
                       groot: bool = False, embodiment: str = "new_embodiment",
                       robot_type: str | None = None,
                       on_episode: Callable[[int], None] | None = None) -> Path | str:
    """Write `src` as a LeRobot v2.1 dataset at `dest` (a directory or s3:// prefix); returns it.

    task: the text of episodes whose metadata has none. camera_keys: as for the v3.0 export.
    groot: also write meta/modality.json for GR00T (its `embodiment` tag named in
    meta/info.json's robot_type unless `robot_type` is given). on_episode(frames) per episode.
    """
    from sim_model.data.formats.lerobot_writer import check_exportable, episode_tasks

    if not isinstance(src, EpisodeSource):
        check_apart(src, dest)
    source = src if isinstance(src, EpisodeSource) else open_dataset(src)
    if vcodec not in V21_VCODECS:
        raise SpecError(f"--vcodec {vcodec!r} is not supported for v2.1; use one of {list(V21_VCODECS)}.")
    if workers < 1:
        raise SpecError(f"--workers must be at least 1, got {workers}.")
    if storage.is_remote(os.fspath(dest)):
        return storage.build_and_publish(os.fspath(dest), overwrite=overwrite, write=lambda local: export_lerobot_v21(
            source, local, task=task, vcodec=vcodec, workers=workers, camera_keys=camera_keys,
            groot=groot, embodiment=embodiment, robot_type=robot_type, on_episode=on_episode))
    dest = Path(dest).expanduser().absolute()
    fps = check_exportable(source.features, vcodec, f"iws/{dest.name}")
    camera_key_map(source.features, camera_keys)  # a bad key fails here, before any writing
    tasks = episode_tasks(source, task)
    if dest.exists() and not overwrite:
        raise SpecError(f"{dest} already exists; choose a new destination or pass --overwrite.")
    texts = list(dict.fromkeys(tasks))
    index = {text: k for k, text in enumerate(texts)}
    plan = _Plan(features={**_flat(to_lerobot_features(source.features, camera_keys)), **DEFAULT_FEATURES},
                 mapping=key_map(source.features, camera_keys), cameras=source.features.camera_names,
                 fps=fps, vcodec=vcodec, task_index=tuple(index[t] for t in tasks))
    work = dest.parent / f".{dest.name}.partial-{uuid.uuid4().hex[:8]}"
    work.mkdir(parents=True)
    try:
        written = _write_episodes(source, plan, work, workers, on_episode)
        _write_meta(work, source.features, plan, written, texts, tasks,
                    robot_type or (embodiment if groot else None))
        if groot:
            write_modality(work, source.features, plan.mapping)
        atomic.move_dir_into_place(work, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("exported %d episodes (%d frames) as LeRobot v2.1 to %s", len(source), source.n_frames, dest)
    return dest


def _flat(features: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Numeric features of two or more dimensions per step (sweep's (80, 2) particles) stored
    as one flat list, their shape kept as `iws_shape`: lerobot's v2.1 -> v3.0 converter joins the
    episodes' parquet files through pandas, which fails on `datasets`' Array2D columns."""
    out = {}
    for key, ft in features.items():
        shape = tuple(ft["shape"])
        if ft["dtype"] not in ("video", "image") and len(shape) > 1:
            ft = {**ft, "shape": (math.prod(shape),), "names": None, "iws_shape": list(shape)}
        out[key] = ft
    return out


def _write_episodes(source: EpisodeSource, plan: _Plan, root: Path, workers: int,
                    on_episode: Callable[[int], None] | None) -> list[_Written]:
    from sim_model.data.formats.lerobot_writer import contiguous_slices

    slices = contiguous_slices(len(source), workers)
    if len(slices) <= 1:
        return [_write_episode(source, i, plan, root, on_episode) for i in range(len(source))]
    # spawn, not fork: the parent may hold torch/ray threads that a fork would copy mid-state.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(len(slices), mp_context=context) as pool:
        futures = [pool.submit(_write_slice, source, episodes, plan, root) for episodes in slices]
        written = []
        for future in futures:
            part = future.result()
            written += part
            if on_episode is not None:
                for w in part:
                    on_episode(w.length)
    return written


def _write_slice(source: EpisodeSource, episodes: range, plan: _Plan, root: Path) -> list[_Written]:
    from sim_model.data.formats.lerobot_writer import quiet_encoders

    quiet_encoders()
    return [_write_episode(source, i, plan, root, None) for i in episodes]


def _write_episode(source: EpisodeSource, i: int, plan: _Plan, root: Path,
                   on_episode: Callable[[int], None] | None) -> _Written:
    """Episode i's parquet file and videos, and its statistics."""
    episode = source.episode(i)
    arrays = episode.arrays()
    length = len(arrays["action"])
    first = int(source.episode_ends[i - 1]) if i else 0
    columns: dict[str, np.ndarray] = {}
    for key, value in arrays.items():
        if key in plan.cameras:
            continue
        columns[plan.mapping[key]] = np.asarray(value).reshape(length, -1)  # (T, width)
    columns["timestamp"] = (np.arange(length) / plan.fps).astype(np.float32).reshape(length, 1)
    columns["frame_index"] = np.arange(length, dtype=np.int64).reshape(length, 1)
    columns["episode_index"] = np.full((length, 1), i, dtype=np.int64)
    columns["index"] = np.arange(first, first + length, dtype=np.int64).reshape(length, 1)
    columns["task_index"] = np.full((length, 1), plan.task_index[i], dtype=np.int64)
    _write_parquet(root / data_file(i), columns, plan.features)
    histograms = {}
    for camera in plan.cameras:
        frames = episode.frames[camera]
        key = plan.mapping[camera]
        encode_video(frames, root / video_file(i, key), plan.fps, plan.vcodec)
        histograms[key] = image_histogram(frames)
    if on_episode is not None:
        on_episode(length)
    return _Written(episode=i, length=length, columns=columns, histograms=histograms)


def data_file(episode: int) -> str:
    return DATA_PATH.format(episode_chunk=episode // CHUNKS_SIZE, episode_index=episode)


def video_file(episode: int, key: str) -> str:
    return VIDEO_PATH.format(episode_chunk=episode // CHUNKS_SIZE, video_key=key, episode_index=episode)


def _write_parquet(path: Path, columns: dict[str, np.ndarray], features: dict[str, dict[str, Any]]) -> None:
    """One episode's rows, typed as lerobot types the features (1-D: fixed-length lists)."""
    import datasets
    from lerobot.datasets.utils import get_hf_features_from_features

    numeric = {k: ft for k, ft in features.items() if ft["dtype"] not in ("video", "image")}
    # lerobot stores a feature of shape (1,) as a scalar column, wider ones as fixed-size lists
    table = {key: columns[key].reshape(-1) if tuple(ft["shape"]) == (1,) else columns[key]
             for key, ft in numeric.items()}
    dataset = datasets.Dataset.from_dict(table, features=get_hf_features_from_features(numeric))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(dataset.data.table, path)  # the schema carries the features as `datasets` reads them


def encode_video(frames: np.ndarray, path: Path, fps: int, vcodec: str) -> None:
    """uint8 frames (T, H, W, 3) as an MP4 with lerobot's encoder settings (yuv420p, GOP 2,
    CRF 30), straight from the arrays."""
    import av

    from sim_model.data.formats.lerobot_writer import quiet_encoders

    quiet_encoders()
    path.parent.mkdir(parents=True, exist_ok=True)
    options = {"g": "2", "crf": "30"}
    if vcodec == "libsvtav1":
        options["preset"] = "12"
    with av.open(str(path), "w") as container:
        stream = container.add_stream(vcodec, fps, options=options)
        stream.pix_fmt = "yuv420p"
        stream.height, stream.width = int(frames.shape[1]), int(frames.shape[2])
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")))
        container.mux(stream.encode())


def _write_meta(root: Path, spec: FeatureSpec, plan: _Plan, written: list[_Written],
                texts: Sequence[str], tasks: Sequence[str], robot_type: str | None) -> None:
    from lerobot.datasets.video_utils import get_video_info

    written = sorted(written, key=lambda w: w.episode)
    n, frames = len(written), sum(w.length for w in written)
    features = {key: {**ft, "shape": list(ft["shape"])} for key, ft in plan.features.items()}
    for camera in plan.cameras:
        key = plan.mapping[camera]
        features[key]["info"] = get_video_info(root / video_file(0, key))
    info = {
        "codebase_version": V21, "robot_type": robot_type, "total_episodes": n,
        "total_frames": frames, "total_tasks": len(texts), "total_videos": n * len(plan.cameras),
        "total_chunks": math.ceil(n / CHUNKS_SIZE), "chunks_size": CHUNKS_SIZE, "fps": plan.fps,
        "splits": {"train": f"0:{n}"}, "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if plan.cameras else None, "features": features,
    }
    meta = root / "meta"
    meta.mkdir(parents=True, exist_ok=True)
    _jsonl(meta / "tasks.jsonl", ({"task_index": k, "task": t} for k, t in enumerate(texts)))
    _jsonl(meta / "episodes.jsonl", ({"episode_index": w.episode, "tasks": [tasks[w.episode]],
                                      "length": w.length} for w in written))
    _jsonl(meta / "episodes_stats.jsonl", ({"episode_index": w.episode,
                                            "stats": to_jsonable(w.stats())} for w in written))
    total = _dataset_stats(written)
    (meta / "stats.json").write_text(json.dumps(to_jsonable(total), indent=2))
    norm_stats = meta.parent / NORM_STATS_FILE
    norm_stats.parent.mkdir(parents=True, exist_ok=True)
    norm_stats.write_text(json.dumps(openpi_norm_stats(total, spec.state_dim > 0), indent=2))
    (meta / "info.json").write_text(json.dumps(info, indent=4))
    log.debug("v2.1 metadata of %d episodes written (%s)", n, spec.camera_names)


def _dataset_stats(written: list[_Written]) -> dict[str, Stats]:
    """Exact statistics of the whole dataset (quantiles too: GR00T reads q01/q99 from
    meta/stats.json, openpi from norm_stats.json): numeric columns pooled, histograms summed."""
    stats = {key: array_stats(np.concatenate([w.columns[key] for w in written]))
             for key in written[0].columns}
    for key in written[0].histograms:
        stats[key] = image_stats(sum(w.histograms[key] for w in written), sum(w.length for w in written))
    return stats


def _jsonl(path: Path, rows: Any) -> None:
    with path.open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
