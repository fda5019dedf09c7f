"""Running a job's pending groups on Ray: a fixed pool of replica actors fed one group at a time.

Why plain actors rather than Ray Data's `map_batches(ActorPoolStrategy)`: what the job needs
from Ray is one model load per replica, restarts of a killed replica with its group retried,
fractional CPU/GPU placement and "next group to whichever replica is free". Actor options give
the first three (`max_restarts=-1, max_task_retries=-1`: Ray restarts the actor and re-runs its
call); the last is the ~20-line loop below. The records are a few hundred bytes, so Ray Data's
streaming and backpressure buy nothing, while its executor cost seconds of start-up per job and
passes its own actor-constructor arguments through the object store, which Ray 2.60 reports as
an error line on every run (ray-project/ray#57733). Resume rests on our commits (part records) anyway
(idempotent writes, committed groups filtered out before anything is submitted).

While an embedded Ray starts (6-14 s on a small machine) the driver, which loaded the model in
preflight, rolls groups itself until the first replica is ready; see `LeadReplica`.

A replica rolls one group at a time and writes the group's part of the datasets behind its rolling,
on a thread, while the next group rolls (`WorldModelReplica(write_behind=True)`); a replica with
no group left is asked to `flush`, and the loop ends when every part is written. If the loop ends
any other way (Ctrl-C, a stop, an error), the replicas are killed and awaited (on this node, until
their processes have exited), so no part written behind lands after the driver has stopped owning
the output.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pipeline import ray_connect
from schemas import EpisodeRecord, EpisodeSpec, JobSpec, SpecError

if TYPE_CHECKING:
    from workers.scoring import PlausibilityCheck, Scorer

log = logging.getLogger(__name__)
WAIT_S = 0.1  # how often the loop looks at the lead replica between Ray results
SIGNAL_WAIT_S = 0.5  # the longest the loop waits on Ray before it lets Python handle signals
# Upper bounds: each wait ends as soon as the lead has stopped / the replicas' processes have
# exited. A lead that is writing a part finishes it first (it cannot abandon one half way), which
# on a loaded 2-core machine can take seconds. A stop is turned into SIGKILL after a few seconds
# anyway (RAY_JOB_STOP_WAIT_TIME_S).
LEAD_EXIT_WAIT_S = 10.0  # how long an interrupted run waits for its lead replica to stop
STOP_WAIT_S = 15.0  # how long an ended run waits for its killed replicas to be gone


class LeadReplica:
    """The driver's own replica, rolling groups in a thread until a Ray replica is ready.

    It reuses the model preflight loaded, so the first episodes are committed while the
    embedded Ray and the replica processes are still starting. Its episodes are the bytes a Ray
    replica makes: CPU, as many torch threads as Ray gives a replica of `num_cpus`.
    """

    def __init__(self, spec: JobSpec, model: Any, queue: collections.deque[list[EpisodeSpec]],
                 scorer: Scorer | None = None, plausibility: PlausibilityCheck | None = None) -> None:
        self.spec, self.model, self.queue, self.scorer = spec, model, queue, scorer
        self.plausibility = plausibility
        self.stop = threading.Event()  # set when a Ray replica is ready: take no new group
        self.abandon = threading.Event()  # set when the job ends: drop the group being rolled
        self.done: collections.deque[tuple[list[str], str]] = collections.deque()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="iws-lead-replica", daemon=True)

    @staticmethod
    def usable(spec: JobSpec, address: str | None) -> bool:
        """Only where its bytes equal a replica's: an embedded Ray on this machine, on CPU."""
        return (ray_connect.embedded(address) and spec.resources.num_gpus == 0
                and spec.device in ("cpu", "auto"))

    def _run(self) -> None:
        import torch

        from workers.closed_loop import GroupAbandoned
        from workers.replica import WorldModelReplica

        threads = torch.get_num_threads()
        torch.set_num_threads(max(1, int(self.spec.resources.num_cpus)))  # Ray's OMP_NUM_THREADS
        try:
            replica = WorldModelReplica.with_model(self.spec.model_copy(update={"device": "cpu"}),
                                                   self.spec.output.path, self.model, self.scorer,
                                                   self.plausibility)
            replica.abandon = self.abandon.is_set
            while not self.stop.is_set():
                try:
                    group = self.queue.popleft()
                except IndexError:
                    return
                self.done.append(replica.roll_json(_group_json(group)))
        except GroupAbandoned:
            return
        except BaseException as error:  # noqa: BLE001 - re-raised in the driver's thread
            self.failure = error
        finally:
            torch.set_num_threads(threads)

    @property
    def busy(self) -> bool:
        return self.thread.is_alive()


