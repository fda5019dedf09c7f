"""The generation driver: spec -> preflight -> pending groups on Ray -> commits -> datasets.

Frames never pass through here: replicas write episodes straight to storage and send back small
EpisodeRecords. The commit markers on storage, not the records, are the truth the driver checks
at the end (exactly `episodes` committed, one per index).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline.generate import outputs
from pipeline.generate.consolidate import consolidate, export_lerobot
from pipeline.generate.expand import groups
from pipeline.generate.preflight import Plan, preflight
from pipeline.generate.spec import spec_hash
from schemas import EpisodeRecord, JobSpec, RunManifest
from workers.scoring import is_kept
from workers.writer import committed_records

log = logging.getLogger(__name__)

MANIFEST_EVERY_S = 5.0


@dataclass
class Progress:
    """Live counters handed to the progress callback after every committed episode."""

    total: int
    done: int
    frames: int = 0  # frames made by this run
    started: float = field(default_factory=time.monotonic)
    resumed: int = 0  # episodes already committed when this run began

    @property
    def frames_per_s(self) -> float:
        return self.frames / max(time.monotonic() - self.started, 1e-9)

    @property
    def eta_s(self) -> float | None:
        made = self.done - self.resumed
        if made <= 0:
            return None
        return (time.monotonic() - self.started) / made * (self.total - self.done)


class IncompleteJobError(RuntimeError):
    """The run ended without exactly one committed episode per index (should never happen)."""


def _check_complete(plan: Plan, records: dict[str, EpisodeRecord]) -> list[EpisodeRecord]:
    wanted = {e.episode_id: e.index for e in plan.episodes}
    mine = sorted((r for k, r in records.items() if k in wanted), key=lambda r: r.index)
    indices = [r.index for r in mine]
    if indices != list(range(plan.spec.episodes)) or any(wanted[r.episode_id] != r.index for r in mine):
        missing = sorted(set(range(plan.spec.episodes)) - set(indices))
        raise IncompleteJobError(f"job {plan.spec.name} ended with {len(mine)} of {plan.spec.episodes} "
                                 f"episodes committed (missing indices {missing[:10]}); rerun to finish.")
    return mine


def run_job(spec: JobSpec, *, address: str | None = None, overwrite: bool = False,
            on_progress: Callable[[Progress], None] | None = None,
            show_ray_progress: bool = False) -> RunManifest:
    """Generate (or resume) the job; returns the final manifest. Raises SpecError on a bad spec."""
    plan = preflight(spec)
    outputs.claim_output(spec, overwrite=overwrite)
    out, digest, started = spec.output.path, spec_hash(spec), outputs.now()
    wanted = {e.episode_id for e in plan.episodes}
    done = {k: r for k, r in committed_records(out).items() if k in wanted}
    pending = [g for g in groups(plan.episodes, spec.batch_size) if any(e.episode_id not in done for e in g)]
    progress = Progress(total=spec.episodes, done=len(done), resumed=len(done))
    log.info("job %s: %d/%d episodes committed, %d groups to roll", spec.name, len(done),
             spec.episodes, len(pending))

    def write_manifest(finished: str | None = None, datasets: dict[str, str] | None = None) -> RunManifest:
        manifest = outputs.manifest_for(spec, digest, plan.model_hash, list(done.values()), started,
                                        finished, datasets)
        outputs.write_manifest(out, manifest)
        return manifest

    last_write = time.monotonic()

    def on_record(record: EpisodeRecord) -> None:
        nonlocal last_write
        if record.episode_id not in done:
            done[record.episode_id] = record
            progress.done, progress.frames = len(done), progress.frames + record.length
        if on_progress is not None:
            on_progress(progress)
        if time.monotonic() - last_write > MANIFEST_EVERY_S:
            write_manifest()
            last_write = time.monotonic()

    write_manifest()
    if on_progress is not None:
        on_progress(progress)
    if pending:
        from pipeline.generate.ray_exec import execute

        try:
            execute(spec, pending, address=address, on_record=on_record,
                    show_ray_progress=show_ray_progress)
        finally:
            done.update({k: r for k, r in committed_records(out).items() if k in wanted})
            write_manifest()  # what is committed stays; a rerun resumes from here
        # Left by replicas killed mid-write (now restarted) and by writers that lost a race.
        outputs.remove_partial_writes(out, done.values())
    records = _check_complete(plan, done)
    kept = [r for r in records if is_kept(spec.filter, r.success)]
    zarr_uri, changed = consolidate(out, kept, plan.features)
    datasets = {"zarr": zarr_uri}
    if "lerobot" in spec.output.formats and not kept:
        log.warning("no episode passed the filter; skipping the LeRobot export")
    elif "lerobot" in spec.output.formats:
        datasets["lerobot"] = export_lerobot(spec, zarr_uri, refresh=changed)
    manifest = write_manifest(outputs.now(), datasets)
    log.info("job %s done: %d episodes (%d in datasets), %d frames", spec.name, len(records), len(kept),
             manifest.frames)
    return manifest
