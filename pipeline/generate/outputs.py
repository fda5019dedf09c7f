"""The job's output directory: its identity file, resume checks, and the run manifest.

    OUT/job.json        the spec that owns this output (a rerun must make the same episodes)
    OUT/episodes/, OUT/commits/   written by replicas (workers.writer)
    OUT/manifest.json   RunManifest, rewritten atomically as the run goes
    OUT/dataset.zarr    consolidated EpisodeStore;  OUT/lerobot/  LeRobot export
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from pipeline.generate.spec import RUN_ONLY_FIELDS, content_diff, content_hash
from schemas import EpisodeRecord, JobSpec, RunManifest, SpecError
from workers import storage
from workers.writer import COMMITS_DIR, EPISODES_DIR

log = logging.getLogger(__name__)

JOB_FILE = "job.json"
MANIFEST_FILE = "manifest.json"
DATASET_DIR = "dataset.zarr"
LEROBOT_DIR = "lerobot"
_OWNED_DIRS = (EPISODES_DIR, COMMITS_DIR, DATASET_DIR, LEROBOT_DIR)
_OWNED_FILES = (MANIFEST_FILE, JOB_FILE)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _content(spec: JobSpec) -> dict:
    return spec.model_dump(mode="json", exclude=RUN_ONLY_FIELDS)


def clear_output(out: str) -> None:
    """Delete what a job wrote under OUT (only the entries a job owns, never anything else)."""
    for name in _OWNED_DIRS:
        storage.remove_tree(storage.join(out, name))
    for name in _OWNED_FILES:
        if storage.exists(storage.join(out, name)):
            storage.local_path(storage.join(out, name)).unlink()


def claim_output(spec: JobSpec, *, overwrite: bool) -> None:
    """Make OUT this job's output: fresh, or a resumable earlier run of the same job.

    SpecError when OUT holds another job's episodes, naming the fields that differ.
    """
    out = spec.output.path
    if overwrite:
        clear_output(out)
    job_uri = storage.join(out, JOB_FILE)
    if storage.exists(job_uri):
        old = json.loads(storage.read_text(job_uri))
        if old.get("content_hash") != content_hash(spec):
            fields = content_diff(old.get("content", {}), _content(spec))
            raise SpecError(f"{out} holds episodes of a different job (fields that differ: "
                            f"{', '.join(fields) or 'unknown'}). Rerun with the original spec to resume, "
                            "choose another output path, or pass --overwrite to delete them.")
    elif storage.list_names(storage.join(out, COMMITS_DIR)):
        raise SpecError(f"{out} holds committed episodes but no {JOB_FILE}, so they cannot be matched "
                        "to this job; choose another output path or pass --overwrite.")
    storage.write_atomic(job_uri, json.dumps({"job": spec.name, "content_hash": content_hash(spec),
                                              "content": _content(spec),
                                              "spec": spec.model_dump(mode="json")}, indent=1))
    remove_partial_writes(out)


def remove_partial_writes(out: str) -> None:
    """Delete staging copies that killed writers left behind (call only while no replica runs)."""
    for sub in (EPISODES_DIR, COMMITS_DIR):
        removed = storage.remove_stale_staging(storage.join(out, sub))
        if removed:
            log.info("removed %d partial writes of interrupted writers in %s/", removed, sub)


def write_manifest(out: str, manifest: RunManifest) -> None:
    storage.write_atomic(storage.join(out, MANIFEST_FILE), manifest.model_dump_json(indent=1))


def manifest_for(spec: JobSpec, spec_digest: str, model_hash: str, records: list[EpisodeRecord],
                 started: str, finished: str | None = None,
                 datasets: dict[str, str] | None = None) -> RunManifest:
    ordered = sorted(records, key=lambda r: r.index)
    return RunManifest(job_id=spec.name, spec_hash=spec_digest, model_hash=model_hash,
                       episodes_requested=spec.episodes, episodes=ordered, started=started,
                       finished=finished, frames=sum(r.length for r in ordered),
                       datasets=datasets or {})
