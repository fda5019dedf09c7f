"""Read a local LeRobot v3.0 dataset in place, as episodes of an iws store (`LeRobotReader`), or
only its actions (`read_actions`, for replayed action streams).

Numeric columns (action, state, extras, timestamps) are read once from the data parquet files
into memory; frames are decoded on demand with lerobot's own `decode_video_frames` at exactly
the timestamps lerobot-train would query (`from_timestamp + timestamp`), so a frame read here is
the frame a LeRobot policy sees. Image-dtype (PNG in parquet) cameras are supported too.
"""

from __future__ import annotations

import functools
import io
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from schemas import EpisodeMeta, SpecError
from sim_model.data.formats.lerobot_features import from_lerobot_features, iws_name
from sim_model.data.formats.source import ReaderBase

log = logging.getLogger(__name__)
SOURCE_TAG = "import:lerobot"
_DECODE_BATCH = 64  # frames per decode call: bounds the float32 buffer lerobot's decoder returns


def is_lerobot_root(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / "meta" / "info.json").is_file()


@functools.cache
def video_backend() -> str:
    """lerobot's default decoder (torchcodec) when its FFmpeg libraries load, else PyAV."""
    try:
        from torchcodec.decoders import VideoDecoder  # noqa: F401
    except Exception as error:  # torchcodec raises RuntimeError/OSError without system FFmpeg
        log.warning("torchcodec unavailable (%s); decoding videos with PyAV", error)
        return "pyav"
    return "torchcodec"


class LeRobotReader(ReaderBase):
    """Episodes of a LeRobot v3.0 dataset root (meta/, data/, videos/)."""

    def __init__(self, root: str | os.PathLike[str], *, tolerance_s: float = 1e-4) -> None:
        from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

        self.path = str(Path(root).expanduser().absolute())
        self._tolerance_s = tolerance_s
        if not is_lerobot_root(self.path):
            raise SpecError(f"{self.path} is not a LeRobot dataset root (no meta/info.json).")
        try:
            self._meta = LeRobotDatasetMetadata(f"local/{Path(self.path).name}", root=self.path)
        except Exception as error:  # version mismatch, missing parquet footers, ...
            raise SpecError(f"cannot read the LeRobot dataset at {self.path}: {error}. It must be a "
                            "finalized v3.0 dataset (LeRobotDataset.finalize() was called).") from None
        self._features, self._map = from_lerobot_features(self._meta.features, self._meta.fps)
        episodes = self._meta.episodes
        self._episodes = episodes.to_pandas().set_index("episode_index").sort_index()
        lengths = self._episodes["length"].to_numpy(dtype=np.int64)
        self._ends = np.cumsum(lengths)
        self._ends.setflags(write=False)
        self._columns = self._load_columns()
        self._image_cache: tuple[Path, Any] | None = None
        self._decoders: Any = None
        if video_backend() == "torchcodec":
            from lerobot.datasets.video_utils import VideoDecoderCache

            self._decoders = VideoDecoderCache()
        self._stem = iws_name(Path(self.path).name) or "lerobot"

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "tolerance_s": self._tolerance_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], tolerance_s=state["tolerance_s"])  # type: ignore[misc]

    @property
    def key_map(self) -> dict[str, str]:
        """iws key -> LeRobot feature key."""
        return dict(self._map)

    def meta(self, i: int) -> EpisodeMeta:
        first, last = self.episode_range(i)
        row = self._episodes.iloc[i % len(self)]
        tasks = [str(t) for t in row["tasks"]]
        info: dict[str, str | int | float | bool | None] = {
            "source_path": self.path, "source_episode": int(self._episodes.index[i % len(self)])}
        if len(tasks) > 1:
            info["tasks"] = " | ".join(tasks)
        return EpisodeMeta(episode_id=f"{self._stem}-{i % len(self):06d}", length=last - first,
                           task=tasks[0] if tasks else "", source=SOURCE_TAG,
                           fps=float(self._meta.fps), info=info)

    # -- reading ------------------------------------------------------------------------------

    def _load_columns(self) -> dict[str, np.ndarray]:
        """Every non-image column over the whole dataset, rows ordered by lerobot's `index`."""
        wanted = [lr for key, lr in self._map.items() if key not in self._features.camera_names]
        wanted += ["index", "timestamp"]
        tables = [pq.read_table(p, columns=wanted)
                  for p in sorted(Path(self.path, "data").glob("*/*.parquet"))]
        if not tables:
            raise SpecError(f"{self.path}/data holds no parquet files.")
        columns: dict[str, list[np.ndarray]] = {name: [] for name in wanted}
        for table in tables:
            for name in wanted:
                columns[name].append(column_numpy(table.column(name)))
        out = {name: np.concatenate(parts) for name, parts in columns.items()}
        order = np.argsort(out["index"], kind="stable")
        return {name: value[order] for name, value in out.items()}

    def _rows(self, i: int, start: int, stop: int) -> np.ndarray:
        begin = int(self._episodes.iloc[i]["dataset_from_index"])
        wanted = np.arange(begin + start, begin + stop)
        rows = np.searchsorted(self._columns["index"], wanted)
        if len(rows) and (rows[-1] >= len(self._columns["index"])
                          or not np.array_equal(self._columns["index"][rows], wanted)):
            raise SpecError(f"{self.path}: rows {wanted[0]}..{wanted[-1]} of episode {i} are "
                            "missing from data/*.parquet; the dataset is incomplete.")
        return rows

    def _read(self, i: int, start: int, stop: int, keys: list[str]) -> dict[str, np.ndarray]:
        rows = self._rows(i, start, stop)
        out: dict[str, np.ndarray] = {}
        for key in keys:
            lr_key = self._map[key]
            if key in self._features.camera_names:
                out[key] = self._frames(i, lr_key, rows)
                continue
            value = self._columns[lr_key][rows]
            if key in ("action", "state"):
                out[key] = value.astype(np.float32, copy=False).reshape(len(rows), -1)
            else:
                extra = next(e for e in self._features.extras if e.name == key)
                out[key] = value.astype(extra.dtype, copy=False).reshape(len(rows), *extra.shape)
        return out

    def _frames(self, i: int, lr_key: str, rows: np.ndarray) -> np.ndarray:
        cam = next(c for c in self._features.cameras if self._map[c.name] == lr_key)
        if len(rows) == 0:
            return np.zeros((0, cam.height, cam.width, 3), np.uint8)
        if self._meta.features[lr_key]["dtype"] == "image":
            return self._png_frames(i, lr_key, rows)
        episode = self._episodes.iloc[i]
        video = Path(self.path) / self._meta.get_video_file_path(int(self._episodes.index[i]), lr_key)
        offset = float(episode[f"videos/{lr_key}/from_timestamp"])
        stamps = (offset + self._columns["timestamp"][rows].astype(np.float64)).tolist()
        parts = []
        for b in range(0, len(stamps), _DECODE_BATCH):
            batch = self._decode(video, stamps[b:b + _DECODE_BATCH])  # (n, 3, H, W) in [0, 1]
            parts.append((batch * 255).round().to(dtype=_torch_uint8()).permute(0, 2, 3, 1).numpy())
        return np.concatenate(parts)

    def _decode(self, video: Path, stamps: list[float]) -> Any:
        """lerobot's own decoders at lerobot's tolerance. torchcodec decoders are cached per
        reader (lerobot's default cache is process-wide and keyed by path alone)."""
        from lerobot.datasets import video_utils

        if video_backend() == "torchcodec":
            return video_utils.decode_video_frames_torchcodec(
                video, stamps, self._tolerance_s, decoder_cache=self._decoders)
        return video_utils.decode_video_frames_torchvision(video, stamps, self._tolerance_s, "pyav")

    def _png_frames(self, i: int, lr_key: str, rows: np.ndarray) -> np.ndarray:
        from PIL import Image

        path = Path(self.path) / self._meta.get_data_file_path(int(self._episodes.index[i]))
        if self._image_cache is None or self._image_cache[0] != path:
            table = pq.read_table(path, columns=["index", *self._meta.image_keys])
            self._image_cache = (path, table)
        table = self._image_cache[1]
        index = table.column("index").to_numpy()
        wanted = self._columns["index"][rows]
        where = np.searchsorted(index, wanted)  # rows of one episode are sorted within a file
        cells = table.column(lr_key).take(where).to_pylist()
        return np.stack([np.asarray(Image.open(io.BytesIO(c["bytes"])).convert("RGB"))
                         for c in cells])


