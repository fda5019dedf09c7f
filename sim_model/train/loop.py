"""The optimisation loop shared by all stages: schedule, bf16 autocast, validation, samples,
resumable checkpoints, progress bar, time limit; alone or as one of several data-parallel
workers (parallel.py)."""

from __future__ import annotations

import logging
import math
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from sim_model.precision import autocast
from sim_model.train.average import WeightAverage
from sim_model.train.config import StageConfig
from sim_model.train.metrics_log import MetricsLog
from sim_model.train.parallel import Replica, agreed, broadcast_parameters, parallel_step
from sim_model.train.state import TrainerState, TrainRNG, load_average, load_state, save_state
from sim_model.train.task import Logs, Placement, StageTask

log = logging.getLogger(__name__)


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
    session = _Session(net, task, cfg, stage_dir, Placement(device, bf16, seed), time_limit_s,
                       replica, metrics_logs, announce=progress)
    # A worker's output reaches the Ray driver as lines: progress there is a line per record.
    bar = tqdm(total=cfg.steps, initial=session.trainer.step, desc=task.name,
               disable=not (progress and session.chief) or replica is not None, dynamic_ncols=True)
    try:
        session.train(bar)
    except KeyboardInterrupt:
        session.save()
        raise
    finally:
        bar.close()
        session.metrics.close()
        net.eval()
    trainer = session.trainer
    trainer.wall_time_s = session.wall_time()
    return LoopResult(trainer, trainer.step >= cfg.steps, session.val,
                      stopped_early=trainer.step < cfg.steps, average=session.average)


