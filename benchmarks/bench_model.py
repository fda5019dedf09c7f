"""Frames per second of WorldModel.step per preset, batch size and precision, with parameter
counts and FLOPs per frame (torch.utils.flop_counter).

    .venv/bin/python benchmarks/bench_model.py                       # all presets, table to stdout
    .venv/bin/python benchmarks/bench_model.py --presets small --batches 1 --write

Each step is one frame per batch row: dynamics (context pass + flow step(s)) + decoder + state
head. Configurations whose batch-1 time predicts more than --max-step seconds per step are
skipped. Wall-clock FPS is what a user sees; CPU FPS (process time) shows the cost without
other processes' interference on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from pipeline.pusht.features import pusht_features
from sim_model.world_model import WorldModel

RESULTS = Path(__file__).parent / "results" / "model.md"


PRESETS = ("tiny", "small", "paper")


def parameter_counts(wm: WorldModel) -> dict[str, float]:
    parts = {"encoder": wm.net.encoder, "decoder": wm.net.decoder, "dynamics": wm.net.dynamics}
    if wm.net.state_head is not None:
        parts["state"] = wm.net.state_head
    counts = {name: sum(p.numel() for p in part.parameters()) / 1e6 for name, part in parts.items()}
    counts["total"] = sum(counts.values())
    return counts


def flops_per_frame(wm: WorldModel, size: int) -> float:
    """FLOPs of one step at batch 1 (dynamics + decode + state head)."""
    wm.reset(np.zeros((1, size, size, 3), np.uint8), seeds=[0])
    with FlopCounterMode(display=False) as counter:
        wm.step(np.full((1, 2), 256.0, np.float32))
    return float(counter.get_total_flops())


def time_steps(wm: WorldModel, batch: int, size: int, seconds: float) -> tuple[float, float, int]:
    """(wall s/step, cpu s/step, steps) after 3 warm-up steps."""
    rng = np.random.default_rng(0)
    wm.reset(rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8), seeds=list(range(batch)))
    actions = rng.uniform(0, 512, (batch, 2)).astype(np.float32)
    for _ in range(3):
        wm.step(actions)
    steps, wall0, cpu0 = 0, time.perf_counter(), time.process_time()
    while steps < 3 or time.perf_counter() - wall0 < seconds:
        wm.step(actions)
        steps += 1
    return (time.perf_counter() - wall0) / steps, (time.process_time() - cpu0) / steps, steps


def run(args: argparse.Namespace) -> list[str]:
    features = pusht_features(args.resolution)
    rows = ["| preset | params (M) enc/dec/dyn/total | GFLOP/frame | precision | batch | "
            "FPS (wall) | FPS (CPU time) | ms/step (wall) |",
            "|---|---|---|---|---|---|---|---|"]
    for preset in args.presets:
        # a preset name (random weights) or a checkpoint (a directory or a bundled name)
        base = (WorldModel.random(features, preset, precision="fp32") if preset in PRESETS
                else WorldModel.load(preset, precision="fp32"))
        p = parameter_counts(base)
        gflop = flops_per_frame(base, args.resolution) / 1e9
        params = f"{p['encoder']:.2f}/{p['decoder']:.2f}/{p['dynamics']:.2f}/{p['total']:.2f}"
        for precision in args.precisions:
            wm = WorldModel(base.net, base.config, "cpu", precision)
            batch1 = None
            for batch in args.batches:
                if batch1 is not None and batch1 * batch > args.max_step:
                    rows.append(f"| {preset} | {params} | {gflop:.2f} | {precision} | {batch} | "
                                f"skipped (~{batch1 * batch:.0f} s/step) | | |")
                    continue
                wall, cpu, steps = time_steps(wm, batch, args.resolution, args.seconds)
                batch1 = batch1 or wall / batch
                rows.append(f"| {preset} | {params} | {gflop:.2f} | {precision} | {batch} | "
                            f"{batch / wall:.1f} | {batch / cpu:.1f} | {wall * 1e3:.1f} |")
                print(rows[-1], flush=True)
    return rows


def header(args: argparse.Namespace) -> list[str]:
    cpu = platform.processor() or platform.machine()
    try:
        names = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line]
        cpu = f"{names[0]} ({len(names)} logical CPUs)" if names else cpu
    except OSError:
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return [f"# WorldModel.step throughput ({args.resolution}x{args.resolution}, one camera)", "",
            f"- CPU: {cpu}; torch {torch.__version__}, {torch.get_num_threads()} threads",
            f"- load average when the run started: {load} (the machine is shared; CPU-time FPS "
            "shows the cost without the interference)",
            f"- command: `python benchmarks/bench_model.py {' '.join(args.argv)}`", ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=list(PRESETS),
                        help="preset names (random weights) and/or checkpoints, e.g. pusht or runs/x/model")
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--resolution", type=int, default=96)
    parser.add_argument("--seconds", type=float, default=3.0, help="timing budget per configuration")
    parser.add_argument("--max-step", type=float, default=20.0, help="skip configs slower than this (s/step)")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--write", action="store_true", help=f"write the table to {RESULTS}")
    args = parser.parse_args()
    args.argv = sys.argv[1:]
    if args.threads:
        torch.set_num_threads(args.threads)
    lines = header(args)
    table = run(args)
    print("\n".join(lines + table))
    if args.write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        tmp = RESULTS.with_suffix(".tmp")
        tmp.write_text("\n".join(lines + table) + "\n")
        tmp.replace(RESULTS)


if __name__ == "__main__":
    main()
