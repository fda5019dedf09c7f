"""Training frames read from the store as batches need them, through a cache of bounded size.

`TrainingData.from_store(path, cache_mb=M)` uses this instead of loading every frame: a rank
holds at most M MiB of frames (blocks of BLOCK consecutive frames of one episode, least recently
used dropped first) whatever the dataset's size, and reads what a batch misses from the local
or s3:// store, several blocks at once. Indexing works like the in-memory tensor it replaces:
`frames[idx]` with an integer tensor of any shape gives uint8 (*idx.shape, V, H, W, 3).

`prefetch(idx)` starts reading the blocks of frames a coming batch will draw, on background
threads, and returns at once (they are held apart from the cache until drawn, so memory is the
cache plus two batches): the stages call it with the next step's indices (drawn from a copy
of the RNG the next step starts from, `TrainRNG.next_numpy`) so that the reads overlap the
current step's compute. A block being read is waited for, never read twice; what a prefetch
reads changes nothing but timing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial

import numpy as np
import torch

from sim_model.data.reader import EpisodeReader

BLOCK = 8  # frames per cached block: the store's image chunk, so a block read is ~one chunk
READERS = 8  # blocks read at once (S3 latency, zarr decompression outside the GIL)


class StreamedFrames:
    """(N, V, H, W, 3) uint8 over the episodes of `store`, cameras `cameras`, stacked on V."""

    def __init__(self, store: EpisodeReader, cameras: list[str], cache_bytes: int) -> None:
        self.store, self.cameras = store, cameras
        self.ends = np.asarray(store.episode_ends, dtype=np.int64)
        self.starts = np.concatenate([[0], self.ends[:-1]]).astype(np.int64)
        cams = {c.name: c for c in store.features.cameras}
        first = cams[cameras[0]]
        self.shape = (int(self.ends[-1]) if len(self.ends) else 0, len(cameras), first.height, first.width, 3)
        self.frame_bytes = int(np.prod(self.shape[1:]))
        self.capacity = max(1, cache_bytes // (BLOCK * self.frame_bytes))  # blocks
        self._cache: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._pending: dict[tuple[int, int], Future[np.ndarray]] = {}
        # prefetched and not yet drawn, by prefetch generation; and those on their way there
        self._staged: dict[tuple[int, int], tuple[int, np.ndarray]] = {}
        self._prefetching: dict[tuple[int, int], int] = {}
        self._generation = 0
        self._lock = threading.RLock()  # a done-callback may run in the thread that holds it
        self._pool: ThreadPoolExecutor | None = None
        self.reads = 0  # blocks read from the store (prefetched or not), for benchmarks and tests
        self.misses = 0  # blocks a batch found neither cached nor on their way (it waited for them)

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def cached_bytes(self) -> int:
        """Bytes held: the cache (at most its budget) and staged prefetches (two batches)."""
        with self._lock:
            return (sum(block.nbytes for block in self._cache.values())
                    + sum(block.nbytes for _, block in self._staged.values()))

    def _keys(self, index: torch.Tensor | np.ndarray) -> tuple[tuple[int, ...], np.ndarray,
                                                               list[tuple[int, int]]]:
        """The index's shape, each frame's offset in its episode, and its (episode, block)."""
        idx = index.numpy() if isinstance(index, torch.Tensor) else np.asarray(index)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        flat = idx.reshape(-1).astype(np.int64)
        if len(flat) and (flat.min() < 0 or flat.max() >= len(self)):
            raise IndexError(f"frame index out of range 0..{len(self) - 1}")
        episode = np.searchsorted(self.ends, flat, side="right")
        offset = flat - self.starts[episode]
        return idx.shape, offset, list(zip(episode.tolist(), (offset // BLOCK).tolist(), strict=True))

    def __getitem__(self, index: torch.Tensor | np.ndarray) -> torch.Tensor:
        shape, offset, keys = self._keys(index)
        blocks = self._blocks(set(keys))
        out = np.empty((len(keys), *self.shape[1:]), np.uint8)
        for row, (key, off) in enumerate(zip(keys, offset.tolist(), strict=True)):
            out[row] = blocks[key][off - key[1] * BLOCK]
        return torch.from_numpy(out.reshape(*shape, *self.shape[1:]))

    def prefetch(self, index: torch.Tensor | np.ndarray) -> None:
        """Start reading the blocks `index` needs that are not held or on their way. They are
        staged apart from the LRU cache until a batch takes them, so a small cache cannot drop
        them first (blocks already cached are staged too). Staged blocks of the prefetch before
        the previous one that no batch took join the cache: the previous prefetch's may still
        be waiting for the batch being drawn (a stage prefetches the next step before it reads
        its own frames)."""
        with self._lock:
            self._generation += 1
            generation = self._generation
            for key in [k for k, (g, _) in self._staged.items() if g < generation - 1]:
                self._keep(key, self._staged.pop(key)[1])
            coming = {key for key in set(self._keys(index)[2]) if self._stage(key, generation)}
            self._prefetching.update({key: generation for key in coming})
            self._start(coming)

    def _stage(self, key: tuple[int, int], generation: int) -> bool:
        """Mark block `key` as wanted by prefetch `generation` (caller holds the lock); True
        when it is neither held nor on its way, so it must be read."""
        if key in self._staged:  # the batch before wants it too: now both do
            self._staged[key] = (generation, self._staged[key][1])
        elif key in self._cache:  # staged, so the cache cannot drop it before its batch
            self._staged[key] = (generation, self._cache.pop(key))
        elif key in self._pending:
            if key in self._prefetching:
                self._prefetching[key] = generation
        else:
            return True
        return False

    def _start(self, keys: set[tuple[int, int]]) -> None:
        """Submit reads of `keys` (caller holds the lock); each lands when done."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(READERS, thread_name_prefix="frames")
        for key in sorted(keys):
            future = self._pool.submit(self._read_block, key)
            self._pending[key] = future
            future.add_done_callback(partial(self._landed, key))

    def _landed(self, key: tuple[int, int], future: Future[np.ndarray]) -> None:
        with self._lock:
            if self._pending.get(key) is future:
                del self._pending[key]
            if future.exception() is not None:  # read again (and raised) when a batch draws it
                return
            if key in self._prefetching:
                self._staged[key] = (self._prefetching.pop(key), future.result())
            else:
                self._keep(key, future.result())

    def _keep(self, key: tuple[int, int], block: np.ndarray) -> None:
        """Into the LRU cache, dropping the least recently used beyond its capacity."""
        self._cache[key] = block
        self._cache.move_to_end(key)
        while len(self._cache) > self.capacity:
            self._cache.popitem(last=False)

    def _blocks(self, wanted: set[tuple[int, int]]) -> dict[tuple[int, int], np.ndarray]:
        """The wanted blocks: cached or staged ones, those on their way, the rest read now
        (concurrently)."""
        with self._lock:
            found = {key: self._cache[key] for key in wanted if key in self._cache}
            for key in found:
                self._cache.move_to_end(key)
            for key in wanted & self._staged.keys():
                generation, found[key] = self._staged[key]
                if generation < self._generation:  # not wanted by a later prefetch: cache it
                    del self._staged[key]
                    self._keep(key, found[key])
            missing = {key for key in wanted if key not in found and key not in self._pending}
            self.misses += len(missing)
            self._start(missing)
            coming = {key: self._pending[key] for key in wanted if key not in found}
        for key, future in coming.items():
            found[key] = future.result()  # a read error surfaces here, in the step that needs it
        return found

    def _read_block(self, key: tuple[int, int]) -> np.ndarray:
        episode, block = key
        length = int(self.ends[episode] - self.starts[episode])
        start, stop = block * BLOCK, min(length, (block + 1) * BLOCK)
        block_frames = self._stack(self.store.window(episode, start, stop, self.cameras))
        with self._lock:
            self.reads += 1
        return block_frames

    def _stack(self, data: dict[str, np.ndarray]) -> np.ndarray:
        return np.stack([data[c] for c in self.cameras], 1)

    def episode_blocks(self) -> Iterator[np.ndarray]:
        """Every frame in order, one episode at a time (T, V, H, W, 3), bypassing the cache:
        for one pass over the data (its hash) in bounded memory."""
        for episode in range(len(self.ends)):
            length = int(self.ends[episode] - self.starts[episode])
            yield self._stack(self.store.window(episode, 0, length, self.cameras))