class _Session:
    """One session of a stage: the state it resumed (or started) from, what it logs, and the
    steps up to cfg.steps or the time limit."""

    def __init__(self, net: torch.nn.Module, task: StageTask, cfg: StageConfig, stage_dir: Path,
                 place: Placement, time_limit_s: float | None, replica: Replica | None,
                 metrics_logs: tuple[str, ...], announce: bool) -> None:
        self.net, self.task, self.cfg, self.stage_dir, self.place = net, task, cfg, stage_dir, place
        self.time_limit_s, self.replica = time_limit_s, replica
        self.chief = replica is None or replica.is_chief
        self.optimizer = torch.optim.AdamW(task.params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.rng = TrainRNG.seeded(place.seed)
        self.trainer = self._resume()
        self.average = self._weight_average()
        # metrics.jsonl, and the CSV / TensorBoard logs asked for (refused here, before any step)
        self.metrics = MetricsLog(stage_dir, task.name, metrics_logs if self.chief else (),
                                  announce_of=cfg.steps if announce and self.chief and replica is not None
                                  else None)
        self.val: Logs = dict(self.trainer.extra.get("val", {}))
        self.resumed_at = float(self.trainer.extra.get("progress", 0.0))
        self.done = self.resumed_at
        self.started, self.wall_before = time.monotonic(), self.trainer.wall_time_s

    def _resume(self) -> TrainerState:
        """The saved trainer state (weights, optimiser and RNG restored), or a fresh one; with
        a replica, rank 0's weights on every worker."""
        state_dir = self.stage_dir / "state"
        trainer = TrainerState()
        if (state_dir / "trainer.json").is_file():
            trainer = load_state(state_dir, self.net, self.optimizer, self.rng)
            log.info("%s: resuming at step %d from %s", self.task.name, trainer.step, state_dir)
        machine = hardware(self.place.device)
        if self.replica is not None:
            broadcast_parameters(self.net, self.replica)
            trainer.extra["data_shards"] = self.replica.shards
            machine = f"{self.replica.world_size} workers x {machine}"
        if machine not in trainer.hardware:
            trainer.hardware.append(machine)
        return trainer

    def _weight_average(self) -> WeightAverage | None:
        """With cfg.ema, the average of the trained weights (restored when saved); after the
        weights are final, so that a fresh average starts at them."""
        if self.cfg.ema == 0:
            return None
        trained = {id(p) for p in self.task.params}
        average = WeightAverage({n: p for n, p in self.net.named_parameters() if id(p) in trained},
                                self.cfg.ema)
        average.restore(load_average(self.stage_dir / "state"))
        return average

    def train(self, bar: tqdm) -> None:
        if self.trainer.step == 0 and self.chief:  # the starting point, to judge progress against
            self.periodic({}, float("nan"), force_val=True)
        self.net.train()
        while self.trainer.step < self.cfg.steps:
            logs, loss = self.step()
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}", **{k: f"{v:.3g}" for k, v in self.val.items()
                                                   if k == "val_loss"})
            if self.chief:
                self.periodic(logs, loss)
            if self._out_of_time():
                self._stop_for_time(logs, loss)
                break
            if self.trainer.step % self.cfg.checkpoint_every == 0 or self.trainer.step == self.cfg.steps:
                self.checkpoint()

    def step(self) -> tuple[Logs, float]:
        """One optimiser step (alone or as one data-parallel worker), the average updated."""
        trainer, cfg = self.trainer, self.cfg
        self.done = session_progress(cfg, trainer.step, self.elapsed(), self.time_limit_s, self.resumed_at)
        lr = learning_rate(cfg, trainer.step, self.done)
        if self.replica is None:
            loss, logs = _step(self.task, self.optimizer, trainer.step, self.done, lr, cfg.grad_clip,
                               self.rng, self.place)
        else:
            loss, logs = parallel_step(self.task, self.optimizer, step=trainer.step, progress=self.done,
                                       lr=lr, grad_clip=cfg.grad_clip, replica=self.replica,
                                       place=self.place)
        if self.average is not None:
            self.average.update()
        trainer.step += 1
        return logs, loss

    def _out_of_time(self) -> bool:
        return self.time_limit_s is not None and self.elapsed() >= self.time_limit_s

    def _stop_for_time(self, logs: Logs, loss: float) -> None:
        """The time limit is reached: checkpoint (with a fresh score, so the exported model
        carries one) and say how to continue."""
        self.checkpoint()
        step, steps = self.trainer.step, self.cfg.steps
        log.info("%s: time limit reached at step %d of %d; the stage's checkpoint is usable now, "
                 "and rerunning continues to %d", self.task.name, step, steps, steps)
        if step % self.cfg.val_every and self.chief:
            self.periodic(logs, loss, force_val=True, force_sample=True)
            self.save()

    def elapsed(self) -> float:
        """Seconds of this session; rank 0's on every worker when the time limit steers."""
        seconds = time.monotonic() - self.started
        if self.replica is None or self.time_limit_s is None:
            return seconds
        return agreed(seconds, self.replica, self.place.device)

    def wall_time(self) -> float:
        return self.wall_before + time.monotonic() - self.started

    def checkpoint(self) -> None:
        """Rank 0 saves the state; every worker then publishes it (Ray Train checkpoints)."""
        self.save()
        if self.replica is not None and self.replica.publish is not None:
            self.replica.publish(self.trainer.step)

    def save(self) -> None:
        """The resumable state, written by rank 0 alone."""
        if not self.chief:
            return
        self.trainer.wall_time_s = self.wall_time()
        self.trainer.extra["val"] = self.val
        self.trainer.extra["progress"] = self.done
        save_state(self.stage_dir / "state", self.net, self.optimizer, self.trainer, self.rng, self.average)

    def periodic(self, logs: Logs, loss: float, force_val: bool = False, force_sample: bool = False) -> None:
        """Validation, metrics log and sample images when their intervals come round."""
        step, cfg, task = self.trainer.step, self.cfg, self.task
        is_val = force_val or step % cfg.val_every == 0 or step == cfg.steps
        is_sample = force_sample or (step > 0 and (step % cfg.sample_every == 0 or step == cfg.steps))
        if not (is_val or is_sample):
            return
        self.net.eval()
        try:
            with torch.no_grad(), autocast(self.place.device, self.place.bf16):
                if is_val:
                    self.val = task.validate()
                    record = {"step": step, **({"loss": loss} if math.isfinite(loss) else {}), **logs,
                              **self.val}
                    self.metrics.write(record)
                    log.debug("%s step %d: %s", task.name, step, record)
                if is_sample:
                    (self.stage_dir / "samples").mkdir(exist_ok=True)
                    task.samples(self.stage_dir / "samples" / f"step_{step:07d}.png")
        finally:
            self.net.train()


def _step(task: StageTask, optimizer: torch.optim.Optimizer, step: int, progress: float, lr: float,
          grad_clip: float, rng: TrainRNG, place: Placement) -> tuple[float, Logs]:
    """One optimiser step; returns the loss and the task's logs."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    with autocast(place.device, place.bf16):
        loss, logs = task.loss(step, progress, rng)
    value = loss.item()
    if not math.isfinite(value):
        raise FloatingPointError(f"{task.name}: loss became {value} at step {step}; lower the "
                                 "learning rate (--config) and resume.")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(task.params, grad_clip)
    optimizer.step()
    return value, logs
