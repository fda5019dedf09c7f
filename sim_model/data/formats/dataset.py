"""Use a user's LeRobot v3.0 dataset or Diffusion-Policy Zarr store wherever iws expects data.

Two routes, chosen per use:

- **Read in place** (`open_dataset(path)`): for initial frames and replayed action streams
  (workers.init_frames; replays of LeRobot data read only its action column, with
  `lerobot_reader.read_actions`). A generation job touches one frame and the action column of
  each episode it draws; decoding a handful of frames from video or reading a parquet column is
  cheap, and copying the whole dataset first would cost more than the job reads. `open_dataset` returns the EpisodeStore
  itself for iws stores and a reader with the same read API otherwise.
- **Import once** (`iws import SRC DEST` / `import_dataset`): for world-model training. Training
  draws random windows from every episode for many epochs; from video each draw decodes from
  the previous keyframe (and lossy codecs differ run to run across decoders), while the
  EpisodeStore serves any window straight from per-frame chunks. Decoding every frame once and
  keeping it losslessly makes training fast and reproducible. Every frame and every action is
  kept (actions bit for bit).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from schemas import SpecError
from sim_model.data.formats.detect import detect_format
from sim_model.data.formats.source import EpisodeSource

if TYPE_CHECKING:
    from sim_model.data.store import EpisodeStore

log = logging.getLogger(__name__)
__all__ = ["check_apart", "import_dataset", "open_dataset"]


def _local_copy(path: str | os.PathLike[str]) -> str | os.PathLike[str]:
    """s3:// LeRobot and DP datasets are read from a cached local copy (iws stores in place)."""
    from sim_model import storage

    text = os.fspath(path)
    return storage.fetch(text) if storage.is_remote(text) else path


def open_dataset(path: str | os.PathLike[str], *, keys: dict[str, str] | None = None,
                 fps: float | None = None, task: str = "", verify: bool = False) -> EpisodeSource:
    """Open any supported dataset read-only with the EpisodeStore read API.

    `keys` (iws=dp names), `fps` and `task` apply to DP Zarr stores, which record none of them
    (unless iws wrote the store); fps defaults to 10. Other formats record their own. `verify`
    checks each episode read against its committed checksum where the dataset records one (a
    generation job's sharded dataset: ShardedDataset); other formats record none.
    """
    kind = detect_format(path)
    if kind != "zarr-dp" and (keys or fps is not None or task):
        raise SpecError(f"{path} is a{'n iws' if kind.startswith('iws') else ' LeRobot'} dataset: it records "
                        "its own keys, fps and task; drop --keys/--fps/--task.")
    if kind == "iws":
        from sim_model.data.store import EpisodeStore

        return EpisodeStore.open(path, "r")
    if kind == "iws-shards":
        from sim_model.data.shards import ShardedDataset

        return ShardedDataset(path, verify=verify)
    if kind == "lerobot":
        from sim_model.data.formats.lerobot_convert import is_v21, v30_copy
        from sim_model.data.formats.lerobot_reader import LeRobotReader

        local = _local_copy(path)
        # v2.1 (openpi's, GR00T's): read through lerobot's own conversion to v3.0, cached
        return LeRobotReader(v30_copy(local) if is_v21(local) else local)
    from sim_model.data.formats.zarr_dp_reader import DPZarrReader

    return DPZarrReader(_local_copy(path), keys=keys, fps=fps, task=task)


def check_apart(src: str | os.PathLike[str], dest: str | os.PathLike[str]) -> None:
    """SpecError if `dest` is `src`, lies inside it or contains it (local paths resolved, s3://
    URIs compared by prefix): writing there would change the data being read, and --overwrite
    would replace it whole (a job's OUT/dataset exported to OUT deletes the job's output)."""
    from sim_model import storage

    source, target = os.fspath(src), os.fspath(dest)
    if not storage.overlap(source, target):
        return
    if storage.resolved(source) == storage.resolved(target):
        how = "is"
    else:
        how = "lies inside" if storage.is_inside(source, target) else "contains"
    raise SpecError(f"the destination {target} {how} the source {source}: writing it would overwrite "
                    "the data being read. Choose a destination outside the source (and not above it).")


def import_dataset(src: str | os.PathLike[str] | EpisodeSource, dest: str | os.PathLike[str], *,
                   overwrite: bool = False, on_episode: Callable[[int], None] | None = None,
                   **open_kwargs: object) -> Path | str:
    """Copy every episode of `src` into a new EpisodeStore at `dest`; returns `dest`.

    An interrupted import resumes: if `dest` holds a prefix of `src`'s episodes (same features,
    same episode ids) the rest are appended. `on_episode(frames)` is called per episode.
    """
    from sim_model import storage
    from sim_model.data.store import EpisodeStore

    if not isinstance(src, EpisodeSource):
        check_apart(src, dest)
    source = src if isinstance(src, EpisodeSource) else open_dataset(src, **open_kwargs)  # type: ignore[arg-type]
    dest_path: Path | str = Path(dest)
    if storage.is_remote(os.fspath(dest)):  # s3:// stays a URI; EpisodeStore writes it in place
        dest_path = os.fspath(dest)
    store: EpisodeStore | None = None
    if (storage.exists(dest_path) if isinstance(dest_path, str) else dest_path.exists()) and not overwrite:
        store = _resumable(dest_path, source)
    if store is None:
        store = EpisodeStore.create(dest_path, source.features, overwrite=overwrite)
    for i in range(len(store), len(source)):
        episode = source.episode(i)
        store.append(episode)
        if on_episode is not None:
            on_episode(len(episode))
    log.info("imported %d episodes (%d frames) into %s", len(store), store.n_frames, dest_path)
    return dest_path


def _resumable(dest: Path | str, source: EpisodeSource) -> EpisodeStore:
    from sim_model.data.store import EpisodeStore

    try:
        store = EpisodeStore.open(dest, "a")
    except SpecError:
        raise SpecError(f"{dest} exists and is not an iws episode store; choose another "
                        "destination or pass --overwrite.") from None
    same = store.features == source.features and len(store) <= len(source) and all(
        store.meta(i).episode_id == source.meta(i).episode_id for i in range(len(store)))
    if not same:
        raise SpecError(f"{dest} already holds a different dataset; pass --overwrite to replace "
                        "it or choose another destination.")
    if len(store):
        log.info("resuming import into %s after %d episodes", dest, len(store))
    return store
