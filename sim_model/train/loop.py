"""The optimisation loop shared by all stages: schedule, bf16 autocast, validation, samples,
resumable checkpoints, progress bar, time limit; alone or as one of several data-parallel
workers (parallel.py)."""

from __future__ import annotations

import logging
import math
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
from tqdm import tqdm

from sim_model.precision import autocast
from sim_model.train.average import WeightAverage
from sim_model.train.config import StageConfig
from sim_model.train.metrics_log import MetricsLog
from sim_model.train.parallel import Replica, agreed, broadcast_parameters, parallel_step
from sim_model.train.state import TrainerState, TrainRNG, load_average, load_state, save_state

log = logging.getLogger(__name__)
Logs = dict[str, float]


@dataclass
class StageTask:
    """What one stage trains and how it scores itself."""

    name: str
    params: list[torch.nn.Parameter]
    # (step, progress in [0, 1], rng) -> loss, logs; progress is what the schedule anneals on
    loss: Callable[[int, float, TrainRNG], tuple[torch.Tensor, Logs]]
    validate: Callable[[], Logs]  # deterministic: fixed draws every call
    samples: Callable[[Path], None]  # write a PNG to the given path


@dataclass
class LoopResult:
    trainer: TrainerState
    finished: bool
    val: Logs
    stopped_early: bool = False  # by the time limit
    average: WeightAverage | None = None  # with cfg.ema > 0: what the stage exports


def hardware(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            name = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), name)
    except OSError:
        pass
    return f"cpu: {name}, {torch.get_num_threads()} threads"


def session_progress(cfg: StageConfig, step: int, elapsed_s: float, time_limit_s: float | None,
                     resumed_at: float) -> float:
    """Fraction of the stage done: the larger of steps done and time used. A resumed run
    continues from the progress it had reached (`resumed_at`) and spreads what is left over this
    session's time limit, so the learning rate never jumps back up across sessions."""
    done = step / cfg.steps
    if time_limit_s:
        done = max(done, resumed_at + (1 - resumed_at) * elapsed_s / time_limit_s)
    return min(1.0, max(done, resumed_at))


