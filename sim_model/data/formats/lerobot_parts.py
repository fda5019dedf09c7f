"""LeRobot v3.0 datasets written in parts by many writers at once, assembled without copying frames.

lerobot allows one writer per dataset root (docs: REFERENCE.md). Here each writer (a generation
replica) writes a *part*, a few episodes, through lerobot's own API into a local temporary
dataset (`lerobot_writer.write_slice`), checks and repairs it there (`lerobot_repair`), then
puts its data file and its videos straight at their place in the final dataset and keeps its
own metadata beside it:

    DEST/data/chunk-CCC/file-FFF.parquet          part k's rows        (CCC, FFF = divmod(k, 1000))
    DEST/videos/<key>/chunk-CCC/file-FFF.mp4      part k's video of each camera
    PARTS/<k:08d>/episodes.parquet, info.json     part k's own LeRobot metadata
    PARTS/<k:08d>/placed.json                     where the last assembly put it (see below)

Parts are ordered by their key k (the generation job uses the index of a group's first episode).
`assemble` then makes DEST one dataset that `LeRobotDataset` opens, writing metadata only:
meta/episodes/ (every part's episode rows with global episode indices, frame ranges and file
indices), meta/tasks.parquet, meta/stats.json (merged from the per-episode statistics:
stats.merge_stats) and meta/info.json, last. Videos are never read or copied again.

What a part cannot know when it is written is where its episodes land among all the others
(that depends on every part before it), and lerobot's data rows carry it: `episode_index`,
`index` and `task_index`. Assembly rewrites those columns of a part's data file (actions and
states, a few kB an episode, never video), and only where they changed: it records where it
put each part (placed.json, removed first whenever the part is written again), so parts added
after the last one move nothing and assembling again reads and rewrites no existing data file.
Assembly must be the only writer of DEST and PARTS while it runs (the job holds its lease).
"""

from __future__ import annotations

import io
import json
import logging
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from schemas import EpisodeMeta, FeatureSpec, SpecError
from sim_model import storage
from sim_model.data.episode import Episode
from sim_model.data.formats.lerobot_reader import column_numpy
from sim_model.data.formats.stats import QUANTILES, merge_stats, to_jsonable

log = logging.getLogger(__name__)

CHUNKS_SIZE = 1000  # files per chunk directory, lerobot's default
META_ROWS = 10_000  # episode rows per assembled meta/episodes file
PLACED = "placed.json"


def location(key: int) -> tuple[int, int]:
    """(chunk, file) index of part `key`'s data file and videos."""
    if key < 0:
        raise ValueError(f"part keys are non-negative, got {key}")
    return divmod(key, CHUNKS_SIZE)


def part_dir(parts: str, key: int) -> str:
    return storage.join(parts, f"{key:08d}")


def data_uri(dest: str, key: int) -> str:
    chunk, file = location(key)
    return storage.join(dest, "data", f"chunk-{chunk:03d}", f"file-{file:03d}.parquet")


def video_uri(dest: str, video_key: str, key: int) -> str:
    chunk, file = location(key)
    return storage.join(dest, "videos", video_key, f"chunk-{chunk:03d}", f"file-{file:03d}.mp4")


