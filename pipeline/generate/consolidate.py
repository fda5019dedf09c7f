"""Merge a job's committed episodes into one EpisodeStore (OUT/dataset.zarr), and export hooks.

Idempotent: when dataset.zarr already holds exactly the kept episodes in index order it is left
alone; otherwise it is rebuilt in a staging directory and swapped in (on s3://: uploaded with its
root attributes last), so a crash never leaves a half-merged dataset that readers would trust.
"""

from __future__ import annotations

import importlib
import logging
import time

from pipeline.generate.outputs import DATASET_DIR, LEROBOT_DIR
from pipeline.generate.preflight import LEROBOT_EXPORTER
from schemas import EpisodeRecord, FeatureSpec, JobSpec, SpecError
from sim_model.data.store import EpisodeStore
from workers import storage

log = logging.getLogger(__name__)


def _up_to_date(uri: str, records: list[EpisodeRecord]) -> bool:
    if not storage.exists(uri):
        return False
    try:
        store = EpisodeStore.open(uri, "r")
    except SpecError:
        return False
    return len(store) == len(records) and all(
        store.meta(i).episode_id == r.episode_id for i, r in enumerate(records))


def consolidate(out: str, records: list[EpisodeRecord], features: FeatureSpec) -> tuple[str, bool]:
    """Write the episodes of `records` (in this order) to OUT/dataset.zarr.

    Returns its URI and whether it was (re)written."""
    target = storage.join(out, DATASET_DIR)
    if _up_to_date(target, records):
        log.info("%s is up to date (%d episodes)", target, len(records))
        return target, False
    start = time.perf_counter()
    staged = storage.staging_dir(target)
    try:
        merged = EpisodeStore.create(staged, features)
        for record in records:
            episode = EpisodeStore.open(record.uri, "r").episode(0)
            if episode.checksum() != record.checksum:
                raise SpecError(f"episode {record.episode_id} at {record.uri} does not match the checksum "
                                "in its commit marker (the files were changed or damaged). Delete its "
                                "commit marker and rerun the job to regenerate it.")
            merged.append(episode)
    except BaseException:
        storage.discard_staged(staged)
        raise
    storage.publish_dir(staged, target, replace=True)
    log.info("consolidated %d episodes into %s in %.1fs", len(records), target, time.perf_counter() - start)
    return target, True


def export_lerobot(spec: JobSpec, src_zarr: str, *, refresh: bool) -> str:
    """Hook to the LeRobot exporter (pipeline.export.lerobot): OUT/lerobot from dataset.zarr.

    Skipped when the export exists and dataset.zarr did not change (`refresh` False)."""
    dest = storage.join(spec.output.path, LEROBOT_DIR)
    if storage.exists(dest) and not refresh:
        log.info("%s is up to date", dest)
        return dest
    exporter = importlib.import_module(LEROBOT_EXPORTER)
    exporter.export_lerobot(src_zarr, dest, repo_id=f"iws/{spec.name}", task=spec.task or None,
                            overwrite=True)
    return dest