def learning_rate(cfg: StageConfig, step: int, progress: float) -> float:
    """Linear warm-up, constant, then linear decay to 10% over the final `decay_fraction` of
    progress (the larger of steps done and time-limit used, so a time-limited run anneals too)."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    decay_start = 1 - cfg.decay_fraction
    if progress < decay_start or cfg.decay_fraction == 0:
        return cfg.lr
    return cfg.lr * (1 - 0.9 * min(1.0, (progress - decay_start) / cfg.decay_fraction))


def run_loop(net: torch.nn.Module, task: StageTask, cfg: StageConfig, stage_dir: Path, *,
             seed: int, device: torch.device, bf16: bool, progress: bool = True,
             time_limit_s: float | None = None, replica: Replica | None = None,
             metrics_logs: tuple[str, ...] = ()) -> LoopResult:
    """Train `task.params` to cfg.steps, resuming from stage_dir/state if it exists. With a
    `replica`, this process is one data-parallel worker: every worker resumes from the same
    state and steps in lockstep; rank 0 alone writes state, metrics and samples."""
    chief = replica is None or replica.is_chief
    optimizer = torch.optim.AdamW(task.params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    rng = TrainRNG.seeded(seed)
    state_dir = stage_dir / "state"
    trainer = TrainerState()
    if (state_dir / "trainer.json").is_file():
        trainer = load_state(state_dir, net, optimizer, rng)
        log.info("%s: resuming at step %d from %s", task.name, trainer.step, state_dir)
    machine = hardware(device)
    if replica is not None:
        broadcast_parameters(net, replica)
        trainer.extra["data_shards"] = replica.shards
        machine = f"{replica.world_size} workers x {machine}"
    average = None
    if cfg.ema > 0:  # after the weights are final: a fresh average starts at them
        trained = {id(p) for p in task.params}
        average = WeightAverage({n: p for n, p in net.named_parameters() if id(p) in trained}, cfg.ema)
        average.restore(load_average(state_dir))
    if machine not in trainer.hardware:
        trainer.hardware.append(machine)
    # metrics.jsonl, and the CSV / TensorBoard logs asked for (refused here, before any step)
    metrics = MetricsLog(stage_dir, task.name, metrics_logs if chief else (),
                         announce_of=cfg.steps if progress and chief and replica is not None else None)
    val: Logs = dict(trainer.extra.get("val", {}))
    resumed_at = float(trainer.extra.get("progress", 0.0))
    done = resumed_at
    started, session_start_wall = time.monotonic(), trainer.wall_time_s
    # A worker's output reaches the Ray driver as lines: progress there is a line per record.
    bar = tqdm(total=cfg.steps, initial=trainer.step, desc=task.name,
               disable=not (progress and chief) or replica is not None, dynamic_ncols=True)

    def elapsed() -> float:
        """Seconds of this session; rank 0's on every worker when the time limit steers."""
        seconds = time.monotonic() - started
        return seconds if replica is None or time_limit_s is None else agreed(seconds, replica, device)

    def checkpoint() -> None:
        if not chief:
            return
        trainer.wall_time_s = session_start_wall + time.monotonic() - started
        trainer.extra["val"] = val
        trainer.extra["progress"] = done
        save_state(state_dir, net, optimizer, trainer, rng, average)

    if trainer.step == 0 and chief:  # the starting point, so progress can be judged against it
        val = _periodic(net, task, cfg, stage_dir, 0, device, bf16, val, {}, float("nan"), metrics,
                        force_val=True)
    net.train()
    try:
        while trainer.step < cfg.steps:
            done = session_progress(cfg, trainer.step, elapsed(), time_limit_s, resumed_at)
            if replica is None:
                loss, logs = _step(task, cfg, optimizer, trainer.step, done, rng, device, bf16)
            else:
                loss, logs = parallel_step(partial(task.loss, trainer.step, done), task.params, optimizer,
                                           learning_rate(cfg, trainer.step, done), cfg.grad_clip,
                                           trainer.step, seed, replica, device, bf16, task.name)
            if average is not None:
                average.update()
            trainer.step += 1
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}", **{k: f"{v:.3g}" for k, v in val.items() if k == "val_loss"})
            if chief:
                val = _periodic(net, task, cfg, stage_dir, trainer.step, device, bf16, val, logs, loss, metrics)
            out_of_time = time_limit_s is not None and elapsed() >= time_limit_s
            if trainer.step % cfg.checkpoint_every == 0 or trainer.step == cfg.steps or out_of_time:
                checkpoint()
                if replica is not None and replica.publish is not None:
                    replica.publish(trainer.step)
            if out_of_time:
                log.info("%s: time limit reached at step %d of %d; the stage's checkpoint is usable "
                         "now, and rerunning continues to %d", task.name, trainer.step, cfg.steps, cfg.steps)
                if trainer.step % cfg.val_every and chief:  # the exported model should carry a fresh score
                    val = _periodic(net, task, cfg, stage_dir, trainer.step, device, bf16, val, logs,
                                    loss, metrics, force_val=True, force_sample=True)
                    checkpoint()
                break
    except KeyboardInterrupt:
        checkpoint()
        raise
    finally:
        bar.close()
        metrics.close()
        net.eval()
    trainer.wall_time_s = session_start_wall + time.monotonic() - started
    return LoopResult(trainer, trainer.step >= cfg.steps, val, stopped_early=trainer.step < cfg.steps,
                      average=average)


def _step(task: StageTask, cfg: StageConfig, optimizer: torch.optim.Optimizer, step: int, done: float,
          rng: TrainRNG, device: torch.device, bf16: bool) -> tuple[float, Logs]:
    """One optimiser step; returns the loss and the task's logs."""
    for group in optimizer.param_groups:
        group["lr"] = learning_rate(cfg, step, done)
    with autocast(device, bf16):
        loss, logs = task.loss(step, done, rng)
    value = loss.item()
    if not math.isfinite(value):
        raise FloatingPointError(f"{task.name}: loss became {value} at step {step}; lower the "
                                 "learning rate (--config) and resume.")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(task.params, cfg.grad_clip)
    optimizer.step()
    return value, logs


def _periodic(net: torch.nn.Module, task: StageTask, cfg: StageConfig, stage_dir: Path, step: int,
              device: torch.device, bf16: bool, val: Logs, logs: Logs, loss: float, metrics: MetricsLog,
              force_val: bool = False, force_sample: bool = False) -> Logs:
    """Validation, metrics log and sample images when their intervals come round."""
    is_val = force_val or step % cfg.val_every == 0 or step == cfg.steps
    is_sample = force_sample or (step > 0 and (step % cfg.sample_every == 0 or step == cfg.steps))
    if not (is_val or is_sample):
        return val
    net.eval()
    try:
        with torch.no_grad(), autocast(device, bf16):
            if is_val:
                val = task.validate()
                record = {"step": step, **({"loss": loss} if math.isfinite(loss) else {}), **logs, **val}
                metrics.write(record)
                log.debug("%s step %d: %s", task.name, step, record)
            if is_sample:
                (stage_dir / "samples").mkdir(exist_ok=True)
                task.samples(stage_dir / "samples" / f"step_{step:07d}.png")
    finally:
        net.train()
    return val