def read_actions(root: str | os.PathLike[str]) -> list[np.ndarray]:
    """Only the action column of a LeRobot dataset, one (T, A) float32 array per episode in
    episode order: all a replayed action stream needs, straight from data/chunk-*/*.parquet
    (no lerobot import, no video; meta/ beyond info.json is not read)."""
    path = Path(root)
    files = sorted((path / "data").glob("chunk-*/*.parquet"))
    if not files:
        raise SpecError(f"{path} has no data/chunk-*/*.parquet files; is it a finalized LeRobot v3.0 dataset?")
    table = pq.read_table(files[0].parent.parent, columns=["episode_index", "frame_index", "action"]) \
        if len(files) > 1 else pq.read_table(files[0], columns=["episode_index", "frame_index", "action"])
    data = table.to_pydict()
    order = np.lexsort((np.asarray(data["frame_index"]), np.asarray(data["episode_index"])))
    ep = np.asarray(data["episode_index"])[order]
    actions = np.asarray(data["action"], dtype=np.float32)[order]
    return [actions[ep == e] for e in np.unique(ep)]


def column_numpy(column: Any) -> np.ndarray:
    """A parquet column as numpy: scalars (N,), fixed-size lists (N, D), nested lists stacked."""
    import pyarrow as pa

    column = column.combine_chunks()
    if pa.types.is_fixed_size_list(column.type) and not pa.types.is_nested(column.type.value_type):
        return column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), -1)
    if pa.types.is_nested(column.type):
        return np.stack([np.asarray(v) for v in column.to_pylist()])
    return column.to_numpy(zero_copy_only=False)


def _torch_uint8() -> Any:
    import torch

    return torch.uint8
