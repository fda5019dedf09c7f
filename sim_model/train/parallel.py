"""Data-parallel training steps over `torch.distributed` (gloo on CPU, NCCL on GPU); no Ray here.

The global batch of a step is drawn as `shards` equal shards, shard k from its own RNG keyed by
(seed, step, k), and the workers split the shards: with 2 shards, one worker computes both (its
gradients accumulate) and two workers compute one each (their gradients are summed by one
all-reduce). Both see the same samples and the same noise, so a run's numbers do not depend on
how many workers it has, only on its shard count, and a resumed run needs no saved RNG.

Why not `DistributedDataParallel`: its gradient hooks fire from `module.forward`, but the stage
losses call submodules directly (`net.encode`, `net.dynamics.predict`), and which parameters get
gradients varies by step (fed-back batches, the state head). One flat all-reduce after the
backward passes is what DDP would compute, and it lets the benchmark time the all-reduce apart.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist

from sim_model.precision import autocast
from sim_model.train.config import StageConfig
from sim_model.train.state import TrainRNG
from sim_model.train.task import Logs, Placement, StageTask


@dataclass
class StepTimes:
    """Seconds each step of this session spent in its parts (for benchmarks)."""

    compute_s: list[float] = field(default_factory=list)  # drawing, forward, backward of the shards
    all_reduce_s: list[float] = field(default_factory=list)  # includes waiting for slower workers


@dataclass
class Replica:
    """This process's place among the data-parallel workers of a stage."""

    rank: int
    world_size: int
    shards: int  # of every step's global batch; a multiple of world_size
    times: StepTimes = field(default_factory=StepTimes)
    # Called on every worker after each checkpoint (rank 0 has written it), with the step: e.g.
    # to copy the stage's directory to a storage that outlives the machine (Ray Train checkpoints).
    publish: Callable[[int], None] | None = None

    def __post_init__(self) -> None:
        if self.shards % self.world_size:
            raise ValueError(f"{self.shards} data shards cannot be split over {self.world_size} workers")

    @property
    def is_chief(self) -> bool:
        """Rank 0 writes checkpoints, metrics and samples, and shows progress."""
        return self.rank == 0

    @property
    def local_shards(self) -> range:
        per_worker = self.shards // self.world_size
        return range(self.rank * per_worker, (self.rank + 1) * per_worker)


def shard_rng(seed: int, step: int, shard: int) -> TrainRNG:
    """The RNG of one shard of one step: a pure function of (seed, step, shard)."""
    state = np.random.SeedSequence([seed, step, shard]).generate_state(1, np.uint64)[0]
    rng = TrainRNG.seeded(int(state >> np.uint64(1)))  # torch seeds must fit in int64
    rng.upcoming = lambda: shard_rng(seed, step + 1, shard).numpy  # for prefetching
    return rng


def shard_config(cfg: StageConfig, shards: int) -> StageConfig:
    """The stage config one shard's loss is built with: batch_size = global batch / shards, and
    as many more validation batches, so validation still scores val_batches x global batch."""
    return cfg.model_copy(update={"batch_size": cfg.batch_size // shards,
                                  "val_batches": cfg.val_batches * shards})


def parallel_step(task: StageTask, optimizer: torch.optim.Optimizer, *, step: int, progress: float,
                  lr: float, grad_clip: float, replica: Replica, place: Placement) -> tuple[float, Logs]:
    """One optimiser step over this worker's shards; every worker leaves it with the same
    weights. Each shard is drawn and scored by `task.loss` with the shard's own RNG. Returns the
    loss averaged over all shards of all workers, and this worker's last shard's logs."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    started = time.perf_counter()
    total, logs = 0.0, Logs()
    for shard in replica.local_shards:
        with autocast(place.device, place.bf16):
            loss, logs = task.loss(step, progress, shard_rng(place.seed, step, shard))
        # Every worker scales a shard's loss by the same 1/shards, so the summed gradients are
        # the same whichever worker computed which shard.
        scaled = loss / replica.shards
        total += scaled.item()
        scaled.backward()
    synced = time.perf_counter()
    total = _all_reduce_sum(task.params, total, replica, place.device)
    replica.times.compute_s.append(synced - started)
    replica.times.all_reduce_s.append(time.perf_counter() - synced)
    if not math.isfinite(total):  # after the all-reduce, so that every worker stops together
        raise FloatingPointError(f"{task.name}: loss became {total} at step {step}; lower the "
                                 "learning rate (--config) and resume.")
    torch.nn.utils.clip_grad_norm_(task.params, grad_clip)
    optimizer.step()
    return total, logs


def _all_reduce_sum(params: list[torch.nn.Parameter], loss: float, replica: Replica,
                    device: torch.device) -> float:
    """Sum every gradient and the loss over the workers in one flat all-reduce (a parameter a
    worker left without gradient this step counts as zero). Returns the summed loss."""
    if replica.world_size == 1:
        return loss
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1).float() for g in grads] + [torch.tensor([loss], device=device)])
    dist.all_reduce(flat)
    offset = 0
    for p, g in zip(params, grads, strict=True):
        p.grad = flat[offset:offset + g.numel()].view_as(g).to(g.dtype)
        offset += g.numel()
    return float(flat[-1])


def broadcast_parameters(module: torch.nn.Module, replica: Replica) -> None:
    """Rank 0's weights and buffers on every worker, as DDP does at construction."""
    if replica.world_size == 1:
        return
    for tensor in [*module.parameters(), *module.buffers()]:
        dist.broadcast(tensor.data, src=0)


def agreed(value: float, replica: Replica, device: torch.device) -> float:
    """Rank 0's `value` on every worker (e.g. elapsed time, so all anneal and stop alike)."""
    if replica.world_size == 1:
        return value
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    dist.broadcast(tensor, src=0)
    return float(tensor)
