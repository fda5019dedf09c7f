"""Merge a job's committed episodes into one EpisodeStore (OUT/dataset.zarr); assemble its LeRobot
dataset (OUT/lerobot) from the parts the replicas wrote.

Both outputs follow the committed episodes' checksums, not only their ids: dataset.zarr carries
a digest of the (episode id, checksum) list it holds (attribute `iws_sources`) and is rebuilt
when the kept records' digest differs; OUT/lerobot counts as finished only once its completion
marker OUT/lerobot.done.json, written last, names the same digest of the kept episodes. dataset.zarr is rebuilt in a staging directory and swapped in (on s3://: uploaded with its
root attributes last), so a crash never leaves a half-merged dataset that readers would trust.

Merging reads every episode and checks it against its commit marker's checksum; the episodes
whose data is missing, unreadable or changed are reported together (DamagedEpisodes), for the
driver to withdraw their markers and make them again.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable

from pydantic import ValidationError

from pipeline.generate.outputs import DATASET_DIR, LEROBOT_DIR, LEROBOT_DONE, now
from schemas import EpisodeRecord, EpisodeSpec, ExportRecord, FeatureSpec, JobSpec, SpecError
from sim_model import storage
from sim_model.data.store import EpisodeStore
from workers import parts
from workers.writer import stored_uri

log = logging.getLogger(__name__)

SOURCES_ATTR = "iws_sources"


class DamagedEpisodes(SpecError):
    """Committed episodes whose data is missing, unreadable or not what their marker says."""

    def __init__(self, damaged: list[tuple[EpisodeRecord, str]]) -> None:
        self.damaged = damaged
        listed = "; ".join(f"{r.episode_id}: {why}" for r, why in damaged[:3])
        more = f" and {len(damaged) - 3} more" if len(damaged) > 3 else ""
        super().__init__(f"{len(damaged)} committed episodes cannot be consolidated ({listed}{more}). "
                         "Rerun the job: it withdraws their commit markers and makes them again.")


def sources_digest(records: Iterable[EpisodeRecord]) -> str:
    """sha256 over the (episode id, checksum) list, in order."""
    digest = hashlib.sha256()
    for record in records:
        digest.update(f"{record.episode_id}:{record.checksum}\n".encode())
    return digest.hexdigest()


def _up_to_date(uri: str, digest: str, count: int) -> bool:
    if not storage.exists(uri):
        return False
    try:
        store = EpisodeStore.open(uri, "r")
    except SpecError:
        return False
    return len(store) == count and store.attr(SOURCES_ATTR) == digest


def consolidate(out: str, records: list[EpisodeRecord], features: FeatureSpec) -> tuple[str, bool]:
    """Write the episodes of `records` (in this order) to OUT/dataset.zarr.

    Returns its URI and whether it was (re)written; DamagedEpisodes if some cannot be used."""
    target = storage.join(out, DATASET_DIR)
    digest = sources_digest(records)
    if _up_to_date(target, digest, len(records)):
        log.info("%s is up to date (%d episodes)", target, len(records))
        return target, False
    start = time.perf_counter()
    staged = storage.staging_dir(target)
    try:
        merged = EpisodeStore.create(staged, features)
        damaged = _merge(out, records, merged)
        if damaged:
            raise DamagedEpisodes(damaged)
        merged.set_attr(SOURCES_ATTR, digest)
    except BaseException:
        storage.discard_staged(staged)
        raise
    storage.publish_dir(staged, target, replace=True)
    log.info("consolidated %d episodes into %s in %.1fs", len(records), target, time.perf_counter() - start)
    return target, True


def _merge(out: str, records: list[EpisodeRecord], merged: EpisodeStore) -> list[tuple[EpisodeRecord, str]]:
    """Append each record's episode to `merged`; returns every record whose data cannot be used,
    with the reason (after the first, the rest are only checked: the merge will be discarded)."""
    damaged: list[tuple[EpisodeRecord, str]] = []
    for record in records:
        uri = stored_uri(out, record)
        try:
            episode = EpisodeStore.open(uri, "r").episode(0)
        except (SpecError, IndexError) as error:
            storage.exists(uri)  # raises if the storage itself is unreachable: not the episode's fault
            damaged.append((record, f"its data at {uri} cannot be read ({error})"))
            continue
        if episode.checksum() != record.checksum:
            damaged.append((record, f"its data at {uri} does not match the checksum in its commit marker"))
        elif not damaged:
            merged.append(episode)
    return damaged


class StaleParts(SpecError):
    """Groups whose LeRobot part is missing or was made from other episodes or camera keys."""

    def __init__(self, keys: list[int]) -> None:
        self.keys = keys
        super().__init__(f"{len(keys)} LeRobot parts are missing or out of date (groups starting at "
                         f"episodes {keys[:5]}{'...' if len(keys) > 5 else ''}); rerun the job to make them.")


def assemble_lerobot(spec: JobSpec, groups: list[list[EpisodeSpec]], records: dict[str, EpisodeRecord],
                     *, refresh: bool = False) -> str:
    """OUT/lerobot from the parts the replicas wrote, one per group (workers/parts.py), by
    writing its metadata (sim_model.data.formats.lerobot_parts.assemble); no frame is read.

    Skipped when its completion marker names the same kept episodes and camera keys, unless
    `refresh`. StaleParts if a group's part is missing or disagrees with the committed episodes
    (the driver withdraws those and has them made again). The marker is removed before and
    written after the assembly, so one that died part way is redone, never taken as finished."""
    out = spec.output.path
    dest, marker = storage.join(out, LEROBOT_DIR), storage.join(out, LEROBOT_DONE)
    per_group = [(parts.part_key(g), [records[e.episode_id] for e in g]) for g in groups]
    chosen = [r for _, group in per_group for r in parts.kept(spec, group)]
    sources, cameras = sources_digest(chosen), spec.output.lerobot_camera_keys
    if not refresh and _export_matches(marker, sources, cameras) and storage.exists(dest):
        log.info("%s is up to date", dest)
        return dest
    found = parts.read_parts(out)
    stale = [key for key, group in per_group if not parts.is_current(found.get(key), spec, group)]
    if stale:
        raise StaleParts(stale)
    storage.remove_file(marker)
    from sim_model.data.formats.lerobot_parts import assemble

    start = time.perf_counter()
    done = assemble(dest, parts.parts_root(out), [key for key, _ in per_group if found[key].episodes])
    log.info("assembled %s from %d parts in %.2fs (%d data files rewritten)", dest, done.parts,
             time.perf_counter() - start, done.rewritten)
    record = ExportRecord(format="lerobot", uri=dest, sources=sources, episodes=done.episodes,
                          camera_keys=cameras, finished=now())
    storage.write_atomic(marker, record.model_dump_json(indent=1))
    return dest


def _export_matches(marker: str, sources: object, camera_keys: dict[str, str]) -> bool:
    text = storage.try_read_text(marker)
    try:
        done = None if text is None else ExportRecord.model_validate_json(text)
        return done is not None and done.sources == sources and done.camera_keys == camera_keys
    except ValidationError:  # a damaged marker: export again
        return False
