"""Frames per second of WorldModel.step per preset, batch size and precision, with parameter
counts, FLOPs per step (torch.utils.flop_counter) and the fraction of the device's limit.

    .venv/bin/python benchmarks/bench_model.py                       # all presets, table to stdout
    .venv/bin/python benchmarks/bench_model.py --presets small --batches 1 --write

Each step is one frame per batch row: dynamics (context pass + flow step(s)) + decoder + state
head. Configurations whose batch-1 time predicts more than --max-step seconds per step are
skipped. Wall-clock FPS is what a user sees; CPU FPS (process time) shows the cost without
other processes' interference on a shared machine.

The limit is a plain square matmul in the same precision, measured in this process with the
same thread count at the start of the run (and again at the end, to show drift): "% of limit"
is achieved GFLOP/s over that rate, wall over wall and CPU time over CPU time, so the ratio
holds on a shared machine whose absolute speed moves from minute to minute.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from pipeline.pusht.features import pusht_features
from sim_model.world_model import WorldModel

RESULTS = Path(__file__).parent / "results" / "model.md"
PROFILE = Path(__file__).parent / "results" / "model_profile.md"


PRESETS = ("tiny", "small", "paper")


def parameter_counts(wm: WorldModel) -> dict[str, float]:
    parts = {"encoder": wm.net.encoder, "decoder": wm.net.decoder, "dynamics": wm.net.dynamics}
    if wm.net.state_head is not None:
        parts["state"] = wm.net.state_head
    counts = {name: sum(p.numel() for p in part.parameters()) / 1e6 for name, part in parts.items()}
    counts["total"] = sum(counts.values())
    return counts


@dataclass
class Rate:
    """A throughput in FLOP/s, by wall clock and by this process's CPU time."""

    wall: float
    cpu: float


def matmul_rate(precision: str, device: torch.device, seconds: float = 1.0) -> Rate:
    """FLOP/s of an n x n matmul (n = 1024 on CPU, 8192 on CUDA), the best of repeated timings:
    the dense-compute rate this device reaches in this process at this thread count."""
    n = 8192 if device.type == "cuda" else 1024
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
    best_wall = best_cpu = float("inf")
    deadline = time.perf_counter() + seconds
    for i in range(1000):
        wall0, cpu0 = time.perf_counter(), time.process_time()
        torch.mm(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i:  # the first call pays one-off set-up
            best_wall = min(best_wall, time.perf_counter() - wall0)
            best_cpu = min(best_cpu, max(time.process_time() - cpu0, 1e-9))
        if i >= 3 and time.perf_counter() > deadline:
            break
    return Rate(2 * n**3 / best_wall, 2 * n**3 / best_cpu)


def step_flops(wm: WorldModel, batch: int, size: int) -> float:
    """FLOPs of one step of `batch` rows (dynamics + decode + state head): matmuls and convs,
    as torch.utils.flop_counter counts them."""
    wm.reset(np.zeros((batch, size, size, 3), np.uint8), seeds=list(range(batch)))
    with FlopCounterMode(display=False) as counter:
        wm.step(np.full((batch, 2), 256.0, np.float32))
    return float(counter.get_total_flops())


def time_steps(wm: WorldModel, batch: int, size: int, seconds: float) -> tuple[float, float, float]:
    """(wall s/step, cpu s/step, warm-up s): warm-up is reset plus 3 steps, where a compiled
    model builds its graphs for this batch size; the steady steps follow."""
    rng = np.random.default_rng(0)
    warm0 = time.perf_counter()
    wm.reset(rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8), seeds=list(range(batch)))
    actions = rng.uniform(0, 512, (batch, 2)).astype(np.float32)
    for _ in range(3):
        wm.step(actions)
    warm_up = time.perf_counter() - warm0
    steps, wall0, cpu0 = 0, time.perf_counter(), time.process_time()
    while steps < 3 or time.perf_counter() - wall0 < seconds:
        wm.step(actions)
        steps += 1
    return (time.perf_counter() - wall0) / steps, (time.process_time() - cpu0) / steps, warm_up


