"""Running a job's pending groups on Ray.

Why Ray Data rather than hand-managed actors: `map_batches` with a callable class and
`ActorPoolStrategy(size=replicas)` gives one model load per actor, streaming backpressure
(groups are handed to whichever replica is free), actor restarts and task retries
(max_restarts=-1, max_task_retries=-1) when a replica process dies, and fractional CPU/GPU
placement — all of which we would otherwise rebuild. Ray Data's own checkpointing is not used:
retries are at-least-once anyway, so resume rests on our commit markers (idempotent writes,
committed groups filtered out before the dataset is built).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

from schemas import EpisodeRecord, EpisodeSpec, JobSpec, SpecError

log = logging.getLogger(__name__)


def connect(address: str | None) -> bool:
    """Join `address` / RAY_ADDRESS, or start an embedded local Ray. True if we started it."""
    import ray

    if ray.is_initialized():
        return False
    target = address or os.environ.get("RAY_ADDRESS")
    kwargs: dict[str, Any] = {"address": target}
    if not target:
        # Embedded Ray: workers import user callables ('my_policies:act') from the working
        # directory, as the driver does. A cluster gets code through its image or runtime_env.
        path = os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)
        kwargs = {"include_dashboard": False, "runtime_env": {"env_vars": {"PYTHONPATH": path}}}
    try:
        ray.init(logging_level=logging.WARNING, **kwargs)
    except ConnectionError as error:
        raise SpecError(f"cannot reach the Ray cluster at {target}: {error}. Check --address / "
                        "RAY_ADDRESS, or drop it to run on an embedded local Ray.") from None
    return True


@contextlib.contextmanager
def quiet_ray_data(show_progress: bool) -> Iterator[None]:
    """Ray Data's own progress bars off while we draw ours; restored afterwards."""
    from ray.data import DataContext

    ctx = DataContext.get_current()
    saved = (ctx.enable_progress_bars, ctx.print_on_execution_start)
    ctx.enable_progress_bars = show_progress
    ctx.print_on_execution_start = show_progress
    try:
        yield
    finally:
        ctx.enable_progress_bars, ctx.print_on_execution_start = saved


def execute(spec: JobSpec, pending: list[list[EpisodeSpec]], *, address: str | None,
            on_record: Callable[[EpisodeRecord], None], show_ray_progress: bool = False) -> None:
    """Roll every pending group on a pool of replicas; `on_record` sees each committed episode."""
    import ray
    from ray.data import ActorPoolStrategy

    from workers.replica import WorldModelReplica

    started = connect(address)
    interrupted = False
    try:
        with quiet_ray_data(show_ray_progress):
            rows = [{"episodes": json.dumps([e.model_dump(mode="json") for e in g])} for g in pending]
            items = ray.data.from_items(rows, override_num_blocks=len(rows))  # one group per block
            ds = items.map_batches(
                WorldModelReplica,
                fn_constructor_kwargs={"job": spec.model_dump_json(), "out": spec.output.path},
                batch_size=1, batch_format="numpy",
                compute=ActorPoolStrategy(size=min(spec.replicas, len(rows))),
                num_cpus=spec.resources.num_cpus, num_gpus=spec.resources.num_gpus)
            for row in ds.iter_rows():
                if row["error"]:
                    raise SpecError(f"a replica reported: {row['error']}")
                on_record(EpisodeRecord.model_validate_json(str(row["record"])))
    except (KeyboardInterrupt, SystemExit):
        # Ctrl-C, or a stop: SIGTERM, which a connected Ray driver turns into sys.exit(15). The
        # caller records what is committed before the process exits (which disconnects from Ray
        # anyway); a stop becomes SIGKILL after a few seconds (RAY_JOB_STOP_WAIT_TIME_S), so no
        # time goes to a clean shutdown first.
        interrupted = True
        raise
    finally:
        if started and not interrupted:
            ray.shutdown()
