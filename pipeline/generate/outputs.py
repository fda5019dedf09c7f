"""The job's output directory: its identity file, resume checks, and the run manifest.

    OUT/lease.json      which run owns the output now, until when (workers.lease)
    OUT/job.json        the spec that owns this output (a rerun must make the same episodes)
    OUT/episodes/, OUT/commits/   written by replicas (workers.writer)
    OUT/manifest.json   RunManifest, rewritten atomically as the run goes
    OUT/dataset.zarr    consolidated EpisodeStore
    OUT/lerobot/        the LeRobot dataset: data and videos written by the replicas in parts,
                        metadata by the driver's assembly;  OUT/lerobot_parts/  the parts' records
                        (workers/parts.py)
    OUT/lerobot.done.json   the LeRobot dataset's completion marker, written last
    OUT/preview.gif, OUT/summary.md   for a person, written when the run is finished

OUT is a local directory or an s3:// prefix; every access goes through sim_model.storage.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import UTC, datetime

from pipeline.generate.spec import RUN_ONLY_FIELDS, content_diff, content_hash
from schemas import EpisodeRecord, JobSpec, RunManifest, SpecError
from sim_model import storage
from workers.lease import Lease
from workers.parts import LEROBOT_DIR, PARTS_DIR
from workers.writer import COMMITS_DIR, EPISODES_DIR, remove_orphan_uploads

log = logging.getLogger(__name__)

JOB_FILE = "job.json"
MANIFEST_FILE = "manifest.json"
DATASET_DIR = "dataset.zarr"
LEROBOT_DONE = "lerobot.done.json"
PREVIEW_FILE = "preview.gif"
SUMMARY_FILE = "summary.md"
_OWNED_DIRS = (EPISODES_DIR, COMMITS_DIR, DATASET_DIR, LEROBOT_DIR, PARTS_DIR)
_OWNED_FILES = (MANIFEST_FILE, JOB_FILE, PREVIEW_FILE, SUMMARY_FILE)


def lerobot_repo_id(job: str) -> str:
    """The repo id of the job's LeRobot copy (OUT/lerobot), which LeRobotDataset needs beside its root."""
    return f"iws/{job}"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _content(spec: JobSpec) -> dict:
    return spec.model_dump(mode="json", exclude=RUN_ONLY_FIELDS)


def clear_output(out: str) -> None:
    """Delete what a job wrote under OUT (only the entries a job owns, never anything else)."""
    storage.remove_file(storage.join(out, LEROBOT_DONE))  # before the export it vouches for
    for name in _OWNED_DIRS:
        storage.remove_tree(storage.join(out, name))
    for name in _OWNED_FILES:
        storage.remove_file(storage.join(out, name))


def claim_output(spec: JobSpec, *, overwrite: bool, model_hash: str | None = None) -> None:
    """Make OUT this job's output: fresh, or a resumable earlier run of the same job made by the
    same model checkpoint (`model_hash`). Call it holding the output's lease (workers.lease).

    SpecError when OUT holds another job's episodes, naming the fields that differ, or episodes
    of another checkpoint: `model: pusht` names whatever model is bundled, and a re-bundled or
    retrained model must not resume into a dataset made by its predecessor.
    """
    out = spec.output.path
    if overwrite:
        clear_output(out)
    job_text = storage.try_read_text(storage.join(out, JOB_FILE))
    if job_text is not None:
        old = json.loads(job_text)
        if old.get("content_hash") != content_hash(spec):
            fields = content_diff(old.get("content", {}), _content(spec))
            raise SpecError(f"{out} holds episodes of a different job (fields that differ: "
                            f"{', '.join(fields) or 'unknown'}). Rerun with the original spec to resume, "
                            "choose another output path, or pass --overwrite to delete them.")
        _check_model(out, old.get("model_hash") or _manifest_model_hash(out), model_hash, spec.model)
    elif storage.list_names(storage.join(out, COMMITS_DIR)):
        raise SpecError(f"{out} holds committed episodes but no {JOB_FILE}, so they cannot be matched "
                        "to this job; choose another output path or pass --overwrite.")
    storage.write_atomic(storage.join(out, JOB_FILE), json.dumps({"job": spec.name, "content_hash": content_hash(spec),
                                              "model_hash": model_hash, "content": _content(spec),
                                              "spec": spec.model_dump(mode="json")}, indent=1))


def _manifest_model_hash(out: str) -> str | None:
    """The checkpoint hash in OUT's manifest (outputs whose job.json predates its model_hash)."""
    text = storage.try_read_text(storage.join(out, MANIFEST_FILE))
    return None if text is None else json.loads(text).get("model_hash")


def _check_model(out: str, made_by: str | None, model_hash: str | None, model: str) -> None:
    if made_by is not None and model_hash is not None and made_by != model_hash:
        raise SpecError(f"{out} holds episodes made by model checkpoint {made_by}, and this run's model "
                        f"'{model}' is checkpoint {model_hash} (retrained or re-bundled since). Episodes "
                        "of two checkpoints are not one dataset: choose another output path, or pass "
                        "--overwrite to delete them and generate again.")


def remove_partial_writes(out: str, lease: Lease, committed: Iterable[EpisodeRecord] | None = None) -> None:
    """Delete what killed writers left behind: local staging copies, and with `committed` given,
    s3:// episode uploads that no commit marker names. Only the lease holder may (checked
    first), and only while none of its replicas runs: to anyone else, a live writer's work in
    progress looks exactly like a dead writer's leftovers.

    S3 orphans are removed only at the end of a run (the driver passes `committed`), never when
    a run starts: a writer of an interrupted earlier run could still be finishing its upload."""
    lease.verify()
    for sub in (EPISODES_DIR, COMMITS_DIR):
        removed = storage.remove_stale_staging(storage.join(out, sub))
        if removed:
            log.info("removed %d partial writes of interrupted writers in %s/", removed, sub)
    if committed is not None:
        remove_orphan_uploads(out, committed, lease)


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