def op_kind(name: str) -> str:
    """The kind of work an aten op does, for the profile's share-of-time summary."""
    if "conv" in name:
        return "convolution"
    if any(k in name for k in ("addmm", "aten::mm", "bmm", "dot_product", "einsum", "linear")):
        return "matmul / attention"
    if "norm" in name:
        return "group/layer norm"
    if any(k in name for k in ("copy", "to_copy", "empty", "cat", "stack", "normal_", "clone")):
        return "copies, casts, allocation, noise"
    return "pointwise and other"


def profile_step(wm: WorldModel, batch: int, size: int, steps: int) -> list[str]:
    """torch.profiler over `steps` steps: a markdown summary of self CPU time by kind of op and
    the top ops, with aten calls per step (each costs dispatcher and Python time at batch 1)."""
    from torch.profiler import ProfilerActivity, profile

    rng = np.random.default_rng(0)
    wm.reset(rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8), seeds=list(range(batch)))
    actions = rng.uniform(0, 512, (batch, 2)).astype(np.float32)
    for _ in range(3):
        wm.step(actions)
    wall0 = time.perf_counter()
    for _ in range(steps):
        wm.step(actions)
    plain_ms = (time.perf_counter() - wall0) / steps * 1e3
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            wm.step(actions)
    events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    total = sum(e.self_cpu_time_total for e in events)
    kinds: dict[str, float] = {}
    for e in events:
        kinds[op_kind(e.key)] = kinds.get(op_kind(e.key), 0.0) + e.self_cpu_time_total
    calls = sum(e.count for e in events) / steps
    lines = [f"step {plain_ms:.1f} ms without the profiler; {calls:.0f} aten calls per step; "
             f"ops' self time under the profiler {total / steps / 1e3:.1f} ms per step", "",
             "| kind of op | share of op time |", "|---|---|"]
    lines += [f"| {kind} | {100 * t / total:.0f}% |" for kind, t in sorted(kinds.items(), key=lambda kv: -kv[1])]
    lines += ["", "| top ops (self CPU) | share | calls per step |", "|---|---|---|"]
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:10]:
        lines.append(f"| `{e.key}` | {100 * e.self_cpu_time_total / total:.1f}% | {e.count / steps:.0f} |")
    return lines


