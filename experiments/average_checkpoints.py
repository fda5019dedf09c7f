"""Average the weights of checkpoints of one architecture (a "model soup" of checkpoints along
one training chain, e.g. the two GPU bursts), to score against its parts.

    python -m experiments.average_checkpoints --out runs/soup_b1b2 runs/gpu_burst1/model runs/gpu_burst2/model

Floating-point tensors are averaged (with --weights, a weighted mean); integer buffers must agree.
The result takes the last checkpoint's config and provenance, with the soup named in its
`provenance.data` note, and loads with WorldModel.load like any checkpoint.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from schemas.errors import SpecError
from sim_model import checkpoint as ckpt


def average(directories: list[Path], weights: list[float] | None = None) -> tuple[ckpt.CheckpointConfig, dict[str, torch.Tensor]]:
    if len(directories) < 2:
        raise SpecError("average at least two checkpoints.")
    weights = weights or [1.0] * len(directories)
    if len(weights) != len(directories) or min(weights) < 0 or sum(weights) <= 0:
        raise SpecError("give one non-negative weight per checkpoint, not all zero.")
    configs = [ckpt.read_config(d) for d in directories]
    for directory, config in zip(directories[1:], configs[1:], strict=True):
        if config.model != configs[0].model or config.features != configs[0].features:
            raise SpecError(f"{directory} has another architecture or features than {directories[0]}; "
                            "only checkpoints of one model can be averaged.")
    tensors = [ckpt.read_weights(d) for d in directories]
    total = sum(weights)
    soup: dict[str, torch.Tensor] = {}
    for key, first in tensors[0].items():
        if first.is_floating_point():
            mean = sum(w / total * t[key].double() for w, t in zip(weights, tensors, strict=True))
            soup[key] = mean.to(first.dtype)  # type: ignore[union-attr]
        elif all(torch.equal(first, t[key]) for t in tensors[1:]):
            soup[key] = first
        else:
            raise SpecError(f"the integer tensor {key} differs between the checkpoints.")
    last = configs[-1]
    note = "soup of " + ", ".join(f"{d} x{w / total:.3g}" for d, w in zip(directories, weights, strict=True))
    provenance = last.provenance.model_copy(update={"data": f"{last.provenance.data} ({note})"})
    return last.model_copy(update={"provenance": provenance}), soup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", type=Path)
    parser.add_argument("--weights", type=float, nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    config, tensors = average(args.checkpoints, args.weights)
    ckpt.write_checkpoint(args.out, config, tensors)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
