"""An exponential moving average of the trained weights (`StageConfig.ema`).

Small-batch training (batch 4 on one CPU thread) walks around a minimum with large steps; the
average of the recent weights sits closer to it than the last ones do. The average is kept in
fp32 beside the parameters, saved with the training state (so a resumed run continues the same
average) and is what a stage exports when it is on; the last weights are exported beside it for
comparison (`OUT/<stage>/model_last/`).
"""

from __future__ import annotations

import torch


class WeightAverage:
    """EMA over `params` with the usual warm-up: the decay after n updates is
    min(decay, (1 + n) / (10 + n)), so early weights (a fresh net's or a checkpoint the run
    continues from) fade quickly instead of lingering for ~1 / (1 - decay) steps."""

    def __init__(self, named: dict[str, torch.nn.Parameter], decay: float) -> None:
        if not 0 < decay < 1:
            raise ValueError(f"an average's decay must lie in (0, 1), not {decay}")
        self.decay = decay
        self.updates = 0
        self._params = named
        self.shadow = {name: p.detach().float().clone() for name, p in named.items()}

    def current_decay(self) -> float:
        return min(self.decay, (1 + self.updates) / (10 + self.updates))

    @torch.no_grad()
    def update(self) -> None:
        d = self.current_decay()
        for name, p in self._params.items():
            self.shadow[name].lerp_(p.detach().float(), 1 - d)
        self.updates += 1

    def tensors(self) -> dict[str, torch.Tensor]:
        """What to save: the shadow weights and the update count (as a tensor)."""
        return {**{f"ema.{k}": v for k, v in self.shadow.items()},
                "__ema_updates__": torch.tensor(self.updates, dtype=torch.int64)}

    def restore(self, tensors: dict[str, torch.Tensor]) -> None:
        """Load what `tensors` wrote; a name it lacks (an average switched on when resuming)
        keeps the current weights."""
        for name, value in tensors.items():
            if name.startswith("ema.") and name[4:] in self.shadow:
                self.shadow[name[4:]] = value.to(self.shadow[name[4:]].device, torch.float32)
        if "__ema_updates__" in tensors:
            self.updates = int(tensors["__ema_updates__"])

    def state_dict(self, net: torch.nn.Module) -> dict[str, torch.Tensor]:
        """`net`'s state dict with the averaged weights in place of the trained parameters."""
        state = net.state_dict()
        for name, value in self.shadow.items():
            state[name] = value.to(state[name].dtype)
        return state