def run_profiles(args: argparse.Namespace) -> list[str]:
    features = pusht_features(args.resolution)
    lines = []
    for preset in args.presets:
        for precision in args.precisions:
            wm = (WorldModel.random(features, preset, precision=precision, compile="off") if preset in PRESETS
                  else WorldModel.load(preset, precision=precision, compile="off"))
            for batch in args.batches:
                lines += [f"## {preset}, {precision}, batch {batch}", ""]
                lines += profile_step(wm, batch, args.resolution, steps=max(3, 64 // batch)) + [""]
                print("\n".join(lines[-20:]), flush=True)
    return lines


def run(args: argparse.Namespace, limits: dict[str, Rate]) -> list[str]:
    features = pusht_features(args.resolution)
    rows = ["| preset | params (M) enc/dec/dyn/total | GFLOP/frame | precision | compile | batch | "
            "warm-up s | FPS (wall) | FPS (CPU time) | ms/step (wall) | GFLOP/s (wall) | "
            "% of limit (wall) | % of limit (CPU time) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for preset in args.presets:
        # a preset name (random weights) or a checkpoint (a directory or a bundled name)
        base = (WorldModel.random(features, preset, precision="fp32", compile="off") if preset in PRESETS
                else WorldModel.load(preset, precision="fp32", compile="off"))
        p = parameter_counts(base)
        params = f"{p['encoder']:.2f}/{p['decoder']:.2f}/{p['dynamics']:.2f}/{p['total']:.2f}"
        flops: dict[int, float] = {}  # per batch size; the same in every precision
        for precision, mode in itertools.product(args.precisions, args.compile):
            eager = WorldModel(base.net, base.config, args.device, precision, compile="off")
            wm = eager if mode == "off" else WorldModel(base.net, base.config, args.device, precision, mode)
            limit = limits[precision]
            batch1 = None
            for batch in args.batches:
                cells = f"| {preset} | {params} | {{}} | {precision} | {mode} | {batch} |"
                if batch1 is not None and batch1 * batch > args.max_step:
                    rows.append(cells.format("") + f" | skipped (~{batch1 * batch:.0f} s/step) | | | | | | |")
                    continue
                if batch not in flops:  # counted on the eager path: a compiled graph hides its ops
                    flops[batch] = step_flops(eager, batch, args.resolution)
                wall, cpu, warm_up = time_steps(wm, batch, args.resolution, args.seconds)
                batch1 = batch1 or wall / batch
                rows.append(cells.format(f"{flops[batch] / batch / 1e9:.2f}") +
                            f" {warm_up:.1f} | {batch / wall:.1f} | {batch / cpu:.1f} | {wall * 1e3:.1f} | "
                            f"{flops[batch] / wall / 1e9:.0f} | {100 * flops[batch] / wall / limit.wall:.0f}% | "
                            f"{100 * flops[batch] / cpu / limit.cpu:.0f}% |")
                print(rows[-1], flush=True)
    return rows


def describe_limits(limits: dict[str, Rate], when: str) -> str:
    return f"- matmul limit {when}: " + "; ".join(
        f"{precision} {rate.wall / 1e9:.0f} GFLOP/s wall, {rate.cpu / 1e9:.0f} CPU time"
        for precision, rate in limits.items())


def header(args: argparse.Namespace, limits: dict[str, Rate]) -> list[str]:
    cpu = platform.processor() or platform.machine()
    try:
        names = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line]
        cpu = f"{names[0]} ({len(names)} logical CPUs)" if names else cpu
    except OSError:
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return [f"# WorldModel.step throughput ({args.resolution}x{args.resolution}, one camera)", "",
            f"- CPU: {cpu}; torch {torch.__version__}, {torch.get_num_threads()} threads",
            *([f"- GPU: {torch.cuda.get_device_name(args.device)}"] if args.device.startswith("cuda") else []),
            f"- load average when the run started: {load} (the machine is shared; CPU-time FPS "
            "shows the cost without the interference)",
            f"- command: `python benchmarks/bench_model.py {' '.join(args.argv)}`",
            describe_limits(limits, "at the start (square matmul, same process and threads)")]


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
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--compile", nargs="+", default=["off"], choices=["off", "on", "cudagraphs"],
                        help="step paths to compare (WorldModel compile=...); cudagraphs needs cuda")
    parser.add_argument("--profile", action="store_true",
                        help=f"profile each configuration instead (torch.profiler; --write to {PROFILE})")
    parser.add_argument("--write", nargs="?", type=Path, const=RESULTS, metavar="PATH",
                        help=f"write the table to PATH (default {RESULTS}; with --profile {PROFILE})")
    args = parser.parse_args()
    args.argv = sys.argv[1:]
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.profile:
        lines = [f"# WorldModel.step profile ({args.resolution}x{args.resolution}, one camera)", "",
                 f"- torch {torch.__version__}, {torch.get_num_threads()} threads; load average "
                 + ", ".join(f"{x:.1f}" for x in os.getloadavg()),
                 f"- command: `python benchmarks/bench_model.py {' '.join(args.argv)}`", ""]
        lines += run_profiles(args)
        if args.write:
            write_atomic(PROFILE if args.write == RESULTS else args.write, lines)
        return
    device = torch.device(args.device)
    limits = {precision: matmul_rate(precision, device) for precision in args.precisions}
    lines = header(args, limits)
    print("\n".join(lines), flush=True)
    table = run(args, limits)
    end = {precision: matmul_rate(precision, device) for precision in args.precisions}
    lines += [describe_limits(end, "at the end"), ""]
    print("\n".join(lines + table))
    if args.write:
        write_atomic(args.write, lines + table)


def write_atomic(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


if __name__ == "__main__":
    main()
