"""Training frames read from the store as batches need them, through a cache of bounded size.

`TrainingData.from_store(path, cache_mb=M)` uses this instead of loading every frame: a rank
holds at most M MiB of frames (blocks of BLOCK consecutive frames of one episode, least recently
used dropped first) whatever the dataset's size, and reads what a batch misses from the local
or s3:// store, several blocks at once. Indexing works like the in-memory tensor it replaces:
`frames[idx]` with an integer tensor of any shape gives uint8 (*idx.shape, V, H, W, 3).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

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
        self.dtype = torch.uint8
        self._cache: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.reads = 0  # blocks read from the store, for benchmarks and tests

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def cached_bytes(self) -> int:
        return sum(block.nbytes for block in self._cache.values())

    def __getitem__(self, index: torch.Tensor | np.ndarray) -> torch.Tensor:
        idx = index.numpy() if isinstance(index, torch.Tensor) else np.asarray(index)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        flat = idx.reshape(-1).astype(np.int64)
        if len(flat) and (flat.min() < 0 or flat.max() >= len(self)):
            raise IndexError(f"frame index out of range 0..{len(self) - 1}")
        episode = np.searchsorted(self.ends, flat, side="right")
        offset = flat - self.starts[episode]
        keys = list(zip(episode.tolist(), (offset // BLOCK).tolist(), strict=True))
        blocks = self._blocks(set(keys))
        out = np.empty((len(flat), *self.shape[1:]), np.uint8)
        for row, (key, off) in enumerate(zip(keys, offset.tolist(), strict=True)):
            out[row] = blocks[key][off - key[1] * BLOCK]
        return torch.from_numpy(out.reshape(*idx.shape, *self.shape[1:]))

    def _blocks(self, wanted: set[tuple[int, int]]) -> dict[tuple[int, int], np.ndarray]:
        """The wanted blocks: cached ones, the rest read (concurrently) and cached."""
        with self._lock:
            found = {key: self._cache[key] for key in wanted if key in self._cache}
            for key in found:
                self._cache.move_to_end(key)
        missing = sorted(wanted - found.keys())
        if missing:
            with ThreadPoolExecutor(min(READERS, len(missing))) as pool:
                found.update(zip(missing, pool.map(self._read_block, missing), strict=True))
            with self._lock:
                for key in missing:
                    self._cache[key] = found[key]
                while len(self._cache) > self.capacity:
                    self._cache.popitem(last=False)
                self.reads += len(missing)
        return found

    def _read_block(self, key: tuple[int, int]) -> np.ndarray:
        episode, block = key
        length = int(self.ends[episode] - self.starts[episode])
        start, stop = block * BLOCK, min(length, (block + 1) * BLOCK)
        return self._stack(self.store.window(episode, start, stop, self.cameras))

    def _stack(self, data: dict[str, np.ndarray]) -> np.ndarray:
        return np.stack([data[c] for c in self.cameras], 1)

    def episode_blocks(self) -> Iterator[np.ndarray]:
        """Every frame in order, one episode at a time (T, V, H, W, 3), bypassing the cache:
        for one pass over the data (its hash) in bounded memory."""
        for episode in range(len(self.ends)):
            length = int(self.ends[episode] - self.starts[episode])
            yield self._stack(self.store.window(episode, 0, length, self.cameras))
