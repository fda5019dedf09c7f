"""The job's output directory: its identity file, resume checks, and the run manifest.

    OUT/lease.json      which run owns the output now, until when (workers.lease)
    OUT/job.json        the spec that owns this output (a rerun must make the same episodes)
    OUT/episodes/, OUT/commits/   per-episode stores and commit markers of iws versions before
                        group commits; removed once a resume has made their groups again
    OUT/manifest.json   RunManifest (job-level facts and counts), rewritten atomically as the run
                        goes; per-episode records are in the dataset's index (OUT/dataset/index.parquet)
    OUT/dataset/        the Zarr dataset: shards/<key>.zarr written by the replicas, one per group
                        (each a Diffusion-Policy-layout EpisodeStore), index.parquet by the
                        driver's assembly (sim_model/data/shards.py)
    OUT/lerobot/        the LeRobot dataset: data and videos written by the replicas in parts,
                        metadata by the driver's assembly
    OUT/parts/          the parts' records, each the commit of one group of episodes, and the
                        LeRobot parts' metadata (workers/parts.py)
    OUT/lerobot.done.json   the LeRobot dataset's completion marker, written last
    OUT/preview.gif, OUT/summary.md   for a person, written when the run is finished

OUT is a local directory or an s3:// prefix; every access goes through sim_model.storage.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from datetime import UTC, datetime

from pipeline.generate.spec import RUN_ONLY_FIELDS, content_diff, content_hash
from schemas import EpisodeRecord, JobSpec, RunManifest, SpecError
from sim_model import storage
from sim_model.data.shards import SHARDS_DIR
from workers.lease import LEASE_FILE, Lease
from workers.parts import DATASET_DIR, LEROBOT_DIR, PARTS_DIR
from workers.writer import COMMITS_DIR, EPISODES_DIR

log = logging.getLogger(__name__)

JOB_FILE = "job.json"
MANIFEST_FILE = "manifest.json"
# Written by iws versions before the sharded dataset and before group commits; still the job's to delete.
_LEGACY_DIRS = ("dataset.zarr", "lerobot_parts", EPISODES_DIR, COMMITS_DIR)
LEROBOT_DONE = "lerobot.done.json"
PREVIEW_FILE = "preview.gif"
SUMMARY_FILE = "summary.md"
_OWNED_DIRS = (DATASET_DIR, LEROBOT_DIR, PARTS_DIR, *_LEGACY_DIRS)
_OWNED_FILES = (MANIFEST_FILE, PREVIEW_FILE, SUMMARY_FILE)  # and JOB_FILE, removed last


def lerobot_repo_id(job: str) -> str:
    """The repo id of the job's LeRobot copy (OUT/lerobot), which LeRobotDataset needs beside its root."""
    return f"iws/{job}"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _content(spec: JobSpec) -> dict:
    return spec.model_dump(mode="json", exclude=RUN_ONLY_FIELDS)


def clear_output(out: str) -> None:
    """Delete what a job wrote under OUT (only the entries a job owns, never anything else).
    Call it only on a job's output (`claim_output` checks): these names, in a directory that
    is not one, are the user's. JOB_FILE goes last, so that a clear cut short still leaves a
    directory recognisable as a job's output."""
    storage.remove_file(storage.join(out, LEROBOT_DONE))  # before the export it vouches for
    for name in _OWNED_DIRS:
        storage.remove_tree(storage.join(out, name))
    for name in (*_OWNED_FILES, JOB_FILE):
        storage.remove_file(storage.join(out, name))


def _refuse_foreign(out: str, job: str) -> None:
    """SpecError if OUT, which has no JOB_FILE, holds anything but this run's own lease: it is
    not a job's output, and a run there would delete or overwrite what it holds (episodes/,
    summary.md, ...), --overwrite included. On s3:// this lists the prefix."""
    # Dot names are iws's own temporary files and write probes (hidden locally by list_names).
    found = [n for n in storage.list_names(out) if n != LEASE_FILE and not n.startswith(".")]
    if not found:
        return
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    raise SpecError(f"output path {out} is not empty ({shown}) and has no {JOB_FILE}, so it is not "
                    "the output of an iws job: a run there could delete or overwrite those files, "
                    "and --overwrite deletes only what a job wrote, in a job's output. Choose a new "
                    f"or empty directory, e.g. --output {storage.join(out, job)}.")


def claim_output(spec: JobSpec, *, overwrite: bool, model_hash: str | None = None) -> None:
    """Make OUT this job's output: fresh, or a resumable earlier run of the same job made by the
    same model checkpoint (`model_hash`). Call it holding the output's lease (workers.lease).

    A job with more `episodes` than the output's may resume it (the job grows: new episodes are
    added, new parts written, metadata rewritten; only the last group's part, if it was partial,
    is made again). SpecError when OUT holds another job's episodes, naming the fields that
    differ, a larger job than the spec's, or episodes of another checkpoint: `model: pusht` names whatever model is bundled, and a re-bundled or
    retrained model must not resume into a dataset made by its predecessor. SpecError too
    when OUT is not empty and has no JOB_FILE (not a job's output): nothing there is deleted,
    `overwrite` or not; `overwrite` clears only a job's output (`clear_output`).
    """
    out = spec.output.path
    job_text = storage.try_read_text(storage.join(out, JOB_FILE))
    if job_text is None:
        _refuse_foreign(out, spec.name)
    elif overwrite:
        clear_output(out)
        job_text = None
    if job_text is not None:
        old = job_record(out, job_text)
        if old.get("content_hash") != content_hash(spec):
            fields = content_diff(old.get("content", {}), _content(spec))
            if not _grows(old.get("content", {}), _content(spec), fields):
                raise SpecError(f"{out} holds episodes of a different job (fields that differ: "
                                f"{', '.join(fields) or 'unknown'}). Rerun with the original spec to "
                                "resume (or with more `episodes` to add to it), choose another output "
                                "path, or pass --overwrite to delete them.")
            log.info("%s: growing the job from %d to %d episodes; what is written stays", out,
                     old["content"]["episodes"], spec.episodes)
        _check_model(out, old.get("model_hash") or _manifest_model_hash(out), model_hash, spec.model)
    storage.write_atomic(storage.join(out, JOB_FILE), json.dumps({"job": spec.name, "content_hash": content_hash(spec),
                                              "model_hash": model_hash, "content": _content(spec),
                                              "spec": spec.model_dump(mode="json")}, indent=1))


