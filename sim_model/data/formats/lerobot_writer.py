"""Export an iws dataset (or any `open_dataset` source) to a LeRobot v3.0 dataset.

Written through lerobot's own API (`LeRobotDataset.create` / `add_frame` / `save_episode` /
`finalize`), so the files are lerobot's; then checked and corrected where lerobot 0.4.4 is
wrong (lerobot_repair.py: image std, merged index stats, video timestamp offsets).

Writers. One writer per dataset root is the only safe pattern in lerobot. `workers=1` writes a
single root; `workers=N` splits the episodes into N contiguous slices, writes each slice's root
in its own process and merges them with `lerobot.datasets.aggregate.aggregate_datasets`.
Measured in benchmarks/results/export.md: on the 2-core development machine one writer already
keeps both cores busy (the AV1 encoder has its own threads) and two writers were 6x slower in
wall time (each spawned worker first imports torch + lerobot), so one writer is the default;
more workers are for machines with cores to spare and datasets large enough to amortise that.
A dataset with a feature of two or more dimensions per step is written by one writer
whatever `workers` says (`mergeable_writers`): lerobot 0.4.4's merge fails on it.

Video frames go to lerobot's streaming encoder with an unbounded queue: no PNG round trip, and
none of the frame drops its bounded queue causes when frames arrive faster than real time
(the repair step verifies the frame count of every video anyway).
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import os
import shutil
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from schemas import FeatureSpec, SpecError
from sim_model import storage
from sim_model.data.formats.dataset import check_apart, open_dataset
from sim_model.data.formats.lerobot_features import camera_key_map, key_map, to_lerobot_features
from sim_model.data.formats.lerobot_repair import EpisodeSummary, repair_and_verify
from sim_model.data.formats.source import EpisodeSource
from sim_model.data.formats.stats import image_histogram
from sim_model.storage import atomic

log = logging.getLogger(__name__)
VCODECS = ("libsvtav1", "h264", "hevc", "auto")
# SVT-AV1 dies with SIGFPE (no Python error) on frames below ~26 px; yuv420p needs even sizes.
SVTAV1_MIN_SIDE = 32


def export_lerobot(src: str | os.PathLike[str] | EpisodeSource, dest: str | os.PathLike[str], *,
                   repo_id: str | None = None, task: str | None = None, vcodec: str = "libsvtav1",
                   workers: int = 1, overwrite: bool = False,
                   camera_keys: dict[str, str] | None = None,
                   on_episode: Callable[[int], None] | None = None) -> Path | str:
    """Write `src` as a LeRobot v3.0 dataset at `dest` (a directory or s3:// prefix); returns `dest`.

    repo_id: the dataset's id (`LeRobotDataset(repo_id, root=dest)`); default `iws/<dest name>`.
    task: task text for episodes whose metadata has none. on_episode(frames) runs per episode.
    camera_keys: camera -> LeRobot key where not `observation.images.<camera>`, e.g.
    {"top": "observation.image"} for lerobot-eval's pusht environment (lerobot_features.py).
    The dataset appears at `dest` only when complete and verified.
    """
    if not isinstance(src, EpisodeSource):
        check_apart(src, dest)
    source = src if isinstance(src, EpisodeSource) else open_dataset(src)
    if storage.is_remote(os.fspath(dest)):
        return storage.build_and_publish(os.fspath(dest), overwrite=overwrite, write=lambda local: export_lerobot(
            source, local, repo_id=repo_id, task=task, vcodec=vcodec, workers=workers,
            camera_keys=camera_keys, on_episode=on_episode))
    dest = Path(dest).expanduser().absolute()
    repo_id = repo_id or f"iws/{dest.name}"
    fps = check_exportable(source.features, vcodec, repo_id)
    camera_key_map(source.features, camera_keys)  # a bad key fails here, before any writing
    tasks = episode_tasks(source, task)
    if dest.exists() and not overwrite:
        raise SpecError(f"{dest} already exists; choose a new destination or pass --overwrite.")
    work = dest.parent / f".{dest.name}.partial-{uuid.uuid4().hex[:8]}"
    work.mkdir(parents=True)
    try:
        root = work / "dataset"
        slices = contiguous_slices(len(source), mergeable_writers(source.features, workers))
        if len(slices) == 1:
            summaries = write_slice(source, slices[0], root, repo_id=repo_id, tasks=tasks,
                                    vcodec=vcodec, camera_keys=camera_keys, on_episode=on_episode)
        else:
            summaries = _write_parallel(source, slices, work, root, repo_id, tasks, vcodec,
                                        on_episode, camera_keys)
        repair_and_verify(root, summaries, fps)
        # Also gives lerobot's videos (made through 0600 temporary files) the umask's modes.
        atomic.move_dir_into_place(root, dest)
        _forget_open_videos()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("exported %d episodes (%d frames) to %s", len(source), source.n_frames, dest)
    return dest


def quiet_encoders() -> None:
    """Keep FFmpeg's and SVT-AV1's per-video chatter off the terminal (a progress bar, or on a
    replica the driver's console, to which Ray forwards it): lerobot hands FFmpeg logging back
    to FFmpeg's own printer after each video."""
    import av

    os.environ.setdefault("SVT_LOG", "1")  # read by SVT-AV1 when an encoder starts
    av.logging.set_level(av.logging.ERROR)
    av.logging.set_libav_level(av.logging.ERROR)  # FFmpeg's own printer, once lerobot restores it
    logging.getLogger("libav").setLevel(logging.ERROR)


def check_exportable(features: FeatureSpec, vcodec: str, repo_id: str) -> int:
    """The integer fps LeRobot needs, or SpecError naming what cannot be exported."""
    if vcodec not in VCODECS:
        raise SpecError(f"--vcodec {vcodec!r} is not supported; use one of {list(VCODECS)}.")
    if not repo_id.strip() or any(c.isspace() for c in repo_id):
        raise SpecError(f"repo id {repo_id!r} must be a non-empty name without spaces, "
                        "e.g. 'iws/pusht_generated'.")
    if features.fps != round(features.fps):
        raise SpecError(f"LeRobot stores an integer fps; this dataset runs at {features.fps}.")
    for cam in features.cameras:
        if cam.height % 2 or cam.width % 2:
            raise SpecError(f"camera '{cam.name}' is {cam.height}x{cam.width}; video encoding "
                            "(yuv420p) needs even sizes. Crop or resize the frames first.")
        if vcodec == "libsvtav1" and min(cam.height, cam.width) < SVTAV1_MIN_SIDE:
            raise SpecError(f"camera '{cam.name}' is {cam.height}x{cam.width}; the AV1 encoder "
                            f"needs at least {SVTAV1_MIN_SIDE} px a side. Use --vcodec h264.")
    return int(round(features.fps))


def episode_tasks(source: EpisodeSource, fallback: str | None) -> list[str]:
    """Each episode's task text: its metadata's, else `fallback`; SpecError if neither."""
    tasks = [source.meta(i).task or (fallback or "") for i in range(len(source))]
    missing = [i for i, t in enumerate(tasks) if not t]
    if missing:
        raise SpecError(f"episodes {missing[:5]}{'...' if len(missing) > 5 else ''} have no task "
                        "text, which LeRobot requires; pass --task 'Push the T onto the target'.")
    if not tasks:
        raise SpecError("the source dataset has no episodes; there is nothing to export.")
    return tasks


def write_slice(source: EpisodeSource, episodes: Sequence[int], root: Path, *, repo_id: str,
                tasks: Sequence[str], vcodec: str, camera_keys: dict[str, str] | None = None,
                on_episode: Callable[[int], None] | None = None) -> list[EpisodeSummary]:
    """One lerobot writer: episodes `episodes` of `source` into a new dataset at `root`."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    spec = source.features
    mapping = key_map(spec, camera_keys)  # iws key -> LeRobot key
    cameras = set(spec.camera_names)
    dataset = LeRobotDataset.create(
        repo_id, fps=int(round(spec.fps)), features=to_lerobot_features(spec, camera_keys), root=root,
        vcodec=vcodec, streaming_encoding=True, encoder_queue_maxsize=0)  # 0: unbounded queue
    summaries = []
    try:
        with _fast_quiet_writer():
            for i in episodes:
                episode = source.episode(i)
                _write_episode(dataset, episode.arrays(), mapping, tasks[i])
                summaries.append(EpisodeSummary(len(episode), {
                    mapping[c]: image_histogram(episode.frames[c]) for c in cameras}))
                if on_episode is not None:
                    on_episode(len(episode))
    finally:
        dataset.finalize()
    return summaries


def _write_episode(dataset: Any, arrays: dict[str, np.ndarray], mapping: dict[str, str],
                   task: str) -> None:
    per_step = {mapping[k]: _per_step(v) for k, v in arrays.items()}
    for t in range(len(arrays["action"])):
        frame: dict[str, Any] = {key: value[t] for key, value in per_step.items()}
        frame["task"] = task
        dataset.add_frame(frame)
    dataset.save_episode()


@contextlib.contextmanager
def _fast_quiet_writer() -> Iterator[None]:
    """Silence lerobot's per-episode progress bars and bool-stats warnings, and skip its
    `embed_images` pass.

    That pass maps every row through `datasets` one at a time (~4-5 ms a frame here, over half
    of the export time) to embed image bytes; the exported features are videos, not images, so
    it has nothing to embed and returns the table unchanged. Restored on exit.
    """
    from lerobot.datasets import lerobot_dataset
    from lerobot.utils.utils import SuppressProgressBars

    original = lerobot_dataset.embed_images
    lerobot_dataset.embed_images = lambda dataset: dataset
    try:
        with SuppressProgressBars(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Converting input from bool")
            yield
    finally:
        lerobot_dataset.embed_images = original


def _per_step(value: np.ndarray) -> np.ndarray:
    """Scalars per step (T,) become (T, 1): LeRobot features are at least 1-D."""
    return value.reshape(len(value), 1) if value.ndim == 1 else value


def mergeable_writers(features: FeatureSpec, workers: int) -> int:
    """`workers`, or one writer where lerobot 0.4.4 cannot merge the slices: its
    `aggregate_datasets` round-trips the data files through pandas, which fails (ArrowTypeError)
    on a feature of two or more dimensions per step, e.g. the sweep task's (80, 2) disc centres.
    One writer makes the same dataset, only without the parallel speed-up."""
    multi = [extra.name for extra in features.extras if len(extra.shape) > 1]
    if workers > 1 and multi:
        log.warning("writing with one writer instead of %d: lerobot's aggregation cannot merge "
                    "slices with multi-dimensional features (%s)", workers, ", ".join(multi))
        return 1
    return workers


def contiguous_slices(n: int, workers: int) -> list[range]:
    """Episodes 0..n split into at most `workers` contiguous, non-empty ranges."""
    if workers < 1:
        raise SpecError(f"workers={workers}; use 1 (one writer) or more.")
    count = min(workers, n)  # aggregate_datasets breaks on a slice without episodes
    size = math.ceil(n / count)
    return [range(s, min(s + size, n)) for s in range(0, n, size)]


def _forget_open_videos() -> None:
    """Drop lerobot's process-wide torchcodec decoder cache. It is keyed by file path, so a
    LeRobotDataset opened in this process after re-exporting to the same path would otherwise
    decode the replaced video through the old file's still-open handle."""
    from lerobot.datasets import video_utils

    video_utils._default_decoder_cache.clear()


# -- parallel writers ------------------------------------------------------------------------

_progress_queue: Any = None


def _init_worker(queue: Any) -> None:
    global _progress_queue
    _progress_queue = queue
    logging.basicConfig(level=logging.WARNING)


def _slice_job(source: EpisodeSource, episodes: range, root: Path, repo_id: str,
               tasks: Sequence[str], vcodec: str,
               camera_keys: dict[str, str] | None) -> list[EpisodeSummary]:
    return write_slice(source, episodes, root, repo_id=repo_id, tasks=tasks, vcodec=vcodec,
                       camera_keys=camera_keys, on_episode=_progress_queue.put if _progress_queue is not None else None)


def _write_parallel(source: EpisodeSource, slices: list[range], work: Path, root: Path,
                    repo_id: str, tasks: Sequence[str], vcodec: str,
                    on_episode: Callable[[int], None] | None,
                    camera_keys: dict[str, str] | None = None) -> list[EpisodeSummary]:
    from lerobot.datasets.aggregate import aggregate_datasets

    # spawn, not fork: the parent may hold torch/ray threads that a fork would copy mid-state.
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    roots = [work / f"slice-{k:03d}" for k in range(len(slices))]
    ids = [f"{repo_id}-slice{k:03d}" for k in range(len(slices))]
    with ProcessPoolExecutor(len(slices), mp_context=context, initializer=_init_worker,
                             initargs=(queue,)) as pool:
        futures = [pool.submit(_slice_job, source, piece, piece_root, piece_id, tasks, vcodec,
                               camera_keys)
                   for piece, piece_root, piece_id in zip(slices, roots, ids, strict=True)]
        _drain(queue, futures, on_episode)
        summaries = [s for future in futures for s in future.result()]
    aggregate_datasets(ids, repo_id, roots=roots, aggr_root=root)
    return summaries


def _drain(queue: Any, futures: list[Any], on_episode: Callable[[int], None] | None) -> None:
    """Forward workers' per-episode progress until every worker is done."""
    import queue as queue_module

    while True:
        try:
            frames = queue.get(timeout=0.2)
        except queue_module.Empty:
            if all(f.done() for f in futures):
                break
            continue
        if on_episode is not None:
            on_episode(frames)