def _group_json(group: list[EpisodeSpec]) -> str:
    return "[" + ",".join(e.model_dump_json() for e in group) + "]"


def _deliver(result: tuple[list[str], str], on_record: Callable[[EpisodeRecord], None]) -> None:
    """Hand `on_record` the episodes a replica reports committed; SpecError for its user error."""
    records, error = result
    if error:
        raise SpecError(f"a replica reported: {error}")
    for record in records:
        on_record(EpisodeRecord.model_validate_json(record))


def execute(spec: JobSpec, pending: list[list[EpisodeSpec]], *, address: str | None,
            on_record: Callable[[EpisodeRecord], None], model: Any = None,
            scorer: Scorer | None = None, plausibility: PlausibilityCheck | None = None) -> None:
    """Roll every pending group on a pool of replicas; `on_record` sees each committed episode
    (a replica writing behind reports a group once its part, the commit, is written).
    `model`: the WorldModel preflight loaded; given, the driver rolls groups itself while an
    embedded Ray starts (see LeadReplica). `scorer`: the filter's, resolved by preflight; each
    replica gets it as a constructor argument (pickled by reference: its module is imported there);
    `plausibility`, the task's plausibility check, likewise."""
    queue = collections.deque(pending)
    lead = (LeadReplica(spec, model, queue, scorer, plausibility)
            if model is not None and LeadReplica.usable(spec, address) else None)
    if lead is not None:
        lead.thread.start()
    started = False
    interrupted = False
    ray_connect.terminated.clear()
    try:
        started = ray_connect.connect(address)
        _dispatch(spec, queue, lead, on_record, scorer, plausibility)
    except (KeyboardInterrupt, SystemExit) as error:
        # Ctrl-C, or a stop: SIGTERM, which a connected Ray driver turns into sys.exit(15) (or,
        # inside ray.wait, SystemExit(1)); both reach the caller as KeyboardInterrupt. The
        # caller records what is committed before the process exits (which disconnects from Ray
        # anyway); a stop becomes SIGKILL after a few seconds (RAY_JOB_STOP_WAIT_TIME_S), so no
        # time goes to a clean shutdown first.
        interrupted = True
        if isinstance(error, SystemExit) and ray_connect.terminated.is_set():
            raise KeyboardInterrupt from None
        raise
    finally:
        if lead is not None:  # nothing written after the caller stops owning the output
            lead.stop.set()
            lead.abandon.set()
            # Interrupted, the process is about to exit (and be killed soon after a stop); a lead
            # busy writing a LeRobot part, which it cannot abandon half way, dies with it. Part
            # files are idempotent and their record is written last (workers/parts.py).
            lead.thread.join(timeout=LEAD_EXIT_WAIT_S if interrupted else None)
        if started and not interrupted:
            import ray

            ray.shutdown()


def _dispatch(spec: JobSpec, queue: collections.deque[list[EpisodeSpec]], lead: LeadReplica | None,
              on_record: Callable[[EpisodeRecord], None], scorer: Scorer | None = None,
              plausibility: PlausibilityCheck | None = None) -> None:
    """Start the replicas together, then hand each free one the next group until all are done."""
    import ray

    from workers.replica import WorldModelReplica

    actor = ray.remote(WorldModelReplica).options(
        num_cpus=spec.resources.num_cpus, num_gpus=spec.resources.num_gpus,
        max_restarts=-1, max_task_retries=-1)  # a killed replica restarts and reruns its group
    count = min(spec.replicas, len(queue))
    job = spec.model_dump_json()
    replicas: list[Any] = [actor.remote(job, spec.output.path, None, scorer, True, plausibility)  # handles
                           for _ in range(count)]
    # Asked before any group: a replica's calls run in order, so one that has not answered
    # this has not started rolling (and has written nothing) yet.
    processes = [replica.process.remote() for replica in replicas]
    try:
        _feed(replicas, queue, lead, on_record)
    except BaseException:
        _stop(replicas, processes)
        raise