class _Episodes:
    """In-memory episodes as an EpisodeSource (what lerobot_writer.write_slice reads)."""

    def __init__(self, episodes: Sequence[Episode], features: FeatureSpec) -> None:
        self.episodes, self.features = list(episodes), features

    @property
    def episode_ends(self) -> np.ndarray:
        return np.cumsum([len(e) for e in self.episodes]).astype(np.int64)

    @property
    def n_frames(self) -> int:
        return int(sum(len(e) for e in self.episodes))

    def __len__(self) -> int:
        return len(self.episodes)

    def meta(self, i: int) -> EpisodeMeta:
        return self.episodes[i].meta

    def window(self, i: int, start: int, stop: int, keys: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        arrays = self.episodes[i].arrays()
        return {k: v[start:stop] for k, v in arrays.items() if keys is None or k in set(keys)}

    def episode(self, i: int) -> Episode:
        return self.episodes[i]

    def __iter__(self) -> Iterator[Episode]:
        return iter(self.episodes)


def write_part(episodes: Sequence[Episode], features: FeatureSpec, dest: str, parts: str, key: int, *,
               tasks: Sequence[str], camera_keys: dict[str, str] | None = None,
               vcodec: str = "libsvtav1") -> dict[str, int]:
    """Write `episodes` (at least one; `tasks`: the task text of each) as part `key` of the
    dataset at `dest` (a directory or s3:// prefix), its metadata under `parts`. Rewriting a
    part replaces its files; nothing else of `dest` is touched. Returns the size of each file
    that stays as written, by URI: its videos and its metadata (not its data file, which
    `assemble` rewrites)."""
    from sim_model.data.formats.lerobot_repair import repair_and_verify
    from sim_model.data.formats.lerobot_writer import check_exportable, quiet_encoders, write_slice

    if not episodes:
        raise ValueError("a part holds at least one episode")
    fps = check_exportable(features, vcodec, "iws/part")
    quiet_encoders()
    work = Path(tempfile.mkdtemp(prefix="iws-lerobot-part-"))
    try:
        root = work / "part"
        summaries = write_slice(_Episodes(episodes, features), range(len(episodes)), root,
                                repo_id="iws/part", tasks=tasks, vcodec=vcodec, camera_keys=camera_keys)
        repair_and_verify(root, summaries, fps)
        info = json.loads((root / "meta" / "info.json").read_text())
        data = _only(root, "data/*/*.parquet")
        videos = {k: _only(root, f"videos/{k}/*/*.mp4") for k, ft in info["features"].items()
                  if ft["dtype"] == "video"}
        meta = _only(root, "meta/episodes/*/*.parquet")
        directory = part_dir(parts, key)
        # No longer where an assembly put it; then the frames, then what assembly reads.
        storage.remove_file(storage.join(directory, PLACED))
        frames = {video_uri(dest, video_key, key): path.read_bytes() for video_key, path in videos.items()}
        own = {storage.join(directory, "info.json"): json.dumps(info, indent=1).encode(),
               storage.join(directory, "episodes.parquet"): meta.read_bytes()}
        for uri, payload in (*frames.items(), (data_uri(dest, key), data.read_bytes()), *own.items()):
            storage.write_atomic(uri, payload)
        return {uri: len(payload) for uri, payload in {**frames, **own}.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _only(root: Path, pattern: str) -> Path:
    found = sorted(root.glob(pattern))
    if len(found) != 1:
        raise SpecError(f"a LeRobot part wrote {len(found)} files matching {pattern}, expected one: "
                        "the part is larger than lerobot's file size limits; use smaller groups "
                        "(batch_size) for LeRobot output.")
    return found[0]


@dataclass
class Assembled:
    """What `assemble` did: the dataset's totals and how many data files it had to rewrite."""

    episodes: int
    frames: int
    parts: int
    rewritten: int
    removed: list[str] = field(default_factory=list)


@dataclass
class _Part:
    key: int
    episodes: pa.Table
    placed: dict[str, Any] | None  # where the last assembly put it, if it did


def assemble(dest: str, parts: str, keys: Sequence[int]) -> Assembled:
    """Make `dest` one LeRobot dataset of parts `keys` (each written by `write_part`), in key
    order; see the module docstring. Files under dest/data, dest/videos and dest/meta/episodes
    that belong to no part of `keys` are removed (left by parts no longer wanted)."""
    ordered = sorted(set(keys))
    if not ordered:
        raise SpecError("there are no episodes to assemble into a LeRobot dataset.")
    loaded = _load(parts, ordered)
    info_uri = storage.join(part_dir(parts, ordered[0]), "info.json")
    try:
        info = json.loads(_read(info_uri))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SpecError(f"{info_uri} is damaged ({error}): a LeRobot part's metadata. Rerun the job "
                        "(`iws verify OUT --repair`) to write the part again.") from None
    names = [n for n in loaded[0].episodes.column_names if not n.startswith("stats/")]
    for part in loaded[1:]:
        if part.episodes.schema != loaded[0].episodes.schema:
            raise SpecError(f"LeRobot part {part.key} has other features than part {loaded[0].key} "
                            f"({names}...); parts of one dataset must come from one job.")
    tasks: dict[str, int] = {}
    for part in loaded:
        for row in part.episodes.column("tasks").to_pylist():
            tasks.setdefault(row[0], len(tasks))
    tables, rewritten, episode0, frame0 = [], 0, 0, 0
    for part in loaded:
        table, episode_tasks = _place(part, episode0, frame0, tasks)
        placed = {"episode0": episode0, "frame0": frame0, "tasks": episode_tasks.tolist()}
        if part.placed != placed:
            rewritten += _rewrite_data(dest, part.key, episode0, frame0, episode_tasks)
            storage.write_atomic(storage.join(part_dir(parts, part.key), PLACED), json.dumps(placed))
        tables.append(table)
        episode0 += table.num_rows
        frame0 += int(table.column("length").to_numpy().sum())
    episodes = pa.concat_tables(tables)
    removed = _remove_strays(dest, ordered, info, episode0)
    _write_meta(dest, episodes, tasks, info, episode0, frame0)
    log.info("assembled %d LeRobot parts (%d episodes, %d frames) at %s; %d data files rewritten",
             len(loaded), episode0, frame0, dest, rewritten)
    return Assembled(episodes=episode0, frames=frame0, parts=len(loaded), rewritten=rewritten,
                     removed=removed)


def _read(uri: str) -> bytes:
    data = storage.try_read_bytes(uri)
    if data is None:
        raise SpecError(f"{uri} is missing: a LeRobot part is incomplete. Rerun the job to write it again.")
    return data


def _load(parts: str, keys: list[int]) -> list[_Part]:
    """Each part's episode rows and placement (two small reads a part, in parallel on S3)."""
    from concurrent.futures import ThreadPoolExecutor

    directories = [part_dir(parts, k) for k in keys]
    placed = storage.read_many([storage.join(d, PLACED) for d in directories])
    uris = [storage.join(d, "episodes.parquet") for d in directories]
    with ThreadPoolExecutor(16 if storage.is_remote(parts) else 1) as pool:
        tables = list(pool.map(lambda uri: pq.read_table(io.BytesIO(_read(uri))), uris))
    return [_Part(key, table, _placement(text)) for key, table, text in zip(keys, tables, placed, strict=True)]


def _placement(text: str | None) -> dict[str, Any] | None:
    """A part's placed.json; None (placed again: its data file is rewritten if it must be) when
    it is missing or damaged."""
    try:
        found = None if text is None else json.loads(text)
    except json.JSONDecodeError:
        return None
    return found if isinstance(found, dict) else None


def _set(table: pa.Table, name: str, values: Any) -> pa.Table:
    if name not in table.column_names:
        return table
    column = pa.array(values, type=table.schema.field(name).type)
    return table.set_column(table.column_names.index(name), name, column)


def _place(part: _Part, episode0: int, frame0: int, tasks: dict[str, int]
           ) -> tuple[pa.Table, np.ndarray]:
    """The part's episode rows at their global place; and each episode's global task_index."""
    table = part.episodes
    n = table.num_rows
    lengths = table.column("length").to_numpy().astype(np.int64)
    stops = frame0 + np.cumsum(lengths)
    starts = stops - lengths
    chunk, file = location(part.key)
    episode_tasks = np.array([tasks[row[0]] for row in table.column("tasks").to_pylist()], dtype=np.int64)
    table = _set(table, "episode_index", np.arange(episode0, episode0 + n))
    table = _set(table, "dataset_from_index", starts)
    table = _set(table, "dataset_to_index", stops)
    for name in table.column_names:
        if name.endswith("/chunk_index") and not name.startswith("meta/"):
            table = _set(table, name, np.full(n, chunk))
        elif name.endswith("/file_index") and not name.startswith("meta/"):
            table = _set(table, name, np.full(n, file))
    # Per-episode statistics of the position columns, exactly, from their ranges.
    table = _set_stats(table, "index", _range_stats(starts, lengths))
    table = _set_stats(table, "episode_index", _constant_stats(np.arange(episode0, episode0 + n), lengths))
    table = _set_stats(table, "task_index", _constant_stats(episode_tasks, lengths))
    return table, episode_tasks


def _range_stats(starts: np.ndarray, lengths: np.ndarray) -> dict[str, np.ndarray]:
    """Stats of each range(start, start + length), as array_stats computes them."""
    last = starts + lengths - 1
    stats = {"min": starts, "max": last, "mean": (starts + last) / 2,
             "std": np.sqrt((lengths.astype(np.float64) ** 2 - 1) / 12), "count": lengths}
    for key, q in QUANTILES.items():
        stats[key] = starts + q * (lengths - 1)
    return stats


def _constant_stats(values: np.ndarray, lengths: np.ndarray) -> dict[str, np.ndarray]:
    stats = {"min": values, "max": values, "mean": values.astype(np.float64),
             "std": np.zeros(len(values)), "count": lengths}
    for key in QUANTILES:
        stats[key] = values.astype(np.float64)
    return stats


def _set_stats(table: pa.Table, feature: str, stats: dict[str, np.ndarray]) -> pa.Table:
    for stat, values in stats.items():
        table = _set(table, f"stats/{feature}/{stat}", [[v] for v in np.asarray(values).tolist()])
    return table


def _rewrite_data(dest: str, key: int, episode0: int, frame0: int, episode_tasks: np.ndarray) -> int:
    """Give part `key`'s data rows their global episode_index, index and task_index (each row
    the task of its episode); 1 if the file had to be rewritten, 0 if it already had them."""
    uri = data_uri(dest, key)
    table = pq.read_table(io.BytesIO(_read(uri)))
    local_episode = np.cumsum(column_numpy(table.column("frame_index")).reshape(-1) == 0) - 1
    wanted = {"episode_index": episode0 + local_episode, "index": frame0 + np.arange(table.num_rows),
              "task_index": episode_tasks[local_episode]}
    if all(np.array_equal(column_numpy(table.column(n)).reshape(-1), v) for n, v in wanted.items()):
        return 0
    for name, values in wanted.items():
        table = _set(table, name, values)
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="snappy")
    storage.write_atomic(uri, sink.getvalue())
    return 1


def _stacked_stats(episodes: pa.Table) -> dict[str, dict[str, np.ndarray]]:
    stats: dict[str, dict[str, np.ndarray]] = {}
    for name in episodes.column_names:
        if name.startswith("stats/"):
            _, feature, stat = name.split("/", 2)
            stats.setdefault(feature, {})[stat] = column_numpy(episodes.column(name))
    return stats


def _write_meta(dest: str, episodes: pa.Table, tasks: dict[str, int], info: dict[str, Any],
                total_episodes: int, total_frames: int) -> None:
    import pandas as pd

    n = episodes.num_rows
    files = np.arange(n) // META_ROWS
    episodes = _set(episodes, "meta/episodes/chunk_index", files // CHUNKS_SIZE)
    episodes = _set(episodes, "meta/episodes/file_index", files % CHUNKS_SIZE)
    for number, start in enumerate(range(0, n, META_ROWS)):
        sink = io.BytesIO()
        pq.write_table(episodes.slice(start, META_ROWS), sink, compression="snappy")
        chunk, file = divmod(number, CHUNKS_SIZE)
        storage.write_atomic(storage.join(dest, "meta", "episodes", f"chunk-{chunk:03d}",
                                          f"file-{file:03d}.parquet"), sink.getvalue())
    frame = pd.DataFrame({"task_index": list(tasks.values())}, index=pd.Index(list(tasks), name=None))
    sink = io.BytesIO()
    frame.to_parquet(sink)
    storage.write_atomic(storage.join(dest, "meta", "tasks.parquet"), sink.getvalue())
    totals = {feature: merge_stats(stacked) for feature, stacked in _stacked_stats(episodes).items()}
    storage.write_atomic(storage.join(dest, "meta", "stats.json"), json.dumps(to_jsonable(totals), indent=4))
    merged = {**info, "total_episodes": total_episodes, "total_frames": total_frames,
              "total_tasks": len(tasks), "splits": {"train": f"0:{total_episodes}"}}
    storage.write_atomic(storage.join(dest, "meta", "info.json"), json.dumps(merged, indent=4))


def _remove_strays(dest: str, keys: list[int], info: dict[str, Any], total_episodes: int) -> list[str]:
    """Data files, videos and meta/episodes files of `dest` that the assembled dataset does not
    name: lerobot reads every data file it finds, so a stray one would corrupt the dataset."""
    wanted = {data_uri(dest, k) for k in keys}
    for video_key in (k for k, ft in info["features"].items() if ft["dtype"] == "video"):
        wanted |= {video_uri(dest, video_key, k) for k in keys}
    meta_files = -(-total_episodes // META_ROWS)
    wanted |= {storage.join(dest, "meta", "episodes", f"chunk-{c:03d}", f"file-{f:03d}.parquet")
               for c, f in (divmod(i, CHUNKS_SIZE) for i in range(meta_files))}
    found = [uri for top in ("data", "videos", storage.join("meta", "episodes"))
             for uri in storage.list_files(storage.join(dest, top))]
    removed = [uri for uri in found if uri not in wanted]
    for uri in removed:
        log.warning("removing %s: it belongs to no part of the assembled dataset", uri)
        storage.remove_file(uri)
    return removed
