"""What a stage hands the training loop: its parameters, loss, validation and samples."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from sim_model.train.state import TrainRNG

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


@dataclass(frozen=True)
class Placement:
    """Where a stage's steps run and what seeds them."""

    device: torch.device
    bf16: bool  # autocast to bfloat16
    seed: int