def job_record(out: str, text: str) -> dict:
    """OUT/job.json as written by `claim_output`; SpecError naming it if it is empty or garbled:
    it says which job the output holds, and without it a run cannot tell whether it may resume."""
    try:
        found = json.loads(text)
    except json.JSONDecodeError as error:
        found, why = None, "is empty" if not text.strip() else f"is not JSON ({error})"
    else:
        why = "is not the record of a job (no 'content_hash' and 'content')"
    if isinstance(found, dict) and isinstance(found.get("content_hash"), str) and isinstance(found.get("content"), dict):
        return found
    raise SpecError(f"{storage.join(out, JOB_FILE)} {why}; it is damaged, or not a file iws wrote. It names "
                    "the job this output holds, so the run cannot tell whether it may resume here. Restore "
                    "it from a copy, pass --overwrite to delete what the job wrote and generate again, or "
                    "choose another output path.")


def _grows(old: dict, new: dict, fields: list[str]) -> bool:
    """Whether `new` is `old` with more episodes: the one change a finished or partial output
    takes without --overwrite (episode i is the same in both, pipeline/generate/expand.py)."""
    if fields != ["episodes"]:
        return False
    if new["episodes"] < old["episodes"]:
        raise SpecError(f"the output holds a job of {old['episodes']} episodes; a job can grow but not "
                        f"shrink to {new['episodes']}. Use a new output path for a smaller job, or "
                        "pass --overwrite to delete the episodes and start again.")
    return True


def _manifest_model_hash(out: str) -> str | None:
    """The checkpoint hash in OUT's manifest (outputs whose job.json predates its model_hash)."""
    uri = storage.join(out, MANIFEST_FILE)
    text = storage.try_read_text(uri)
    if text is None:
        return None
    try:  # read as JSON, not as a RunManifest: an older iws wrote it, with other fields
        manifest = json.loads(text)
    except json.JSONDecodeError:
        manifest = None
    if not isinstance(manifest, dict):
        raise SpecError(f"{uri} is damaged (not a JSON mapping), or not a file iws wrote. Delete it (the run "
                        "writes it again) and rerun.")
    return manifest.get("model_hash")


def _check_model(out: str, made_by: str | None, model_hash: str | None, model: str) -> None:
    if made_by is not None and model_hash is not None and made_by != model_hash:
        raise SpecError(f"{out} holds episodes made by model checkpoint {made_by}, and this run's model "
                        f"'{model}' is checkpoint {model_hash} (retrained or re-bundled since). Episodes "
                        "of two checkpoints are not one dataset: choose another output path, or pass "
                        "--overwrite to delete them and generate again.")


def remove_partial_writes(out: str, lease: Lease) -> None:
    """Delete the local staging copies killed writers left behind (s3:// has none: writers stage
    on local disk; a shard no part record names is removed by the assembly). Only the lease
    holder may (checked first), and only while none of its replicas runs: to anyone else, a
    live writer's work in progress looks exactly like a dead writer's leftovers."""
    lease.verify()
    for sub in (PARTS_DIR, storage.join(DATASET_DIR, SHARDS_DIR)):
        removed = storage.remove_stale_staging(storage.join(out, sub))
        if removed:
            log.info("removed %d partial writes of interrupted writers in %s/", removed, sub)


def remove_legacy(out: str, lease: Lease) -> None:
    """Once every group is committed by its part: delete what iws versions before group commits
    wrote per episode (OUT/episodes/, OUT/commits/), whose groups this run has made again."""
    lease.verify()
    for name in (EPISODES_DIR, COMMITS_DIR):
        uri = storage.join(out, name)
        if storage.exists(uri):
            storage.remove_tree(uri)
            log.info("removed %s/ (per-episode %s of an earlier iws version)", name,
                     "stores" if name == EPISODES_DIR else "commit markers")


def write_manifest(out: str, manifest: RunManifest) -> None:
    storage.write_atomic(storage.join(out, MANIFEST_FILE), manifest.model_dump_json(indent=1))


def manifest_for(spec: JobSpec, spec_digest: str, model_hash: str, records: Collection[EpisodeRecord],
                 started: str, finished: str | None = None, datasets: dict[str, str] | None = None,
                 in_datasets: int | None = None, index: str | None = None) -> RunManifest:
    return RunManifest(job_id=spec.name, spec_hash=spec_digest, model_hash=model_hash,
                       episodes_requested=spec.episodes, episodes_committed=len(records),
                       episodes_in_datasets=in_datasets, started=started, finished=finished,
                       frames=sum(r.length for r in records), datasets=datasets or {}, index=index)
