"""The generation driver: spec -> preflight -> lease -> pending groups on Ray -> commits -> datasets
-> preview.gif and summary.md.

Frames never pass through here: replicas write each group's part of the datasets straight to
storage (its Zarr shard, with LeRobot output its LeRobot part too) and commit the group with the
part's record (workers/parts.py), and send back small EpisodeRecords for the progress bar; the
driver assembles the datasets from the parts' records (the Zarr dataset's index, LeRobot's
metadata). The part records on storage, not the records sent back, are the truth the driver
reads after each pass and checks at the end (exactly `episodes` committed, one per index).

The driver holds the output's lease (workers/lease.py) from before it touches the output until
it is done, so no second run cleans up under it. A resume trusts a part only with the files its
record lists (pipeline/generate/verify.py: a part whose shard fails is withdrawn and its group
rolled again; one whose LeRobot files fail is made again from its shard), and a group whose part
a pass did not commit (a replica killed while writing it) is rolled again by the next pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline.generate import outputs, verify
from pipeline.generate.consolidate import assemble_lerobot, assemble_zarr, check_parts
from pipeline.generate.expand import job_groups
from pipeline.generate.preflight import Plan, preflight
from pipeline.generate.preview import write_preview
from pipeline.generate.spec import spec_hash
from pipeline.generate.summary import RunStats, write_summary
from schemas import EpisodeRecord, EpisodeSpec, JobSpec, RunManifest, SpecError
from sim_model.data.shards import index_uri
from workers import parts
from workers.lease import Lease, hold
from workers.scoring import is_kept

log = logging.getLogger(__name__)

MANIFEST_EVERY_S = 5.0
REPAIR_PASSES = 3  # passes of rolling; a pass after the first makes what the one before left out


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
            take_over: bool = False, on_progress: Callable[[Progress], None] | None = None,
            verify_data: bool = False) -> RunManifest:
    """Generate (or resume) the job; returns the final manifest. Raises SpecError on a bad spec,
    LeaseHeld (a SpecError naming the owner) when another run owns the output; `take_over` takes
    it from that run even though its lease looks live (see workers/lease.py).

    A resume checks every part's files and the LeRobot copy's against their records (sizes) and
    makes again what fails (pipeline/generate/verify.py); `verify_data` also reads the data back
    against the committed checksums (as `iws verify` does).

    A finished run leaves OUT/preview.gif and OUT/summary.md beside the manifest."""
    began = time.monotonic()
    plan = preflight(spec)
    with hold(spec.output.path, job=spec.name, take_over=take_over) as lease:
        outputs.claim_output(spec, overwrite=overwrite, model_hash=plan.model_hash)
        outputs.remove_partial_writes(spec.output.path, lease)
        return _JobRun(plan, lease, on_progress, began, deep=verify_data).run(address)


class _JobRun:
    """One run of a job on an output whose lease it holds: the committed episodes, the progress
    counters and the manifest, through generate -> assemble passes."""

    def __init__(self, plan: Plan, lease: Lease, on_progress: Callable[[Progress], None] | None,
                 began: float, *, deep: bool = False) -> None:
        self.plan, self.spec, self.lease, self.on_progress = plan, plan.spec, lease, on_progress
        self.began = began  # time.monotonic() when run_job was called
        self.out = plan.spec.output.path
        self.digest, self.started = spec_hash(plan.spec), outputs.now()
        self.groups = job_groups(self.spec, self.plan.episodes)
        found = parts.read_parts(self.out)
        self.parts = verify.mark(self.out, found, verify.inspect(self.out, found, deep=deep), lease)
        self.done = self._commits()
        # Episodes the replicas reported committed in this pass (read back from storage after it).
        self.reported: dict[str, EpisodeRecord] = {}
        self.progress = Progress(total=self.spec.episodes, done=len(self.done), resumed=len(self.done))
        self.last_write = time.monotonic()

    def run(self, address: str | None) -> RunManifest:
        self.write_manifest()
        self._notify()
        for _ in range(REPAIR_PASSES):
            self.generate(address)
            if any(not self._finished(g) for g in self.groups):
                continue  # a part was cut short (a replica killed while it wrote): roll it again
            records = _check_complete(self.plan, self.done)
            kept = [r for r in records if is_kept(self.spec.filter, r.success, r.plausibility)]
            return self.export(records, kept)
        raise SpecError(f"job {self.spec.name}: groups of episodes were still uncommitted or their parts "
                        f"damaged after {REPAIR_PASSES} passes of making them again; check the storage under "
                        f"{self.out} (disk errors, another program writing there?).")

    def generate(self, address: str | None) -> None:
        """Roll every group not committed, have the part of every committed one made again where
        it is not current, then read the commits back and clear what killed writers left."""
        pending = [g for g in self.groups if not self._finished(g)]
        log.info("job %s: %d/%d episodes committed, %d groups to roll", self.spec.name, len(self.done),
                 self.spec.episodes, len(pending))
        if not pending:
            return
        from pipeline.generate.ray_exec import execute

        try:
            execute(self.spec, pending, address=address, on_record=self.on_record, model=self.plan.model,
                    scorer=self.plan.scorer, plausibility=self.plan.plausibility)
        finally:
            if not self.lease.lost:  # what is committed stays; a rerun resumes from here
                self.parts = parts.read_parts(self.out)
                self.done = self._commits()
                self.reported.clear()
                self.progress.done = len(self.done)
                self.write_manifest()
        # Left by replicas killed mid-write (now restarted) and by writers that lost a race.
        outputs.remove_partial_writes(self.out, self.lease)

    def _finished(self, group: list[EpisodeSpec]) -> bool:
        """The group committed, and its part current."""
        if any(e.episode_id not in self.done for e in group):
            return False
        records = [self.done[e.episode_id] for e in group]
        return parts.is_current(self.parts.get(parts.part_key(group)), self.spec, records)

    def on_record(self, record: EpisodeRecord) -> None:
        self.lease.raise_if_lost()  # taken over: stop now rather than write beside the new owner
        if record.episode_id not in self.done and record.episode_id not in self.reported:
            self.reported[record.episode_id] = record
            self.progress.done = len(self.done) + len(self.reported)
            self.progress.frames += record.length
        self._notify()
        if time.monotonic() - self.last_write > MANIFEST_EVERY_S:
            self.write_manifest()
            self.last_write = time.monotonic()

    def export(self, records: list[EpisodeRecord], kept: list[EpisodeRecord]) -> RunManifest:
        """Assemble the datasets from the parts (StaleParts if one is missing), then write the
        final manifest, the preview and the summary."""
        check_parts(self.spec, self.groups, self.done, self.parts)
        datasets = {"zarr": assemble_zarr(self.spec, self.groups, self.done, self.plan.features)}
        outputs.remove_legacy(self.out, self.lease)
        if "lerobot" in self.spec.output.formats and not kept:
            log.warning("no episode passed the filter; skipping the LeRobot export")
        elif "lerobot" in self.spec.output.formats:
            datasets["lerobot"] = assemble_lerobot(self.spec, self.groups, self.done, found=self.parts)
        manifest = self.write_manifest(outputs.now(), datasets, in_datasets=len(kept),
                                       index=index_uri(datasets["zarr"]))
        preview = write_preview(self.out, datasets["zarr"], title=self.spec.name)
        write_summary(self.spec, manifest, records, RunStats(
            wall_s=time.monotonic() - self.began, frames_made=self.progress.frames,
            resumed=self.progress.resumed, kept=len(kept)), preview=preview is not None)
        log.info("job %s done: %d episodes (%d in datasets), %d frames", self.spec.name, len(records),
                 len(kept), manifest.frames)
        return manifest

    def write_manifest(self, finished: str | None = None, datasets: dict[str, str] | None = None,
                       in_datasets: int | None = None, index: str | None = None) -> RunManifest:
        committed = {**self.reported, **self.done}
        manifest = outputs.manifest_for(self.spec, self.digest, self.plan.model_hash, committed.values(),
                                        self.started, finished, datasets, in_datasets, index)
        outputs.write_manifest(self.out, manifest)
        return manifest

    def _commits(self) -> dict[str, EpisodeRecord]:
        """The job's committed episodes: each group's, from its own part record (`self.parts`)."""
        done: dict[str, EpisodeRecord] = {}
        for group in self.groups:
            committed = parts.records_of(self.parts.get(parts.part_key(group)))
            done.update({e.episode_id: committed[e.episode_id] for e in group if e.episode_id in committed})
        return done

    def _notify(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress)
