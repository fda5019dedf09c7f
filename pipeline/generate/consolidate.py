"""Assemble a job's datasets from the parts its replicas wrote (workers/parts.py): the Zarr
dataset's index (OUT/dataset/index.parquet over the shards in OUT/dataset/shards/) and the LeRobot
dataset's metadata (OUT/lerobot). No frame is read or copied, so the time after the last rollout
grows only with the metadata: one index row and one LeRobot episode row per kept episode.

Both follow the committed episodes' checksums, not only their ids: a group's part counts only
if its record names exactly the group's kept episodes with their checksums (else StaleParts,
and the driver has the part made again). The index is rewritten whole on every assembly (it is
small) and is the Zarr dataset's commit: shards it does not name are removed first. OUT/lerobot
counts as finished only once its completion marker OUT/lerobot.done.json, written last, names
the same digest of the kept episodes and of the part records it was assembled from; it lists the
copy's files with their sizes, which every resume checks (pipeline/generate/verify.py).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable

from pydantic import ValidationError

from pipeline.generate.outputs import DATASET_DIR, LEROBOT_DIR, LEROBOT_DONE, now
from pipeline.generate.verify import parts_digest
from schemas import (
    EpisodeRecord,
    EpisodeSpec,
    ExportRecord,
    FeatureSpec,
    JobSpec,
    PartRecord,
    SpecError,
)
from sim_model import storage
from sim_model.data import shards
from workers import parts
from workers.scoring import is_plausible

log = logging.getLogger(__name__)


def sources_digest(records: Iterable[EpisodeRecord]) -> str:
    """sha256 over the (episode id, checksum) list, in order."""
    digest = hashlib.sha256()
    for record in records:
        digest.update(f"{record.episode_id}:{record.checksum}\n".encode())
    return digest.hexdigest()


class StaleParts(SpecError):
    """Groups whose part is missing or was made from other episodes, formats or camera keys."""

    def __init__(self, keys: list[int]) -> None:
        self.keys = keys
        super().__init__(f"{len(keys)} dataset parts are missing or out of date (groups starting at "
                         f"episodes {keys[:5]}{'...' if len(keys) > 5 else ''}); rerun the job to make them.")


def check_parts(spec: JobSpec, groups: list[list[EpisodeSpec]], records: dict[str, EpisodeRecord],
                found: dict[int, PartRecord]) -> None:
    """StaleParts naming every group whose part is missing or not current."""
    stale = [parts.part_key(g) for g in groups
             if not parts.is_current(found.get(parts.part_key(g)), spec, [records[e.episode_id] for e in g])]
    if stale:
        raise StaleParts(stale)


def assemble_zarr(spec: JobSpec, groups: list[list[EpisodeSpec]], records: dict[str, EpisodeRecord],
                  features: FeatureSpec) -> str:
    """OUT/dataset: remove shards no current part names, then write the index: one row per
    committed episode, in index order, those the filter kept pointing into their group's shard.
    Call after `check_parts`. Returns the dataset's URI."""
    root = storage.join(spec.output.path, DATASET_DIR)
    start = time.perf_counter()
    rows, wanted = [], set()
    for group in groups:
        key = parts.part_key(group)
        committed = [records[e.episode_id] for e in group]
        offsets = {r.episode_id: offset for offset, r in enumerate(parts.kept(spec, committed))}
        if offsets:
            wanted.add(shards.shard_name(key))
        rows += [shards.IndexRow(episode_id=r.episode_id, index=r.index, in_dataset=r.episode_id in offsets,
                                 shard=key if r.episode_id in offsets else -1,
                                 offset=offsets.get(r.episode_id, -1), length=r.length, seed=r.seed,
                                 source=r.source, score=r.score, success=r.success, checksum=r.checksum,
                                 node_id=r.node_id, plausibility=r.plausibility,
                                 plausible=is_plausible(spec.filter, r.plausibility))
                 for r in sorted(committed, key=lambda r: r.index)]
    shard_root = storage.join(root, shards.SHARDS_DIR)
    stray = [n for n in storage.list_names(shard_root) if n.endswith(".zarr") and n not in wanted]
    for name in stray:
        storage.remove_tree(storage.join(shard_root, name))
    uri = shards.write_index(root, rows, features)
    log.info("indexed %d episodes (%d in %d shards) at %s in %.2fs (%d stray shards removed)", len(rows),
             sum(r.in_dataset for r in rows), len(wanted), uri, time.perf_counter() - start, len(stray))
    return root


def assemble_lerobot(spec: JobSpec, groups: list[list[EpisodeSpec]], records: dict[str, EpisodeRecord],
                     *, refresh: bool = False, found: dict[int, PartRecord] | None = None) -> str:
    """OUT/lerobot from the parts the replicas wrote, one per group (workers/parts.py), by
    writing its metadata (sim_model.data.formats.lerobot_parts.assemble); no frame is read.

    Skipped when its completion marker names the same kept episodes and camera keys, unless
    `refresh`. StaleParts if a group's part is missing or disagrees with the committed episodes
    (the driver has those groups made again). The marker is removed before and
    written after the assembly, so one that died part way is redone, never taken as finished.
    `found`: the part records, when the caller has read them already."""
    out = spec.output.path
    dest, marker = storage.join(out, LEROBOT_DIR), storage.join(out, LEROBOT_DONE)
    per_group = [(parts.part_key(g), [records[e.episode_id] for e in g]) for g in groups]
    chosen = [r for _, group in per_group for r in parts.kept(spec, group)]
    sources, cameras = sources_digest(chosen), spec.output.lerobot_camera_keys
    found = parts.read_parts(out) if found is None else found
    assembled_from = parts_digest({key: found[key] for key, _ in per_group if key in found})
    if not refresh and _export_matches(marker, sources, cameras, assembled_from) and storage.exists(dest):
        log.info("%s is up to date", dest)
        return dest
    check_parts(spec, groups, records, found)
    storage.remove_file(marker)
    from sim_model.data.formats.lerobot_parts import assemble

    start = time.perf_counter()
    done = assemble(dest, parts.parts_root(out), [key for key, _ in per_group if found[key].episodes])
    log.info("assembled %s from %d parts in %.2fs (%d data files rewritten)", dest, done.parts,
             time.perf_counter() - start, done.rewritten)
    record = ExportRecord(format="lerobot", uri=dest, sources=sources, episodes=done.episodes,
                          camera_keys=cameras, finished=now(), parts=assembled_from,
                          files=storage.file_sizes(dest))
    storage.write_atomic(marker, record.model_dump_json(indent=1))
    return dest


def _export_matches(marker: str, sources: str, camera_keys: dict[str, str], assembled_from: str) -> bool:
    """Whether the completion marker names this assembly: the same kept episodes, camera keys
    and part records (a part written again, with the same episodes, is assembled again too)."""
    text = storage.try_read_text(marker)
    try:
        done = None if text is None else ExportRecord.model_validate_json(text)
    except ValidationError:  # a damaged marker: export again
        return False
    return (done is not None and done.sources == sources and done.camera_keys == camera_keys
            and done.parts == assembled_from)
