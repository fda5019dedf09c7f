"""What an architecture arm costs: training FLOPs per window and batch-1 inference per step.

    .venv/bin/python benchmarks/bench_arms.py --data data/pusht_ablation.zarr --init-from pusht \\
        --arm control=experiments/recipes/round18_control.json \\
        --arm flat24=experiments/recipes/round18_flat24.json --threads 1

Each arm is a training config (a recipe) applied to --init-from the way `iws train --stage
dynamics --init-from` applies it, so an arm that changes the dynamics' architecture
(`fresh_dynamics`) is measured with its own, freshly initialised dynamics. Per arm:

- training GFLOP per window: forward and backward of one batch of windows from --data
  (torch.utils.flop_counter), teacher-forced and with the recipe's fed-back passes, mixed at
  the recipe's `feedback_prob`, divided by the batch size; and the CPU milliseconds the same
  mix takes per window under bf16 autocast (median of --reps steps of each kind);
- batch-1 inference: GFLOP of one WorldModel.step (dynamics + decoder + state head) and its wall
  and CPU-time milliseconds, bf16 eager, timed in turn over --rounds rounds so that the machine's
  load falls on every arm alike.

Equal-FLOP arms (issue 29) are sized with the first column; "not slower at batch 1" is read off
the last ones, against the control in the same run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parents[1]


def training_flops(task, batch_size: int, depth: int, seed: int = 0) -> float:
    """FLOPs of one step's forward and backward on `batch_size` windows after `depth` fed-back
    passes (0: teacher-forced)."""
    from sim_model.train.state import TrainRNG

    rng = TrainRNG.seeded(seed)
    idx = task.train.window_indices(rng.numpy, batch_size, task.window)
    batch = task.windows(idx)
    with FlopCounterMode(display=False) as counter:
        task.window_loss(batch, rng, depth).backward()
    task.net.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


def training_seconds(task, batch_size: int, depth: int, reps: int) -> float:
    """Median process-CPU seconds of one step's forward and backward (as training_flops)."""
    from sim_model.precision import autocast
    from sim_model.train.state import TrainRNG

    times = []
    for rep in range(reps + 1):  # the first is warm-up
        rng = TrainRNG.seeded(rep)
        batch = task.windows(task.train.window_indices(rng.numpy, batch_size, task.window))
        start = time.process_time()
        with autocast(torch.device("cpu"), True):
            loss = task.window_loss(batch, rng, depth)
        loss.backward()
        times.append(time.process_time() - start)
        task.net.zero_grad(set_to_none=True)
    return float(np.median(times[1:]))


def build(name: str, recipe: str, data, init_from: str, work: Path):
    """(stage config, net, checkpoint config, task) of one arm, as `iws train` builds them."""
    from sim_model import checkpoint as ckpt
    from sim_model.normalize import Normalizer
    from sim_model.train.dynamics import DynamicsTask
    from sim_model.train.run import _init_from, resolve_config

    init = ckpt.resolve(init_from)
    cfg = resolve_config(work / name, recipe, None, "dynamics", None, ckpt.read_config(init))
    train_view, val_view = data.split(cfg.val_fraction, cfg.seed)
    ckpt_cfg, net = _init_from(init, data, cfg, "dynamics")
    dyn, cpu = ckpt_cfg.model.dynamics, torch.device("cpu")
    task = DynamicsTask(net, train_view, val_view, cfg.dynamics, Normalizer(ckpt_cfg.normalization, cpu),
                        cpu, cfg.dynamics.window or dyn.context + 1, dyn, cfg.seed, lambda: None)
    return cfg.dynamics, net, ckpt_cfg, task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="episode store the windows are drawn from")
    parser.add_argument("--init-from", default="pusht", help="checkpoint the recipes apply to")
    parser.add_argument("--arm", action="append", required=True, metavar="NAME=RECIPE")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=3.0, help="batch-1 timing per arm and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3, help="timed training steps per arm and kind")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    torch.set_num_threads(args.threads)
    from sim_model.train.data import TrainingData
    from sim_model.world_model import WorldModel

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_model import step_flops, time_steps

    data = TrainingData.from_store(args.data)
    size = data.features.cameras[0].height
    rows, models = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.arm:
            name, recipe = spec.split("=", 1)
            stage, net, ckpt_cfg, task = build(name, recipe, data, args.init_from, Path(tmp))
            tf = training_flops(task, stage.batch_size, 0)
            fb = training_flops(task, stage.batch_size, stage.feedback_depth)
            per_window = ((1 - stage.feedback_prob) * tf + stage.feedback_prob * fb) / stage.batch_size
            seconds = ((1 - stage.feedback_prob) * training_seconds(task, stage.batch_size, 0, args.reps)
                       + stage.feedback_prob * training_seconds(task, stage.batch_size,
                                                                 stage.feedback_depth, args.reps))
            wm = WorldModel(net, ckpt_cfg, "cpu", "bf16", compile="off")
            params = sum(p.numel() for p in net.dynamics.parameters()) / 1e6
            rows[name] = [params, tf / stage.batch_size / 1e9, fb / stage.batch_size / 1e9,
                          per_window / 1e9, 1e3 * seconds / stage.batch_size, step_flops(wm, 1, size) / 1e9]
            models[name] = wm
    walls: dict[str, list[float]] = {n: [] for n in models}
    cpus: dict[str, list[float]] = {n: [] for n in models}
    for _ in range(args.rounds):
        for name, wm in models.items():
            wall, cpu, _warm = time_steps(wm, 1, size, args.seconds)
            walls[name].append(wall)
            cpus[name].append(cpu)
    print(f"# Architecture arms: cost per training window and per batch-1 step ({time.strftime('%Y-%m-%d')})\n")
    print(f"- torch {torch.__version__}, {torch.get_num_threads()} thread(s); load average at the end "
          f"{', '.join(f'{x:.1f}' for x in __import__('os').getloadavg())}")
    print(f"- command: `python benchmarks/bench_arms.py {' '.join(sys.argv[1:])}`\n")
    print("| arm | dynamics params (M) | train GFLOP/window teacher-forced | fed-back | mean at "
          "feedback_prob | train CPU ms/window (bf16) | inference GFLOP/step (batch 1) | "
          "ms/step wall (median) | ms/step CPU (median) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (params, tf, fb, mean, train_ms, inf) in rows.items():
        print(f"| {name} | {params:.2f} | {tf:.1f} | {fb:.1f} | {mean:.1f} | {train_ms:.0f} | {inf:.2f} | "
              f"{1e3 * float(np.median(walls[name])):.1f} | {1e3 * float(np.median(cpus[name])):.1f} |")


if __name__ == "__main__":
    main()
