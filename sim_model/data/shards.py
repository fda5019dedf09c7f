"""A dataset in shards: several episode stores read as one, through a Parquet index.

    <root>/shards/<key:08d>.zarr   a packed EpisodeStore each (its arrays, one object each, in zarr
                                   format 3: store_layout.create_packed_arrays), so that a shard is
                                   13 objects however many episodes it holds; DP's own zarr-2
                                   layout is one `iws export zarr-dp` away
    <root>/index.parquet           one row per episode of the job, in index order (written last:
                                   the dataset's commit; shards it does not name are not part of it)

A generation job's replicas write the shards, one per group of episodes, in parallel; the driver
writes only the index (pipeline/generate/consolidate.py), so assembling a dataset never reads or
copies a frame and adding shards rewrites nothing but the index. `ShardedDataset` has the read
API of an EpisodeStore (EpisodeSource), so the exporters (`iws export zarr-dp` makes one DP store
from the shards, streaming), `iws import`, initial frames and replays read it unchanged.

Index columns: episode_id, index (the episode's index in its job), in_dataset (whether the job's
filter let it into the dataset), shard (key) and offset (its position in the shard; -1 for
episodes not in the dataset), length, seed, source, score, success, checksum, node_id (the Ray
node that made it). The dataset is the rows with in_dataset, in order; the other rows keep the
job's record of what it made and left out (a generation job's manifest points here instead of
listing its episodes). The Parquet schema's metadata holds the features (`iws_features`,
FeatureSpec JSON).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from schemas import EpisodeMeta, FeatureSpec, SpecError
from sim_model import storage
from sim_model.data.reader import EpisodeReader

if TYPE_CHECKING:
    from sim_model.data.episode import Episode
    from sim_model.data.store import EpisodeStore

SHARDS_DIR = "shards"
INDEX_FILE = "index.parquet"
FEATURES_KEY = b"iws_features"


def shard_name(key: int) -> str:
    return f"{key:08d}.zarr"


def shard_uri(root: str, key: int) -> str:
    return storage.join(root, SHARDS_DIR, shard_name(key))


def index_uri(root: str) -> str:
    return storage.join(root, INDEX_FILE)


def is_sharded(uri: str) -> bool:
    return storage.is_file(index_uri(uri))


def write_shard(root: str, key: int, episodes: Sequence[Episode], features: FeatureSpec) -> dict[str, int]:
    """Write shard `key` holding `episodes`, packed (built in staging, then published whole: a
    reader or a crash never sees half a shard; an existing shard of that key is replaced).
    Returns the size of each of its files, by path relative to the shard: what a resume checks
    it against."""
    from sim_model.data.store import EpisodeStore

    target = shard_uri(root, key)
    staged = storage.staging_dir(target)
    try:
        EpisodeStore.write_packed(staged, features, list(episodes))
        sizes = storage.file_sizes(staged)  # a local directory, also for an s3:// target
    except BaseException:
        storage.discard_staged(staged)
        raise
    storage.publish_dir(staged, target, replace=True)
    return sizes


@dataclass(frozen=True)
class IndexRow:
    """One episode of a sharded dataset."""

    episode_id: str
    index: int
    in_dataset: bool
    shard: int  # -1 when not in_dataset
    offset: int
    length: int
    seed: int
    source: str
    score: float | None
    success: bool | None
    checksum: str
    node_id: str | None = None
    plausibility: float | None = None  # the task's plausibility check, when one ran
    plausible: bool | None = None  # plausibility at least filter.plausibility.min (None: no check)


def write_index(root: str, rows: Sequence[IndexRow], features: FeatureSpec) -> str:
    """Write the index (atomically): the dataset is now exactly the `rows` in_dataset, in order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: dict[str, Any] = {name: [getattr(r, name) for r in rows] for name in IndexRow.__dataclass_fields__}
    schema = pa.schema([("episode_id", pa.string()), ("index", pa.int64()), ("in_dataset", pa.bool_()),
                        ("shard", pa.int64()), ("offset", pa.int64()), ("length", pa.int64()),
                        ("seed", pa.int64()), ("source", pa.string()), ("score", pa.float64()),
                        ("success", pa.bool_()), ("checksum", pa.string()), ("node_id", pa.string()),
                        ("plausibility", pa.float64()), ("plausible", pa.bool_())],
                       metadata={FEATURES_KEY: features.model_dump_json().encode()})
    table = pa.Table.from_pydict(columns, schema=schema)
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    uri = index_uri(root)
    storage.write_atomic(uri, buffer.getvalue())
    return uri


