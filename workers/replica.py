"""WorldModelReplica: loads a checkpoint once, then rolls fixed groups of episodes in lockstep.

It is a plain class, not a Ray actor: the driver makes each replica one
(pipeline/generate/ray_exec.py; restarted if killed, its call retried) and hands groups to
whichever replica is free, and rolls groups in-process with one while Ray starts. Only
`process`, which the driver calls on an actor, imports Ray (inside the method), so the class
loads and rolls without a Ray runtime, as that in-process replica does. One call is one
*group*: the JSON list of EpisodeSpecs that always roll together, so a retried group replays
exactly the same batch and writes byte-identical episodes.

A group is committed by its part (workers/parts.py): its files, then one conditional create of
its record. A Ray replica writes each group's part *behind* its rolling (`write_behind`): the
call returns the group's records once it is rolled, and the part (the commit) is written on a
thread of the replica while the next group rolls. At most one part is in flight; the next
group's part, and `flush` (which the driver calls before it assembles the datasets), wait for
it. A part cut short (the replica killed) leaves its group uncommitted: the driver, which reads
the commits back from storage after each pass, has it rolled again.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from schemas import EpisodeMeta, EpisodeRecord, EpisodeSpec, JobSpec, PartRecord, SpecError
from sim_model.data.episode import Episode
from sim_model.data.shards import shard_uri
from workers import parts
from workers.actions import GroupActions, make_action_source
from workers.closed_loop import ClosedLoopRollout, roll_closed_loop
from workers.scoring import (
    PlausibilityCheck,
    Scorer,
    check_episode,
    import_scorer,
    is_kept,
    score_episode,
)
from workers.writer import episode_features, episode_record

if TYPE_CHECKING:
    from sim_model.world_model import WorldModel

log = logging.getLogger(__name__)


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when this process can see a GPU, else 'cpu'."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class WorldModelReplica:
    """One model replica. `roll_json` maps a group to the records of its episodes."""

    def __init__(self, job: str, out: str, model: WorldModel | None = None,
                 scorer: Scorer | None = None, write_behind: bool = False,
                 plausibility: PlausibilityCheck | None = None) -> None:
        self.job = JobSpec.model_validate_json(job)
        self.out = out
        self.abandon: Callable[[], bool] | None = None  # polled every step; True: closed_loop.GroupAbandoned
        # write_behind: each group's part is written on a thread while the next group rolls.
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="iws-part") if write_behind else None
        self._writing: Future[None] | None = None  # the part in flight
        self._committed: collections.deque[EpisodeRecord] = collections.deque()  # not yet reported
        # A user error (bad checkpoint, policy, scorer) is reported as a value, not raised: Ray
        # wraps exceptions in its own types and keeps only their text.
        self.error = ""
        try:
            self._setup(model, scorer, plausibility)
        except SpecError as error:
            self.error = str(error)

    @classmethod
    def with_model(cls, job: JobSpec, out: str, model: WorldModel,
                   scorer: Scorer | None = None,
                   plausibility: PlausibilityCheck | None = None) -> WorldModelReplica:
        """A replica around a model already loaded (on job.device), e.g. the one preflight loaded."""
        return cls(job.model_dump_json(), out, model, scorer, plausibility=plausibility)

    def _setup(self, model: WorldModel | None, scorer: Scorer | None,
               plausibility: PlausibilityCheck | None) -> None:
        from sim_model.world_model import WorldModel

        self.device = resolve_device(self.job.device)
        self.wm = model if model is not None else WorldModel.load(self.job.model, device=self.device)
        self.features = episode_features(self.wm.features, self.wm.has_state)
        self.sources = {name: make_action_source(cfg, self.wm.features, self.device)
                        for name, cfg in self.job.action_sources.items()}
        # The driver hands over the filter's scorer (pipeline.tasks.registry.resolve_scorer);
        # without one, a 'module:function' in the spec is imported here.
        if scorer is None and self.job.filter is not None and self.job.filter.scorer is not None:
            scorer = import_scorer(self.job.filter.scorer)
        self.scorer = scorer
        # The task's plausibility check, resolved by the driver too (None: not asked for).
        self.plausibility = plausibility
        log.info("replica ready: model %s on %s", self.wm.checkpoint_hash, self.device)

    def ready(self) -> str:
        """"" once the model is loaded, else the user error that stopped it (bad checkpoint...)."""
        return self.error

    def process(self) -> tuple[str, int]:
        """(Ray node id, process id) of this replica: a driver that kills it waits for the
        process itself to be gone (pipeline/generate/ray_exec.py)."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()

    def roll_json(self, group: str) -> tuple[list[str], str]:
        """Group JSON (a list of EpisodeSpecs) -> (the EpisodeRecord JSONs of every episode
        committed since the last call, ""): with write_behind, the group before this one's, whose
        part this call waited for; else this group's. On a user error ([], the message)."""
        try:
            if self.error:
                raise SpecError(self.error)
            specs = [EpisodeSpec.model_validate(item) for item in json.loads(group)]
            self.roll_group(specs)
            return self._drain(), ""
        except SpecError as error:
            return [], str(error)

    def flush(self) -> tuple[list[str], str]:
        """Wait for the part in flight: (the records it committed, as from `roll_json`, ""),
        or ([], the user error that stopped it; other errors are raised)."""
        try:
            self._wait_for_part()
            return self._drain(), ""
        except SpecError as error:
            return [], str(error)

    def _drain(self) -> list[str]:
        records = []
        while self._committed:
            records.append(self._committed.popleft().model_dump_json())
        return records

    def _wait_for_part(self) -> None:
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()  # the part record, or the writer's error

    def roll_group(self, specs: list[EpisodeSpec]) -> list[EpisodeRecord]:
        """Roll a group in lockstep and commit it with its part of the datasets (workers/parts.py;
        with write_behind, on the writer thread after this returns). A committed group is not
        rolled again: its part, if not current, is made again from its shard. Rows committed
        before (a group that grew) keep their records and data."""
        key = parts.part_key(specs)
        previous = parts.read_parts_of(self.out, key)
        committed = parts.records_of(previous)
        if all(s.episode_id in committed for s in specs):
            records = [committed[s.episode_id] for s in specs]
            if parts.is_current(previous, self.job, records):
                self._committed.extend(records)
                return records
            stored = parts.stored_episodes(self.out, self.job, records, previous)
            if stored is not None:
                self._part(key, records, stored, previous)
                return records
            committed = {}  # its shard is damaged: the group is made again
        start = time.perf_counter()
        policy = GroupActions(self.sources, self.wm.features.action_dim)
        rollout = roll_closed_loop(self.wm, policy, specs, who="action source", abandon=self.abandon)
        shard = shard_uri(parts.dataset_root(self.out), key)
        records, episodes = [], []
        for row, spec in enumerate(specs):
            episode: Episode | None = self._episode(spec, row, rollout, policy.describe(row))
            record = committed.get(spec.episode_id)
            if record is not None and episode.checksum() != record.checksum:
                # Committed in a smaller batch (the job grew): its data is the committed one.
                kept = is_kept(self.job.filter, record.success, record.plausibility)
                found = parts.read_committed(self.out, record, previous) if kept else None
                if isinstance(found, str):
                    log.warning("episode %s: %s; it is made again", record.episode_id, found)
                    record = None
                else:
                    episode = found
            if record is None:
                assert episode is not None
                score, success = (None, None) if self.scorer is None else score_episode(self.scorer, episode)
                checks = None if self.plausibility is None else check_episode(self.plausibility, episode)
                record = episode_record(episode, spec.index, shard, score=score, success=success, checks=checks)
            records.append(record)
            episodes.append(episode)
        self._part(key, records, episodes, previous)
        log.debug("group %s..%s: %d episodes x %d steps in %.2fs", specs[0].episode_id,
                  specs[-1].episode_id, len(specs), specs[0].horizon, time.perf_counter() - start)
        return records

    def _part(self, key: int, records: list[EpisodeRecord], episodes: list[Episode | None],
              previous: PartRecord | None) -> None:
        """Have the group's part written and committed: now, or (write_behind) on the writer
        thread once the part before it is written."""
        self._wait_for_part()
        if self._writer is None:
            self._commit(key, records, episodes, previous)
        else:
            self._writing = self._writer.submit(self._commit, key, records, episodes, previous)

    def _commit(self, key: int, records: list[EpisodeRecord], episodes: list[Episode | None],
                previous: PartRecord | None) -> None:
        part = parts.write_part(self.out, self.job, key, episodes, records, self.features, previous=previous)
        self._committed.extend(part.records or ())

    def _episode(self, spec: EpisodeSpec, row: int, rollout: ClosedLoopRollout, label: str) -> Episode:
        meta = EpisodeMeta(episode_id=spec.episode_id, length=spec.horizon, task=self.job.task,
                           source=label, seed=spec.seed, model_hash=self.wm.checkpoint_hash,
                           job_id=spec.job_id, fps=self.features.fps,
                           info={"index": spec.index, "init": spec.init_ref,
                                 "action_source": spec.action_source})
        cams = self.features.camera_names
        return Episode(frames={c: rollout.frames[row, :, v] for v, c in enumerate(cams)},
                       action=rollout.actions[row], meta=meta,
                       state=None if rollout.state is None else rollout.state[row])