def _feed(replicas: list[Any], queue: collections.deque[list[EpisodeSpec]], lead: LeadReplica | None,
          on_record: Callable[[EpisodeRecord], None]) -> None:
    """Hand each free replica the next group until none is left, then have each flush."""
    import ray

    running: dict[Any, Any] = {r.ready.remote(): r for r in replicas}  # ref -> replica
    flushes: set[Any] = set()  # refs of flush() calls
    while running or (lead is not None and (lead.busy or lead.done)):
        leading = lead is not None and lead.busy
        if running:
            # Never an unbounded wait: a SIGTERM (a stopped job) is handled only between waits.
            refs, _ = ray.wait(list(running), num_returns=1, timeout=WAIT_S if leading else SIGNAL_WAIT_S)
        else:  # every replica idle or gone, the lead still rolling the last groups
            refs = []
            if lead is not None:
                lead.thread.join(WAIT_S)
        if lead is not None:
            while lead.done:
                _deliver(lead.done.popleft(), on_record)
            if lead.failure is not None:
                raise lead.failure
        for ref in refs:
            replica = running.pop(ref)
            result = ray.get(ref)
            if isinstance(result, str):  # ready(): "" or the replica's user error
                if result:
                    raise SpecError(f"a replica reported: {result}")
                if lead is not None:
                    lead.stop.set()  # a replica is up: the driver stops taking groups
            else:  # roll_json() or flush(): the episodes committed since its last call
                _deliver(result, on_record)
                if ref in flushes:  # this replica's parts are written: it is done
                    flushes.discard(ref)
                    continue
            if queue:
                running[replica.roll_json.remote(_group_json(queue.popleft()))] = replica
            elif not isinstance(result, str):  # no group left: commit the last part
                flush = replica.flush.remote()
                running[flush] = replica
                flushes.add(flush)


def _stop(replicas: list[Any], processes: list[Any]) -> None:
    """Kill the replicas and wait until they are gone (at most STOP_WAIT_S): a part a replica
    was writing behind its rolling must not land once the driver has stopped owning the output
    (its files are idempotent and its record is written last, so a part cut short is simply made
    again by the next run). Ray reports a killed actor dead a moment before its process has
    exited (CI saw a part's files land after that), so a replica on this node is awaited by its
    process id; one on another node, by Ray's report."""
    import time

    import ray

    known, _ = ray.wait(processes, num_returns=len(processes), timeout=0)
    here = ray.get_runtime_context().get_node_id()
    local = []
    for ref in known:
        try:
            node, pid = ray.get(ref, timeout=0)
        except Exception:  # noqa: BLE001 - a replica that died already answers with an error
            continue
        if node == here:
            local.append(pid)
    for replica in replicas:
        ray.kill(replica, no_restart=True)
    deadline = time.monotonic() + STOP_WAIT_S
    gone = [replica.ready.remote() for replica in replicas]
    ray.wait(gone, num_returns=len(gone), timeout=STOP_WAIT_S)
    while local and time.monotonic() < deadline:
        local = [pid for pid in local if not _exited(pid)]
        if local:
            time.sleep(WAIT_S / 2)
    if local:
        log.warning("replica processes %s still running %.0f s after they were killed",
                    local, STOP_WAIT_S)


def _exited(pid: int) -> bool:
    """True once process `pid` has exited (a zombie not yet reaped by its parent has), or where
    /proc does not tell (then Ray's report is all the driver has)."""
    from workers.lease import process_start

    return not process_start(pid)