def read_index(root: str) -> tuple[list[IndexRow], FeatureSpec]:
    """Every row of the index (in_dataset or not) and the features; SpecError if it is missing or
    cannot be read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    uri = index_uri(root)
    data = storage.try_read_bytes(uri)
    if data is None:
        raise SpecError(f"{root} has no {INDEX_FILE}, so it is not a finished sharded dataset; "
                        "rerun the job that writes it to assemble it.")
    try:
        table = pq.read_table(io.BytesIO(data))
        features = FeatureSpec.model_validate_json(table.schema.metadata[FEATURES_KEY])
    except (pa.ArrowException, KeyError, TypeError, ValueError) as error:
        raise SpecError(f"{uri} is damaged ({error}); rerun the job that wrote it: its assembly "
                        "rewrites the index from the shards' records.") from None
    rows = [IndexRow(**row) for row in table.to_pylist()]
    return rows, features


class ShardedDataset(EpisodeReader):
    """The episodes of a sharded dataset (its index's rows in_dataset, in order), read lazily
    shard by shard.

    With `verify`, the first read of each episode reads all of it and checks it against the
    checksum it was committed with (the index's), SpecError naming it if it differs: a bit
    flip that still decodes is not served. Whole-episode reads (`episode`, the exporters) cost
    only the hashing then; `load_all`, the trainer's bulk read, does not check."""

    def __init__(self, root: str | os.PathLike[str], *, verify: bool = False) -> None:
        self.path = os.fspath(root)
        rows, self._features = read_index(self.path)
        self._rows = [r for r in rows if r.in_dataset]
        self._ends = np.cumsum([r.length for r in self._rows], dtype=np.int64)
        self._stores: dict[int, EpisodeStore] = {}
        self.verify = verify
        self._verified: set[int] = set()

    def _shard(self, key: int) -> EpisodeStore:
        store = self._stores.get(key)
        if store is None:
            from sim_model.data.store import EpisodeStore

            store = self._stores[key] = EpisodeStore.open(shard_uri(self.path, key), "r")
        return store

    def _locate(self, i: int) -> tuple[EpisodeStore, int]:
        row = self._rows[i]
        store = self._shard(row.shard)
        if row.offset >= len(store):
            raise SpecError(f"{self.path}: shard {row.shard} holds {len(store)} episodes, the index "
                            f"names episode {row.offset} of it ({row.episode_id}); rerun the job "
                            "that wrote the dataset to make the shard again.")
        return store, row.offset

    @property
    def rows(self) -> list[IndexRow]:
        return list(self._rows)

    def meta(self, i: int) -> EpisodeMeta:
        store, offset = self._locate(i)
        return store.meta(offset)

    def _read(self, i: int, start: int, stop: int, keys: list[str]) -> dict[str, np.ndarray]:
        store, offset = self._locate(i)
        if not self.verify or i in self._verified:
            return store.window(offset, start, stop, keys)
        whole = store.window(offset, 0, self._rows[i].length, list(self.keys))
        self._check(i, whole)
        return {key: whole[key][start:stop] for key in keys}

    def _check(self, i: int, arrays: dict[str, np.ndarray]) -> None:
        from sim_model.data.episode import arrays_checksum

        row = self._rows[i]
        if arrays_checksum(arrays) != row.checksum:
            raise SpecError(f"{shard_uri(self.path, row.shard)}: episode {row.episode_id} (episode {row.offset} "
                            f"of shard {row.shard}) differs from the data it was committed with (checksum "
                            f"{row.checksum[:12]}): the shard is damaged. `iws verify OUT --repair` on the "
                            "job's output makes it again.")
        self._verified.add(i)

    def load_all(self, keys: Iterable[str] | None = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Whole concatenated arrays in memory, shard after shard (the trainer's fast path, as
        EpisodeStore.load_all), and episode_ends."""
        picked = self._pick(keys)
        parts: dict[str, list[np.ndarray]] = {key: [] for key in picked}
        for key, count in _runs([r.shard for r in self._rows]):
            store = self._shard(key)
            if len(store) != count:
                raise SpecError(f"{self.path}: shard {key} holds {len(store)} episodes, the index names "
                                f"{count}; rerun the job that wrote the dataset to make the shard again.")
            arrays, _ = store.load_all(picked)
            for name in picked:
                parts[name].append(arrays[name])
        if not self._rows:
            return {k: np.zeros((0,)) for k in picked}, self._ends.copy()
        return {k: np.concatenate(v) for k, v in parts.items()}, self._ends.copy()

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "verify": self.verify}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], verify=state.get("verify", False))  # type: ignore[misc]


def _runs(keys: Sequence[int]) -> list[tuple[int, int]]:
    """(key, count) of each run of equal consecutive keys."""
    runs: list[tuple[int, int]] = []
    for key in keys:
        if runs and runs[-1][0] == key:
            runs[-1] = (key, runs[-1][1] + 1)
        else:
            runs.append((key, 1))
    return runs
