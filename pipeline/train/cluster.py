"""`iws train --workers N`: one training stage on Ray Train's TorchTrainer, N data-parallel
workers (gloo on CPU, NCCL on GPU).

Every worker runs the single-process stage code (sim_model/train) with a `Replica`: it draws its
own shards of each step's global batch, gradients are summed by one all-reduce, and rank 0
writes the stage's state, metrics, samples and checkpoint into --out exactly as a single
process does. So --out must be one directory every worker sees (this machine, or a shared
filesystem on a cluster), and a later `iws train` with the same --out, any worker count,
resumes it. When a worker or its node is lost, Ray Train restarts the group (FailureConfig)
and every worker resumes from the last state rank 0 wrote.

With `storage` (a local path or s3://, one per run) the stage directory is also published there
as a Ray Train checkpoint after every checkpoint, so --out need not be shared: each node's
workers start from the newest published copy when theirs is older or missing, and the driver
takes the finished stage (state, metrics, checkpoint) from it into its own --out.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.ray_connect import connect
from schemas.errors import SpecError
from sim_model.storage.atomic import replace_dir, write_text
from sim_model.train.config import Stage, TrainConfig
from sim_model.train.run import stage_config, train_stage_worker

if TYPE_CHECKING:
    from ray.train import Checkpoint

    from sim_model.train.data import TrainingData

log = logging.getLogger(__name__)


def train_on_cluster(stage: Stage, data_path: str, out: str | os.PathLike[str], *, workers: int,
                     gpus_per_worker: float = 0, threads: int | None = None, address: str | None = None,
                     data_shards: int | None = None, max_failures: int = 3, storage: str | None = None,
                     config_file: str | None = None, preset: str | None = None, steps: int | None = None,
                     time_limit_s: float | None = None, init_from: str | None = None,
                     cache_mb: float | None = None, metrics_logs: tuple[str, ...] = (),
                     progress: bool = True) -> Path:
    """Train (or resume) one stage on `workers` Ray Train workers and return the exported
    checkpoint directory. `data_shards` (default: what the stage was started with, else
    `workers`) fixes how each step's batch is drawn, so any worker count dividing it trains
    the same numbers. `storage` (local or s3://) keeps Ray Train checkpoints of the stage for
    workers that do not share --out. Without `cache_mb` the driver loads the data once into Ray's
    object store (one copy per node); with it, each worker streams frames from the store (local
    path every node sees, or s3://) through its own cache of that many MiB."""
    import ray

    if workers < 1:
        raise SpecError(f"--workers must be at least 1, got {workers}.")
    out_dir = Path(out).resolve()  # every worker opens this same path
    data = data_path if "://" in data_path else str(Path(data_path).resolve())
    # The driver may have no GPU of its own: the workers check their device.
    cfg = stage_config(stage, out_dir, config_file=config_file, preset=preset, steps=steps,
                       init_from=init_from)
    shards = _data_shards(out_dir, stage, cfg, workers, data_shards)
    _preflight(stage, data, out_dir, init_from)
    cpus = float(threads or 1)
    started_ray = connect(address)
    try:
        _check_resources(ray.cluster_resources(), workers, cpus, gpus_per_worker)
        setup: dict[str, Any] = {"stage": stage, "data": data, "out": str(out_dir),
                                 "config": cfg.model_dump(mode="json"), "shards": shards,
                                 "threads": threads or 1, "time_limit_s": time_limit_s,
                                 "init_from": init_from, "progress": progress, "publish": storage is not None,
                                 "cache_mb": cache_mb, "metrics_logs": list(metrics_logs),
                                 "data_ref": None if cache_mb is not None else _put_data(data)}
        trainer = _torch_trainer(setup, workers, cpus, gpus_per_worker, storage or str(out_dir / "ray"),
                                 stage if storage else f"{stage}-{time.strftime('%Y%m%d-%H%M%S')}",
                                 max_failures)
        log.info("%s: %d workers, %d data shards, global batch %d", stage, workers, shards,
                 cfg.stage(stage).batch_size)
        result = trainer.fit()  # raises when the run failed for good
        if storage and result.checkpoint is not None:
            take_published(result.checkpoint, out_dir / stage)
    finally:
        if started_ray:
            ray.shutdown()
    if stage == "autoencoder":
        return out_dir / stage / "model"
    if storage:  # rank 0 wrote OUT/model on its own machine; the driver's is the published one
        replace_dir(out_dir / "model", partial(_copy_into, out_dir / stage / "model"))
    return out_dir / "model"


def _torch_trainer(setup: dict[str, Any], workers: int, cpus: float, gpus: float, storage: str,
                   name: str, max_failures: int) -> Any:
    """The TorchTrainer of one stage session. With an explicit storage the run's name is the
    stage's, so that a later session finds the checkpoints published there."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    return TorchTrainer(
        _train_worker, train_loop_config=setup,
        scaling_config=ScalingConfig(num_workers=workers, use_gpu=gpus > 0,
                                     resources_per_worker={"CPU": cpus, "GPU": gpus}),
        torch_config=TorchConfig(backend="nccl" if gpus else "gloo"),
        run_config=RunConfig(name=name, storage_path=storage,
                             checkpoint_config=CheckpointConfig(num_to_keep=2),
                             failure_config=FailureConfig(max_failures=max_failures)))


def _data_shards(out_dir: Path, stage: Stage, cfg: TrainConfig, workers: int,
                 requested: int | None) -> int:
    """The stage's shard count: asked for, else what its saved state was trained with, else the
    worker count; it must split the global batch evenly and be a multiple of the workers."""
    state = out_dir / stage / "state" / "trainer.json"
    stored = json.loads(state.read_text()).get("extra", {}).get("data_shards") if state.is_file() else None
    shards = requested or stored or workers
    if stored and shards != stored:
        log.warning("%s was trained with %d data shards; continuing with %d changes how batches are "
                    "drawn from here on", stage, stored, shards)
    batch = cfg.stage(stage).batch_size
    if batch % shards:
        raise SpecError(f"the {stage} stage's global batch of {batch} cannot be split into {shards} "
                        f"equal shards; use a --workers (or --data-shards) that divides {batch}, or set "
                        f"{stage.replace('-', '_')}.batch_size in --config.")
    if shards % workers:
        raise SpecError(f"{stage} draws each batch as {shards} data shards, which {workers} workers "
                        f"cannot share evenly; use --workers {_divisors(shards)} (or --data-shards).")
    return shards


def _preflight(stage: Stage, data: str, out_dir: Path, init_from: str | None) -> None:
    """What a worker would refuse, refused here once instead of in every retried worker."""
    from sim_model.train.data import open_training_store
    from sim_model.train.run import SOURCE, previous_stage

    if len(open_training_store(data)) == 0:
        raise SpecError(f"the episode store at {data} holds no complete episodes; collect data "
                        "first (e.g. `iws collect`).")
    if init_from is None and stage in SOURCE:
        previous_stage(stage, out_dir)


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def _check_resources(available: dict[str, float], workers: int, cpus: float, gpus: float) -> None:
    """Refuse a worker group the cluster can never place, rather than wait for it forever."""
    have_cpus, have_gpus = available.get("CPU", 0.0), available.get("GPU", 0.0)
    if workers * cpus > have_cpus:
        raise SpecError(f"--workers {workers} needs {workers * cpus:g} CPUs ({cpus:g} each, --threads) "
                        f"but the Ray cluster has {have_cpus:g}; lower --workers or --threads, or add "
                        "nodes.")
    if workers * gpus > have_gpus:
        raise SpecError(f"--workers {workers} with --gpus-per-worker {gpus:g} needs {workers * gpus:g} "
                        f"GPUs but the Ray cluster has {have_gpus:g}; lower --workers or "
                        "--gpus-per-worker.")


def _saved_step(stage_dir: Path) -> int:
    state = stage_dir / "state" / "trainer.json"
    return int(json.loads(state.read_text())["step"]) if state.is_file() else -1


def _copy_into(source: Path, target: Path) -> None:
    shutil.copytree(source, target, dirs_exist_ok=True)


def take_published(checkpoint: Checkpoint, stage_dir: Path) -> None:
    """Bring a published stage directory (state, metrics, exported checkpoint) into `stage_dir`
    when it is further on than the local one, or as far and with an export the local one lacks."""
    with checkpoint.as_directory() as directory:
        published = Path(directory)
        theirs, ours = _saved_step(published), _saved_step(stage_dir)
        newer_export = (published / "model").is_dir() and not (stage_dir / "model").is_dir()
        if theirs < ours or (theirs == ours and not newer_export):
            return
        log.info("taking the published %s state at step %d (local: %d)", stage_dir.name, theirs, ours)
        for name in ("state", "model"):
            if (published / name).is_dir():
                replace_dir(stage_dir / name, partial(_copy_into, published / name))
        if (published / "metrics.jsonl").is_file():
            write_text(stage_dir / "metrics.jsonl", (published / "metrics.jsonl").read_text())


def _train_worker(setup: dict[str, Any]) -> None:
    """One Ray Train worker: its rank, device and threads, then the stage code."""
    import ray.train
    import torch
    import torch.distributed as dist
    from ray.train import Checkpoint
    from ray.train.torch import get_device

    from sim_model.train.parallel import Replica

    torch.set_num_threads(setup["threads"])
    context = ray.train.get_context()
    replica = Replica(rank=context.get_world_rank(), world_size=context.get_world_size(),
                      shards=setup["shards"])
    stage_dir = Path(setup["out"]) / setup["stage"]
    if setup["publish"]:
        published = ray.train.get_checkpoint()
        # One copy per node, one node at a time (nodes may share a filesystem).
        for rank in range(replica.world_size):
            if published is not None and rank == replica.rank and context.get_local_rank() == 0:
                take_published(published, stage_dir)
            if replica.world_size > 1:
                dist.barrier()

        def publish(step: int) -> None:
            # Every rank reports (Ray Train waits for all of them); rank 0's copy is the one kept.
            ray.train.report({"step": step}, checkpoint=Checkpoint.from_directory(str(stage_dir))
                             if replica.is_chief else None)

        replica.publish = publish
    device = get_device()
    data = None if setup["data_ref"] is None else _shared_data(setup["data_ref"])
    train_stage_worker(setup["stage"], setup["data"], setup["out"], TrainConfig.model_validate(setup["config"]),
                       device=str(device), progress=setup["progress"], time_limit_s=setup["time_limit_s"],
                       init_from=setup["init_from"], replica=replica, data=data,
                       cache_mb=setup["cache_mb"], metrics_logs=tuple(setup["metrics_logs"]))


def _put_data(path: str) -> Any:
    """The episode store's arrays in Ray's object store, loaded once by the driver. Ray moves the
    object to each node once and every worker of a node maps the same arrays read-only
    (zero-copy): a node's memory holds one copy whatever its worker count. The reference travels
    in the trainer's config through Ray's own serialization, nothing of ours is pickled."""
    import ray

    from sim_model.train.data import TrainingData
    from sim_model.train.frames import StreamedFrames

    loaded = TrainingData.from_store(path)
    assert not isinstance(loaded.frames, StreamedFrames)  # loaded whole without a cache size
    return ray.put({"features": loaded.features, "frames": loaded.frames.numpy(),
                    "actions": loaded.actions, "states": loaded.states, "ends": loaded.ends})


def _shared_data(ref: Any) -> TrainingData:
    """The arrays `_put_data` stored, as this worker's TrainingData (read-only views)."""
    import warnings

    import numpy as np
    import ray
    import torch

    from sim_model.train.data import TrainingData

    arrays: dict[str, Any] = ray.get(ref)
    with warnings.catch_warnings():  # read-only by design: training never writes into its data
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        frames = torch.from_numpy(arrays["frames"])
    return TrainingData(arrays["features"], frames, np.asarray(arrays["actions"]), arrays["states"],
                        arrays["ends"])
