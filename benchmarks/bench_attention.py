"""The dynamics' spatial attention on the CPU: torch's fused kernel in bf16 against the same
kernel in fp32 (what sim_model.nn.blocks.attention runs when gradients flow through bf16 on the
CPU), forward + backward as in training and forward alone as at inference, at the bottleneck
shapes of the models trained here, in one run so the machine's load falls on both alike.

    .venv/bin/python benchmarks/bench_attention.py --threads 1

Shapes are (windows x frames, heads, tokens, head width): a training batch of 4 windows of 9
frames at the `small` preset's 12x12 bottleneck (v1.5) and at the 24x24 stage of an all-24x24
arm (round 18), and a batch-1 inference step of v1.5. The fp32 times include the casts.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

SHAPES = {"train, small (v1.5) 12x12": (36, 4, 144, 32), "train, all-24x24 arm": (36, 4, 576, 20),
          "inference batch 1, small": (1, 4, 144, 32)}


def fp32(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q.float(), k.float(), v.float()).to(q.dtype)


def timed(fn, shape: tuple[int, ...], backward: bool, reps: int) -> float:
    """Median CPU milliseconds of forward (+ backward) on bf16 inputs."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(*shape, generator=gen, dtype=torch.bfloat16, requires_grad=backward)
               for _ in range(3))
    times = []
    for _ in range(reps + 1):  # the first is warm-up
        start = time.process_time()
        out = fn(q, k, v)
        if backward:
            out.float().square().mean().backward()
        times.append(time.process_time() - start)
    return 1e3 * float(np.median(times[1:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"# Spatial attention on the CPU, bf16 inputs ({time.strftime('%Y-%m-%d')})\n")
    print(f"- torch {torch.__version__}, {torch.get_num_threads()} thread(s); command: "
          f"`python benchmarks/bench_attention.py {' '.join(sys.argv[1:])}`\n")
    print("| where | (B, heads, tokens, width) | pass | fused bf16 ms | fused fp32 ms | bf16 / fp32 | iws runs |")
    print("|---|---|---|---|---|---|---|")
    for name, shape in SHAPES.items():
        for backward in (True, False):
            bf16, full = timed(F.scaled_dot_product_attention, shape, backward, args.reps), timed(fp32, shape, backward, args.reps)
            print(f"| {name} | {shape} | {'forward + backward' if backward else 'forward'} | {bf16:.2f} | "
                  f"{full:.2f} | {bf16 / full:.2f} | {'fp32' if backward else 'bf16'} |", flush=True)


if __name__ == "__main__":
    main()
