"""Per-row noise: each batch row draws from its own generator, so a row's samples do not depend
on which other rows share the batch."""

from __future__ import annotations

from collections.abc import Sequence

import torch


class RowNoise:
    def __init__(self, batch: int, seeds: Sequence[int] | None, device: torch.device) -> None:
        self.batch, self.device = batch, device
        self.generators: list[torch.Generator] | None = None
        if seeds is not None:
            self.generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]

    def __call__(self, *shape: int) -> torch.Tensor:
        """Standard normal noise (B, *shape), float32."""
        if self.generators is None:
            return torch.randn(self.batch, *shape, device=self.device)
        return torch.stack([torch.randn(*shape, generator=g, device=self.device) for g in self.generators])
