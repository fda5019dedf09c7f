"""Resumable training state in safetensors + JSON (never pickle): weights, AdamW moments,
step, wall time and every RNG the trainer draws from."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from schemas.errors import SpecError
from sim_model.storage.atomic import replace_dir
from sim_model.train.average import WeightAverage

WEIGHTS, OPTIM, TRAINER = "weights.safetensors", "optimizer.safetensors", "trainer.json"
AVERAGE = "average.safetensors"


@dataclass
class TrainRNG:
    """Data order (numpy) and noise (torch, CPU so runs reproduce across devices)."""

    numpy: np.random.Generator
    noise: torch.Generator
    # The numpy generator the next step starts from, when each step has its own (parallel.py);
    # None: one stream for all steps.
    upcoming: Callable[[], np.random.Generator] | None = None

    @classmethod
    def seeded(cls, seed: int) -> TrainRNG:
        return cls(np.random.default_rng(seed), torch.Generator().manual_seed(seed))

    def next_numpy(self) -> np.random.Generator:
        """A generator in the state the next step's numpy draws will start from, assuming this
        step draws nothing more from `numpy`: for prefetching the next batch's frames. Drawing
        from it leaves this RNG as it was."""
        return self.upcoming() if self.upcoming is not None else copy.deepcopy(self.numpy)

    def randn(self, *shape: int, device: torch.device) -> torch.Tensor:
        return torch.randn(*shape, generator=self.noise).to(device)

    def rand(self, *shape: int, device: torch.device) -> torch.Tensor:
        return torch.rand(*shape, generator=self.noise).to(device)


@dataclass
class TrainerState:
    step: int = 0
    wall_time_s: float = 0.0
    hardware: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    state = optimizer.state_dict()
    tensors = {f"{index}.{name}": value for index, slots in state["state"].items()
               for name, value in slots.items() if torch.is_tensor(value)}
    return tensors, {"param_groups": state["param_groups"]}


def save_state(directory: str | os.PathLike[str], net: torch.nn.Module, optimizer: torch.optim.Optimizer,
               trainer: TrainerState, rng: TrainRNG, average: WeightAverage | None = None) -> None:
    """Atomically (directory swap) write the whole training state (with the weight average when
    the stage keeps one)."""
    opt_tensors, opt_meta = _optimizer_tensors(optimizer)
    opt_tensors["__torch_rng__"] = rng.noise.get_state()
    payload = {"step": trainer.step, "wall_time_s": trainer.wall_time_s, "hardware": trainer.hardware,
               "extra": trainer.extra, "optimizer": opt_meta,
               "numpy_rng": rng.numpy.bit_generator.state}

    def write(tmp: Path) -> None:
        save_file({k: v.detach().contiguous().cpu() for k, v in net.state_dict().items()}, tmp / WEIGHTS)
        save_file({k: v.detach().contiguous().cpu() for k, v in opt_tensors.items()}, tmp / OPTIM)
        if average is not None:
            save_file({k: v.contiguous().cpu() for k, v in average.tensors().items()}, tmp / AVERAGE)
        (tmp / TRAINER).write_text(json.dumps(payload, indent=1))

    replace_dir(directory, write)


def load_state(directory: Path, net: torch.nn.Module, optimizer: torch.optim.Optimizer,
               rng: TrainRNG) -> TrainerState:
    """Restore what save_state wrote into `net`, `optimizer` and `rng`. SpecError naming the file
    when one is missing, truncated or not this stage's (another run's state copied in)."""
    payload = _read(directory / TRAINER, lambda path: json.loads(path.read_text()))
    weights = _read(directory / WEIGHTS, load_file)
    opt_tensors = _read(directory / OPTIM, load_file)
    device = next(net.parameters()).device
    try:
        net.load_state_dict({k: v.to(device) for k, v in weights.items()})
    except RuntimeError as error:  # other keys or shapes: not this stage's net
        why = f"its weights do not fit this stage's model: {error}"
        raise SpecError(_unreadable(directory / WEIGHTS, why)) from None
    try:
        rng.noise.set_state(opt_tensors.pop("__torch_rng__"))
        slots: dict[int, dict[str, torch.Tensor]] = {}
        for key, value in opt_tensors.items():
            index, name = key.split(".", 1)
            slots.setdefault(int(index), {})[name] = value if name == "step" else value.to(device)
        groups = payload["optimizer"]["param_groups"]
        for group in groups:
            if "betas" in group:
                group["betas"] = tuple(group["betas"])
        optimizer.load_state_dict({"state": slots, "param_groups": groups})
        rng.numpy.bit_generator.state = payload["numpy_rng"]
        return TrainerState(step=payload["step"], wall_time_s=payload["wall_time_s"],
                            hardware=payload["hardware"], extra=payload.get("extra", {}))
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        raise SpecError(_unreadable(directory / OPTIM, f"it and {TRAINER} do not hold this stage's optimiser "
                                    f"state ({type(error).__name__}: {error})")) from None


def _read(path: Path, load: Callable[[Path], Any]) -> Any:
    try:
        return load(path)
    except (SafetensorError, OSError, ValueError) as error:  # JSONDecodeError is a ValueError
        raise SpecError(_unreadable(path, f"it cannot be read ({error})")) from None


def _unreadable(path: Path, why: str) -> str:
    return (f"the training state file {path} is damaged: {why}. Restore it from a copy, or delete that "
            f"folder ({path.parent}) to restart the stage from scratch.")


def load_average(directory: Path) -> dict[str, torch.Tensor]:
    """The weight average save_state wrote, or {} when the state has none."""
    path = directory / AVERAGE
    if not path.is_file():
        return {}
    return _read(path, load_file)
